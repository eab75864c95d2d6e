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

"""Applying a guest's policy to its VM's files: what to write, and only
what differs from what the kernel already holds.

The per-VM threshold override carries ``hw:paging_profile`` (another
generation's profile) and ``hw:paging_interval``; a guest without either
runs on the host's thresholds (``default``).  The override is written
before the policy, so that an adaptive guest's engine starts on the set
its flavor asked for.
"""

import dataclasses

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging import vocabulary

DEFAULT_THRESHOLDS = 'default'


@dataclasses.dataclass(frozen=True)
class Target:
    """What a VM's files must say: its policy and its override (None:
    the host's thresholds)."""

    policy: str
    override: spec.ThresholdSet = None
    problem: str = None


def target(policy, profile_set, host_profile):
    """The :class:`Target` of a resolved PagingPolicy.  A profile name
    this host does not have is a problem (reported) and the host's
    profile applies."""
    if policy.paging != vocabulary.Paging.ADAPTIVE or not (
            policy.profile or policy.interval_s):
        return Target(policy.paging.value)
    profile, problem = host_profile, None
    if policy.profile:
        if profile_set.has(policy.profile):
            profile = profile_set.for_generation(policy.profile)
        else:
            problem = ('%s=%s: no such profile on this host (%s); using the '
                       'host\'s, %s' % (vocabulary.KEY_PROFILE,
                                        policy.profile,
                                        ', '.join(profile_set.names()),
                                        host_profile.generation))
    if problem and not policy.interval_s:
        return Target(policy.paging.value, None, problem)
    interval_s = policy.interval_s or profile.interval_s
    return Target(policy.paging.value, spec.ThresholdSet(
        profile.thresholds, profile.history_samples, interval_s * 1000),
        problem)


def plan(vm, want, by_mode=False):
    """The writes that bring ``vm`` (a host.vm.Vm) to ``want``, in order,
    as ``(file, value)``: only what differs from what the kernel holds.
    ``by_mode``: the policy (hap or shadow) is set through the
    mechanism's control (``KVM_SET_PAGING_MODE``), as the agent's own
    decision does, which a kernel without the text interface has too."""
    writes = []
    current, overridden = vm.thresholds()
    if want.override is None:
        if overridden:
            writes.append((spec.FILE_THRESHOLDS, DEFAULT_THRESHOLDS))
    elif not overridden or current != want.override:
        writes.append((spec.FILE_THRESHOLDS,
                       want.override.format().strip()))
    if vm.word(spec.FILE_POLICY) != want.policy:
        writes.append((vmfiles.SET_MODE if by_mode else spec.FILE_POLICY,
                       want.policy))
    return writes


_EXPECTED = {spec.FILE_THRESHOLDS: 'a per-VM threshold override or '
             'default', spec.FILE_POLICY: 'a VM that can run in hap and in '
             'shadow mode'}


def apply(vm, want, by_mode=False):
    """Bring ``vm`` to ``want``; return the writes made, as
    ``file=value`` strings.  Raises host.vm.Refused naming the file and
    value when the kernel refuses one: the writes before it stay, and
    the VM keeps the policy it had."""
    done = []
    for name, value in plan(vm, want, by_mode):
        if name == vmfiles.SET_MODE:
            vm.set_mode(value)
        else:
            vm.write(name, value, _EXPECTED[name])
        done.append('%s=%s' % (name, value))
    return done
