"""What paging a compute host can give, and the placement traits saying so.

The agent publishes these traits on its compute node's resource provider;
the scheduler filter reads them.  This module is the one definition of
the trait names and of which policy needs which trait.

* ``CUSTOM_PAGING_SWITCHING``: the switching patch is loaded with an ABI
  version this package drives, and the host can run both modes, so it can
  honour ``adaptive``;
* ``CUSTOM_PAGING_HAP``: a VM can run with EPT/NPT (TDP enabled in the
  vendor module);
* ``CUSTOM_PAGING_SHADOW``: a VM can run with shadow paging (patched host,
  or an unpatched host whose vendor module has TDP disabled);
* ``CUSTOM_PAGING_CPU_<GENERATION>``: the host's CPU generation key;
* ``CUSTOM_PAGING_PROFILE_CALIBRATED``: the generation has a threshold
  profile of its own (it does not run on the fallback profile).
"""

import dataclasses
import os
import re

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import policy

PREFIX = 'CUSTOM_PAGING_'
SWITCHING = PREFIX + 'SWITCHING'
HAP = PREFIX + 'HAP'
SHADOW = PREFIX + 'SHADOW'
CALIBRATED = PREFIX + 'PROFILE_CALIBRATED'
CPU_PREFIX = PREFIX + 'CPU_'

REQUIRED_TRAIT = {
    policy.Paging.ADAPTIVE: SWITCHING,
    policy.Paging.HAP: HAP,
    policy.Paging.SHADOW: SHADOW,
}


def cpu_trait(generation):
    """CUSTOM_PAGING_CPU_<KEY>: placement trait names are [A-Z0-9_]."""
    return CPU_PREFIX + re.sub(r'[^A-Z0-9]', '_', generation.upper())


@dataclasses.dataclass(frozen=True)
class Capabilities:
    abi_version: int          # 0: no switching patch
    tdp: bool                 # vendor module has EPT/NPT enabled
    generation: str
    calibrated: bool

    kvm: bool = True          # a KVM vendor module is loaded

    @property
    def modes(self):
        """Policies this host can honour."""
        if not self.kvm:
            return set()
        if self.abi_version == spec.ABI_VERSION:
            modes = {policy.Paging.SHADOW}
            if self.tdp:
                modes |= {policy.Paging.HAP, policy.Paging.ADAPTIVE}
            return modes
        return {policy.Paging.HAP if self.tdp else policy.Paging.SHADOW}

    def traits(self):
        """Placement traits; the CPU generation is published even when the
        host can give no paging mode, so operators see every host."""
        return ({REQUIRED_TRAIT[m] for m in self.modes}
                | {cpu_trait(self.generation)}
                | ({CALIBRATED} if self.calibrated else set()))


def _read(path):
    try:
        with open(path, encoding='ascii') as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def detect(host_root, generation, calibrated):
    """Capabilities of the host whose /sys is under ``host_root``.

    An ABI version this package does not know counts as no patch: the
    host still gives its vendor module's mode, and the agent will not
    drive an interface it does not understand.
    """
    params = os.path.join(host_root, spec.PARAMS_DIR)
    abi = _read(os.path.join(params, spec.PARAM_ABI))
    abi_version = int(abi) if abi and abi.isdigit() else 0
    if abi_version != spec.ABI_VERSION:
        abi_version = 0
    tdp = kvm = False
    for module, param in spec.VENDOR_TDP_PARAMS:
        value = _read(os.path.join(host_root, spec.vendor_params_dir(module),
                                   param))
        if value is not None:
            kvm, tdp = True, value in ('Y', 'y', '1')
            break
    return Capabilities(abi_version, tdp, generation, calibrated, kvm)
