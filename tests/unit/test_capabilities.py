import pytest

from nova_adaptive_paging import capabilities as caps_mod
from nova_adaptive_paging import policy

P = policy.Paging


def host_root(tmp_path, abi=None, module='kvm_amd', tdp='Y'):
    if abi is not None:
        d = tmp_path / 'sys/module/kvm/parameters'
        d.mkdir(parents=True)
        (d / 'paging_switch_abi').write_text('%s\n' % abi)
    if module:
        d = tmp_path / 'sys/module' / module / 'parameters'
        d.mkdir(parents=True)
        (d / ('npt' if module == 'kvm_amd' else 'ept')).write_text(tdp + '\n')
    return str(tmp_path)


@pytest.mark.parametrize('abi,module,tdp,modes,switching', [
    (1, 'kvm_amd', 'Y', {P.ADAPTIVE, P.HAP, P.SHADOW}, True),
    (1, 'kvm_intel', 'N', {P.SHADOW}, False),     # patched, ept=0
    (None, 'kvm_intel', 'Y', {P.HAP}, False),     # stock KVM
    (None, 'kvm_amd', 'N', {P.SHADOW}, False),    # stock, npt=0
    (2, 'kvm_amd', 'Y', {P.HAP}, False),          # unknown ABI: no patch
    (None, None, 'Y', set(), False),              # no KVM at all
])
def test_detect(tmp_path, abi, module, tdp, modes, switching):
    c = caps_mod.detect(host_root(tmp_path, abi, module, tdp),
                        'amd-zen3', calibrated=False)
    assert c.modes == modes
    assert (caps_mod.SWITCHING in c.traits()) == switching
    assert caps_mod.cpu_trait('amd-zen3') in c.traits()
    assert caps_mod.CALIBRATED not in c.traits()


def test_trait_names_are_placement_safe():
    assert caps_mod.cpu_trait('intel-icelake-server') == \
        'CUSTOM_PAGING_CPU_INTEL_ICELAKE_SERVER'
    assert caps_mod.cpu_trait('intel-6-254') == 'CUSTOM_PAGING_CPU_INTEL_6_254'


def test_every_policy_has_one_trait():
    assert set(caps_mod.REQUIRED_TRAIT) == set(P)
    assert len(set(caps_mod.REQUIRED_TRAIT.values())) == len(P)
