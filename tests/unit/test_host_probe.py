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

"""What a host can give, read from a root laid out like a compute node's
/sys (the kernel's file names and formats: Linux 6.12's module
parameters print bools as Y/N, securityfs brackets the lockdown level)."""

import fcntl
import os

import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.host import probe
from nova_adaptive_paging import vocabulary

P = vocabulary.Paging
V = spec.ABI_VERSION


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + '\n')


def host_root(tmp_path, abi=None, module='kvm_amd', tdp='Y', tdp_mmu='Y',
              **extra):
    if abi is not None:
        write(tmp_path, 'sys/module/kvm/parameters/paging_switch_abi',
              str(abi))
    if module:
        write(tmp_path, 'sys/module/%s/parameters/%s' % (
            module, 'npt' if module == 'kvm_amd' else 'ept'), tdp)
        write(tmp_path, 'sys/module/kvm/parameters/tdp_mmu', tdp_mmu)
    for rel, text in extra.items():
        write(tmp_path, rel, text)
    return str(tmp_path)


@pytest.mark.parametrize('abi,module,tdp,modes,switching', [
    (V, 'kvm_amd', 'Y', {P.ADAPTIVE, P.HAP, P.SHADOW}, True),
    (V, 'kvm_intel', 'N', {P.SHADOW}, False),     # patched, ept=0
    (None, 'kvm_intel', 'Y', {P.HAP}, False),     # stock KVM
    (None, 'kvm_amd', 'N', {P.SHADOW}, False),    # stock, npt=0
    (V + 1, 'kvm_amd', 'Y', {P.HAP}, False),      # unknown ABI: no patch
    (1, 'kvm_amd', 'Y', {P.HAP}, False),          # version 1: no ioctl
    ('1x', 'kvm_amd', 'Y', {P.HAP}, False),       # unreadable version
    (None, None, 'Y', set(), False),              # no KVM at all
])
def test_detect(tmp_path, abi, module, tdp, modes, switching):
    c = probe.detect(host_root(tmp_path, abi, module, tdp), 'amd-zen3',
                     calibrated=False)
    assert c.modes == modes
    assert (vocabulary.TRAIT_SWITCHING in c.traits()) == switching
    assert (vocabulary.TRAIT_SHADOW in c.traits()) == (P.SHADOW in modes)
    assert 'CUSTOM_PAGING_CPU_AMD_ZEN3' in c.traits()
    assert vocabulary.TRAIT_CALIBRATED not in c.traits()


# Each fact that stops the agent from driving a loaded patch: the host
# then claims what stock KVM gives (hap with TDP on), never shadow or
# adaptive, and says why.
BLOCKED = [
    ('kvm_amd', {'sys/module/kvm_amd/parameters/avic': 'Y'}, 'AVIC'),
    ('kvm_amd', {'sys/module/kvm/parameters/tdp_mmu': 'N'}, 'TDP MMU'),
    ('kvm_intel', {'sys/module/kvm_intel/parameters/pt_mode': '1'},
     'Intel PT'),
    # KVM on Hyper-V with its enlightened TLB flush, which only the
    # kernel's own word shows.
    ('kvm_intel', {'sys/module/kvm/parameters/paging_switch_supported': 'N'},
     'Hyper-V'),
]


@pytest.mark.parametrize('module,files,reason', BLOCKED)
def test_a_kernel_that_cannot_be_driven_claims_no_switching(
        tmp_path, module, files, reason):
    root = host_root(tmp_path, V, module, 'Y')
    for rel, text in files.items():
        write(tmp_path, rel, text)
    c = probe.detect(root, 'amd-zen3', calibrated=True)
    assert c.modes == {P.HAP}
    assert not {vocabulary.TRAIT_SWITCHING, vocabulary.TRAIT_SHADOW} & \
        c.traits()
    assert len(c.blockers) == 1 and reason in c.blockers[0]


def test_missing_tdp_mmu_parameter_blocks(tmp_path):
    root = host_root(tmp_path, V, 'kvm_amd', 'Y')
    (tmp_path / 'sys/module/kvm/parameters/tdp_mmu').unlink()
    assert not probe.tdp_mmu(root)
    assert probe.detect(root, 'amd-zen3', False).modes == {P.HAP}


@pytest.mark.parametrize('level', ['integrity', 'confidentiality'])
def test_lockdown_does_not_block(tmp_path, level):
    # Version 2 drives the per-VM files through the VM file descriptor,
    # which lockdown leaves open (debugfs it closes for writing).
    words = ['none', 'integrity', 'confidentiality']
    root = host_root(tmp_path, V, 'kvm_amd', 'Y', **{
        'sys/kernel/security/lockdown': ' '.join(
            '[%s]' % w if w == level else w for w in words)})
    assert probe.lockdown(root) == level
    c = probe.detect(root, 'amd-zen3', False)
    assert c.switching and c.blockers == ()


def test_facts_that_do_not_block(tmp_path):
    # AVIC matters on AMD only, PT host-guest mode on Intel only, and an
    # unlocked kernel or one without the lockdown LSM is "none".
    root = host_root(tmp_path, V, 'kvm_intel', 'Y', **{
        'sys/module/kvm_amd/parameters/avic': 'Y',
        'sys/kernel/security/lockdown': '[none] integrity confidentiality'})
    assert probe.lockdown(root) == 'none'
    assert probe.detect(root, 'intel-icelake-server', False).switching
    assert probe.lockdown(str(tmp_path / 'elsewhere')) == 'none'
    root2 = host_root(tmp_path / 'amd', V, 'kvm_amd', 'Y', **{
        'sys/module/kvm_intel/parameters/pt_mode': '1',
        'sys/module/kvm_amd/parameters/avic': 'N'})
    assert probe.detect(root2, 'amd-zen3', False).switching


