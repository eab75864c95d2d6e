import re

import pytest

from nova_adaptive_paging import cpu


@pytest.mark.parametrize('args,key', [
    (('GenuineIntel', 6, 0x1e), 'intel-nehalem'),    # i7-860
    (('GenuineIntel', 6, 0x6a), 'intel-icelake-server'),
    (('GenuineIntel', 6, 0x8f), 'intel-sapphirerapids-server'),
    (('Intel', 6, 0x55, None, 4), 'intel-skylake-server'),
    (('Intel', 6, 0x55, None, 7), 'intel-cascadelake-server'),
    (('Intel', 6, 0x55, None, 11), 'intel-cooperlake-server'),
    (('AuthenticAMD', 0x17, 0x01), 'amd-zen'),
    (('AuthenticAMD', 0x17, 0x31), 'amd-zen2'),
    (('AuthenticAMD', 0x19, 0x01), 'amd-zen3'),
    (('AMD', 0x19, 0x11), 'amd-zen4'),
    (('AuthenticAMD', 0x1a, 0x02), 'amd-zen5'),
])
def test_known_cpus(args, key):
    assert cpu.generation_key(*args) == key


def test_unknown_cpu_gets_a_stable_key():
    assert cpu.generation_key('GenuineIntel', 6, 0xfe) == 'intel-6-254'
    assert cpu.generation_key('AuthenticAMD', 0x30, 1) == 'amd-48-1'
    assert cpu.generation_key('Weird Vendor!', 1, 2) == 'weirdvendor-1-2'
    assert cpu.generation_key('', 0, 0) == 'unknown-0-0'


def test_libvirt_model_breaks_ties_for_unknown_models():
    assert cpu.generation_key('Intel', 6, 0xfe,
                              'Icelake-Server-noTSX') == \
        'intel-icelake-server'
    assert cpu.generation_key('AMD', 0x30, 0, 'EPYC-Milan-v2') == 'amd-zen3'
    # a known family/model wins over the libvirt baseline name
    assert cpu.generation_key('AMD', 0x19, 0x11, 'EPYC-Milan') == 'amd-zen4'
    # a model of another vendor is ignored
    assert cpu.generation_key('Intel', 6, 0xfe, 'EPYC') == 'intel-6-254'


CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 30
model name\t: Intel(R) Core(TM) i7 CPU         860  @ 2.80GHz
stepping\t: 5

processor\t: 1
vendor_id\t: AuthenticAMD
"""


def test_host_generation_from_cpuinfo(tmp_path):
    path = tmp_path / 'cpuinfo'
    path.write_text(CPUINFO)
    assert cpu.parse_cpuinfo(CPUINFO) == ('GenuineIntel', 6, 30, 5)
    assert cpu.host_generation(str(path)) == 'intel-nehalem'


def test_this_machine_has_a_key():
    assert re.fullmatch(r'[a-z0-9]+-[a-z0-9-]+', cpu.host_generation())
