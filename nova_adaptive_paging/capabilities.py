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


# A flavor asks placement for a trait with this extra spec (Nova's
# ``trait:<NAME>=required``; an image says the same with its
# ``trait:<NAME>=required`` property, which Nova keeps as
# ``traits_required``).
TRAIT_SPEC_PREFIX = 'trait:'
TRAIT_REQUIRED = 'required'
MODE_TRAITS = frozenset(REQUIRED_TRAIT.values())


def trait_spec_key(trait):
    return TRAIT_SPEC_PREFIX + trait


def _required(extra_specs, image_traits):
    found = {key[len(TRAIT_SPEC_PREFIX):] for key, value
             in extra_specs.items()
             if key.startswith(TRAIT_SPEC_PREFIX)
             and str(value).strip().lower() == TRAIT_REQUIRED}
    return found | set(image_traits or ())


def trait_requested(trait, extra_specs, image_traits=()):
    """Whether a flavor's extra specs or an image's required traits make
    placement select for ``trait``."""
    return trait in _required(extra_specs, image_traits)


def stray_traits(paging, extra_specs, image_traits=()):
    """Paging-mode traits required although ``hw:paging`` (``paging``,
    None when unset) does not ask for them: the flavor and its trait
    disagree, and placement selects hosts for a mode the guest won't get."""
    wanted = {REQUIRED_TRAIT[paging]} if paging is not None else set()
    return (_required(extra_specs, image_traits) & MODE_TRAITS) - wanted


def flavor_extra_specs(paging_policy):
    """The extra specs that make a flavor ask for ``paging_policy``: its
    ``hw:paging*`` keys and the trait placement must select for, as one
    pair.  The keys this package owns that are not in the result are the
    ones to remove (:func:`owned_extra_spec`)."""
    specs = paging_policy.to_extra_specs()
    if paging_policy.paging is not None:
        specs[trait_spec_key(REQUIRED_TRAIT[paging_policy.paging])] = \
            TRAIT_REQUIRED
    return specs


def owned_extra_spec(key):
    """Whether ``key`` is one of the extra specs :func:`flavor_extra_specs`
    writes for some policy."""
    return key in policy.KEYS or key in {trait_spec_key(t)
                                         for t in MODE_TRAITS}


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