def test_stock_host_reports_no_blockers(tmp_path):
    # Blockers are about driving the patch; without it there is nothing
    # to drive, and a stock host with AVIC still gives hap.
    root = host_root(tmp_path, None, 'kvm_amd', 'Y', **{
        'sys/module/kvm_amd/parameters/avic': 'Y'})
    c = probe.detect(root, 'amd-zen3', False)
    assert c.blockers == () and c.modes == {P.HAP}


def test_trait_names_are_placement_safe():
    # Placement: custom traits are CUSTOM_ then [A-Z0-9_].
    assert vocabulary.cpu_trait('intel-icelake-server') == \
        'CUSTOM_PAGING_CPU_INTEL_ICELAKE_SERVER'
    assert vocabulary.cpu_trait('intel-6-254') == \
        'CUSTOM_PAGING_CPU_INTEL_6_254'


def test_every_policy_has_one_trait():
    assert set(vocabulary.REQUIRED_TRAIT) == set(P)
    assert len(vocabulary.MODE_TRAITS) == len(P)


def test_the_page_walk_line_says_what_counts_walk_cycles_or_why_nothing(
        tmp_path):
    walk = spec.param_path(spec.PARAM_WALK_EVENTS)
    root = host_root(tmp_path, abi=V, module='kvm_intel')
    line = probe.walk_cycles(root, 'intel-icelake-server')
    assert 'DTLB_LOAD_MISSES.WALK_PENDING' in line
    assert line.endswith('not counted: the kernel has no %s' % walk)
    write(tmp_path, walk, 'load=0 store=0')
    assert 'not counted: %s reads "load=0 store=0"' % walk in \
        probe.walk_cycles(root, 'intel-icelake-server')
    write(tmp_path, walk, 'load=4104 store=4169')
    assert probe.walk_cycles(root, 'intel-icelake-server').endswith(
        '; counted')
    write(tmp_path, walk, 'load=4104')
    assert 'not counted: %s: missing store' % walk in probe.walk_cycles(
        root, 'intel-icelake-server')
    # No such event: said, whatever the kernel has.
    for key, why in (('amd-zen3', 'not their cycles'),
                     ('intel-nehalem', 'WALK_COMPLETED'),
                     ('intel-6-999', 'nobody has looked up')):
        line = probe.walk_cycles(root, key)
        assert line.startswith('%s: none: ' % key) and why in line, line


# -- PVM: KVM for guests of a host that is itself a guest ---------------------
def pvm_root(tmp_path):
    # Its module's own parameters (Linux 6.18's PVM); kvm's TDP MMU is off.
    write(tmp_path, 'sys/module/kvm_pvm/parameters/pvm_native', 'Y')
    write(tmp_path, 'sys/module/kvm/parameters/tdp_mmu', 'N')
    return str(tmp_path)


@pytest.mark.parametrize('pool', [False, True])
def test_a_pvm_host_gives_shadow_paging_and_may_join_the_shadow_pool(
        tmp_path, pool):
    root = pvm_root(tmp_path)
    assert probe.vendor_tdp(root) == ('kvm_pvm', False)
    c = probe.detect(root, 'amd-zen4', calibrated=False, pool=pool)
    assert c.kvm and c.modes == {P.SHADOW} and not c.switching
    assert c.host_mode == vocabulary.SHADOW and c.blockers == ()
    assert (vocabulary.TRAIT_POOL in c.traits()) == pool
    assert not {vocabulary.TRAIT_HAP, vocabulary.TRAIT_SWITCHING} & \
        c.traits()
    assert 'shadow paging only' in probe.describe_kvm('kvm_pvm', False)


def test_a_vendor_module_that_says_its_tdp_comes_first(tmp_path):
    # Both loaded: /dev/kvm is the one whose TDP switch the kernel shows.
    root = host_root(tmp_path, None, 'kvm_intel', 'Y')
    pvm_root(tmp_path)
    assert probe.vendor_tdp(root) == ('kvm_intel', True)


# The real device, where this machine has one: KVM_GET_API_VERSION
# (_IO(KVMIO, 0x00)) is 12 on every KVM since Linux 2.6.22, and the
# modules sysfs lists loaded are the oracle for which one the probe names.
KVM_GET_API_VERSION = 0xAE00
KVM_API_VERSION = 12
KVM_MODULES = ('kvm_intel', 'kvm_amd', probe.PVM_MODULE)


@pytest.mark.skipif(not os.path.exists('/dev/kvm'),
                    reason='this machine has no /dev/kvm: the probe of a '
                           'real KVM host runs where there is one')
def test_the_probe_of_this_machine_names_its_kvm():
    if os.access('/dev/kvm', os.R_OK | os.W_OK):
        fd = os.open('/dev/kvm', os.O_RDWR | os.O_CLOEXEC)
        try:
            assert fcntl.ioctl(fd, KVM_GET_API_VERSION) == KVM_API_VERSION
        finally:
            os.close(fd)
    loaded = [m for m in KVM_MODULES if os.path.isdir('/sys/module/' + m)]
    assert loaded, '/dev/kvm without a KVM module in /sys/module'
    vendor, tdp = probe.vendor_tdp('/')
    assert vendor in loaded
    caps = probe.detect('/', 'any', calibrated=False)
    assert caps.kvm and caps.modes
    if vendor == probe.PVM_MODULE:
        assert not tdp and caps.modes == {P.SHADOW}
        assert vocabulary.TRAIT_SHADOW in caps.traits()
        assert not caps.switching
