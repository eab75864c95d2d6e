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

"""What paging a compute host can give, the placement traits saying so,
and the flavor extra specs that ask placement for them.

The agent publishes these traits on its compute node's resource provider
(:mod:`nova_adaptive_paging.host.probe` reads the facts); placement and
the scheduler filter select hosts with them.  The names are
:mod:`nova_adaptive_paging.vocabulary`'s.

* ``CUSTOM_PAGING_SWITCHING``: the switching patch is loaded with an ABI
  version this package drives, the host can run both modes, and nothing
  in the running kernel stops the agent from switching (AVIC, no TDP
  MMU, Intel PT in host-guest mode: see ``blockers``),
  so it can honour ``adaptive``;
* ``CUSTOM_PAGING_HAP``: a VM can run with EPT/NPT (TDP enabled in the
  vendor module);
* ``CUSTOM_PAGING_SHADOW``: a VM can run with shadow paging (a patched
  host the agent can drive, or any host whose vendor module has TDP
  disabled);
* ``CUSTOM_PAGING_CPU_<GENERATION>``: the host's CPU generation key;
* ``CUSTOM_PAGING_PROFILE_CALIBRATED``: the generation has a threshold
  profile of its own (it does not run on the fallback profile).

Eligibility is also per guest: even on a host with the traits, the kernel
refuses shadow paging (and so ``adaptive``) for a guest with SVM or VMX
in its CPU model (nested virtualization), with PKU in its CPUID (host-model
CPUs on recent hosts), with SGX on Intel, and for memory-encrypted
guests (SEV, SEV-ES, SNP, TDX).  Flavors that switch must not expose
those.
"""

import dataclasses
import itertools
import re

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary

# Nova's ``trait[<group>]:<NAME>``: the unsuffixed group or a granular
# one (``trait1:``, ``trait_gpu:``), as Nova's own validator spells it.
_TRAIT_KEY = re.compile(r'%s([a-zA-Z0-9_-]{1,64})?:(.+)'
                        % vocabulary.TRAIT_SPEC_PREFIX[:-1])


def trait_specs(extra_specs):
    """``(key, trait, value)`` of a flavor's trait keys, granular groups'
    included; ``value`` is lower-cased (``required`` or ``forbidden``)."""
    for key, value in extra_specs.items():
        match = _TRAIT_KEY.fullmatch(key)
        if match:
            yield key, match.group(2), str(value).strip().lower()


def _required(extra_specs, image_traits):
    # A granular group's required trait counts as the host's: the agent
    # publishes CUSTOM_PAGING_* on the compute node's own provider only,
    # so a group that gets one is served by the compute node itself.
    found = {trait for _, trait, value in trait_specs(extra_specs)
             if value == vocabulary.TRAIT_REQUIRED}
    return found | set(image_traits or ())


def trait_requested(trait, extra_specs, image_traits=()):
    """Whether a flavor's extra specs (any request group) or an image's
    required traits make placement select for ``trait``."""
    return trait in _required(extra_specs, image_traits)


def trait_conflict(paging, extra_specs, image_traits=()):
    """Why a flavor asking ``hw:paging=paging`` can land on no host: it
    forbids (in any request group) a trait that every host able to give
    the mode has; a PolicyError naming the key and the trait, or None.

    The traits the request needs are those of :func:`accepted_traits` it
    requires itself, or else the one the request filter adds
    (vocabulary.REQUIRED_TRAIT); a host with one of them also has the
    traits :data:`ALWAYS_WITH` lists (a host that switches gives both
    modes: forbidding CUSTOM_PAGING_HAP forbids it too)."""
    if paging is None:
        return None
    needs = (_required(extra_specs, image_traits) & accepted_traits(paging)
             or {vocabulary.REQUIRED_TRAIT[paging]})
    for key, trait, value in sorted(trait_specs(extra_specs)):
        if value != 'forbidden':
            continue
        for need in sorted(needs):
            if trait == need:
                why = 'the hosts that can give it have %s' % trait
            elif trait in ALWAYS_WITH.get(need, ()):
                why = 'every host with %s, which it needs, has %s too' % (
                    need, trait)
            else:
                continue
            return policy.PolicyError(
                key, 'forbidden', 'not forbidden with %s=%s: %s' % (
                    vocabulary.KEY_POLICY, paging, why))
    return None


def flavor_policy(extra_specs, image_traits=()):
    """The PagingPolicy a flavor asks for, checked against the traits it
    asks placement for: what the API validators, the scheduler and
    ``nova-paging policy check`` accept.  Raises PolicyError."""
    wanted = policy.from_extra_specs(extra_specs)
    conflict = trait_conflict(wanted.paging, extra_specs, image_traits)
    if conflict is not None:
        raise conflict
    return wanted


