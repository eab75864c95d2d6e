#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

import re

import pytest

from nova_adaptive_paging import cpu


# Family/model numbers as Intel and AMD publish them (Linux's
# arch/x86/include/asm/intel-family.h names the same models): the seed
# paper's i7-860 is family 6 model 0x1e, Ice Lake-SP 0x6a, Sapphire
# Rapids 0x8f, Skylake/Cascade/Cooper Lake-SP share 0x55 by stepping; AMD
# family 0x17 is Zen/Zen 2, 0x19 Zen 3/Zen 4, 0x1a Zen 5.
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
    # Checked against the kernel's own text, read here independently: the
    # vendor prefix, and for a CPU the tables do not name, the family and
    # model the kernel prints.
    text = open('/proc/cpuinfo').read()
    fields = dict(re.findall(r'^(vendor_id|cpu family|model)\s*: (\S+)$',
                             text, re.M))
    key = cpu.host_generation()
    assert key.startswith({'GenuineIntel': 'intel-', 'AuthenticAMD':
                           'amd-'}.get(fields['vendor_id'], ''))
    assert cpu.is_generation_key(key)
    if key not in cpu.named_keys():
        assert key.endswith('-%s-%s' % (fields['cpu family'],
                                        fields['model']))


def test_every_named_key_is_one_a_cpu_can_get():
    # A profile filed under a key no CPU maps to would never be used.
    reached = set()
    for vendor, families in (('GenuineIntel', [6]),
                             ('AuthenticAMD', [0x17, 0x19, 0x1a])):
        for family in families:
            for model in range(256):
                for stepping in (None, 5, 11):
                    reached.add(cpu.generation_key(vendor, family, model,
                                                   stepping=stepping))
    for name in ('Cooperlake', 'Icelake-Client', 'Cascadelake-Server',
                 'Skylake-Client', 'EPYC-Genoa', 'Haswell'):
        reached.add(cpu.generation_key('Intel' if 'EPYC' not in name
                                       else 'AMD', 99, 0, name))
    assert cpu.named_keys() - reached == set()


@pytest.mark.parametrize('key,ok', [
    ('intel-nehalem', True), ('amd-zen4', True), ('intel-6-254', True),
    ('nehalem', False), ('sapphirerapids-5lp', False), ('intel-zen', False),
    ('intel-nehalem\n', False), ('intel-6-254\n', False), ('', False)])
def test_is_generation_key(key, ok):
    assert cpu.is_generation_key(key) == ok