def flavor_extra_specs(paging_policy, pools=False):
    """The extra specs that make a flavor ask for ``paging_policy``: its
    ``hw:paging*`` keys and the trait placement must select for, as one
    pair (``pools``: an adaptive flavor for a fleet of paging pools,
    :func:`adaptive_traits`).  The keys this package owns that are not in
    the result are the ones to remove (:func:`owned_extra_spec`)."""
    specs = paging_policy.to_extra_specs()
    if paging_policy.paging is not None:
        trait = vocabulary.REQUIRED_TRAIT[paging_policy.paging]
        if pools and paging_policy.paging == vocabulary.Paging.ADAPTIVE:
            trait = vocabulary.TRAIT_POOL
        specs[vocabulary.trait_spec_key(trait)] = vocabulary.TRAIT_REQUIRED
    return specs


def accepted_traits(paging):
    """The traits any one of which lets a host take ``paging``: for
    adaptive, a host that switches or, for a flavor that asks for it in
    pools, a pool member (TRAIT_POOL)."""
    traits = {vocabulary.REQUIRED_TRAIT[paging]}
    if paging == vocabulary.Paging.ADAPTIVE:
        traits.add(vocabulary.TRAIT_POOL)
    return traits


def owned_extra_spec(key):
    """Whether ``key`` is one of the extra specs :func:`flavor_extra_specs`
    writes for some policy."""
    return key in vocabulary.KEYS or key in {
        vocabulary.trait_spec_key(t) for t in vocabulary.FLAVOR_TRAITS}


@dataclasses.dataclass(frozen=True)
class Capabilities:
    abi_version: int          # 0: no switching patch this package drives
    tdp: bool                 # vendor module has EPT/NPT enabled
    generation: str
    calibrated: bool

    kvm: bool = True          # a KVM vendor module is loaded
    # Why the agent cannot drive a loaded patch on this kernel (one line
    # each, naming the fact): the host then gives what stock KVM gives.
    blockers: tuple = ()
    # Its operator put this stock host in the fleet's hap or shadow pool
    # (``[adaptive_paging] pool``).
    pool: bool = False
    # The kernel has the series' part 1 alone: its one control,
    # KVM_SET_PAGING_MODE, without the text interface (abi_version 0).
    # The agent then sets every guest's mode itself, and decides for the
    # adaptive ones (agent.decider).
    mechanism: bool = False

    @property
    def text_interface(self):
        """The interface version this package drives is loaded."""
        return self.abi_version == spec.ABI_VERSION

    @property
    def switching(self):
        return (self.kvm and (self.text_interface or self.mechanism)
                and not self.blockers)

    @property
    def modes(self):
        """Policies this host can honour."""
        if not self.kvm:
            return set()
        if self.switching:
            modes = {vocabulary.Paging.SHADOW}
            if self.tdp:
                modes |= {vocabulary.Paging.HAP, vocabulary.Paging.ADAPTIVE}
            return modes
        return {vocabulary.Paging.HAP if self.tdp
                else vocabulary.Paging.SHADOW}

    @property
    def host_mode(self):
        """The mode stock KVM runs every guest in here (the host's pool
        on a fleet without the switching patch)."""
        return vocabulary.HAP if self.tdp else vocabulary.SHADOW

    def traits(self):
        """Placement traits; the CPU generation is published even when the
        host can give no paging mode, so operators see every host."""
        in_pool = (self.switching and self.tdp) or (
            self.kvm and not self.switching and self.pool)
        return ({vocabulary.REQUIRED_TRAIT[m] for m in self.modes}
                | ({vocabulary.TRAIT_POOL} if in_pool else set())
                | {vocabulary.cpu_trait(self.generation)}
                | ({vocabulary.TRAIT_CALIBRATED} if self.calibrated
                   else set()))


def _always_with():
    """{trait a flavor may require: the other such traits every host that
    publishes it publishes too}, from :meth:`Capabilities.traits` over
    every kind of host (with and without the patch, TDP, a blocker, a
    pool)."""
    found = {}
    for abi, tdp, kvm, blockers, pool in itertools.product(
            (0, spec.ABI_VERSION), (False, True), (False, True),
            ((), ('blocked',)), (False, True)):
        traits = Capabilities(abi, tdp, 'any', False, kvm, blockers,
                              pool).traits() & vocabulary.FLAVOR_TRAITS
        for trait in traits:
            found[trait] = found.get(trait, traits) & traits
    return {trait: frozenset(others - {trait})
            for trait, others in found.items()}


ALWAYS_WITH = _always_with()
