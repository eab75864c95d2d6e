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

"""The project's names, each defined once.

Paging modes and policies, the flavor extra-spec keys, the placement
trait names and the aggregate metadata key.  The validators, the filter,
the host interface, the kernel interface's spec, the cost model, the
simulated host and the docs all take them from here; metric names live
in :mod:`nova_adaptive_paging.telemetry.metrics`.
"""

import enum
import re

# -- paging modes: what a VM runs in -------------------------------------
# In the order of the kernel's numeric modes (dsp.Mode: HAP=0, SHADOW=1).
HAP = 'hap'
SHADOW = 'shadow'
MODES = (HAP, SHADOW)


def other_mode(mode):
    """The paging mode that is not ``mode``."""
    return SHADOW if mode == HAP else HAP


# -- policies: what a guest asks for -------------------------------------
class Paging(str, enum.Enum):
    """A paging policy: one mode pinned, or switched at run time.  In the
    kernel interface's order (``paging_policy``, ``paging_stats``)."""

    HAP = HAP
    SHADOW = SHADOW
    ADAPTIVE = 'adaptive'

    def __str__(self):
        return self.value


ADAPTIVE = Paging.ADAPTIVE.value
POLICIES = tuple(p.value for p in Paging)

# Where an adaptive guest's paging mode is decided: by the kernel's own
# engine (the series' policy part) or by the agent's, which switches the
# guest through the mechanism's control (``[adaptive_paging] decision``).
DECIDED_BY_KERNEL = 'kernel'
DECIDED_BY_AGENT = 'agent'

# -- flavor extra specs ------------------------------------------------------
KEY_POLICY = 'hw:paging'
KEY_INTERVAL = 'hw:paging_interval'
KEY_PROFILE = 'hw:paging_profile'
KEYS = (KEY_POLICY, KEY_INTERVAL, KEY_PROFILE)

# -- placement traits on a compute node's resource provider ---------------
TRAIT_PREFIX = 'CUSTOM_PAGING_'
# The host can honour adaptive: switching patch with a known interface
# version, and both modes.
TRAIT_SWITCHING = TRAIT_PREFIX + 'SWITCHING'
TRAIT_HAP = TRAIT_PREFIX + 'HAP'
TRAIT_SHADOW = TRAIT_PREFIX + 'SHADOW'
# The host's CPU generation has a threshold profile of its own.
TRAIT_CALIBRATED = TRAIT_PREFIX + 'PROFILE_CALIBRATED'
TRAIT_CPU_PREFIX = TRAIT_PREFIX + 'CPU_'

# The host takes adaptive guests in a fleet of paging pools: a stock host
# its operator put in the hap or the shadow pool (``[adaptive_paging]
# pool``; the paging_fit Watcher strategy moves such guests between the
# pools), and every host that switches.  A flavor that asks for adaptive
# with this trait instead of TRAIT_SWITCHING may land on either.
TRAIT_POOL = TRAIT_PREFIX + 'POOL'

REQUIRED_TRAIT = {
    Paging.ADAPTIVE: TRAIT_SWITCHING,
    Paging.HAP: TRAIT_HAP,
    Paging.SHADOW: TRAIT_SHADOW,
}
MODE_TRAITS = frozenset(REQUIRED_TRAIT.values())
# The traits a flavor may require for its hw:paging.
FLAVOR_TRAITS = MODE_TRAITS | {TRAIT_POOL}

# A flavor (or an image property) asks placement for a trait with Nova's
# ``trait:<NAME>=required``.
TRAIT_SPEC_PREFIX = 'trait:'
TRAIT_REQUIRED = 'required'


def trait_spec_key(trait):
    return TRAIT_SPEC_PREFIX + trait


def cpu_trait(generation):
    """CUSTOM_PAGING_CPU_<KEY>: placement trait names are ``[A-Z0-9_]``."""
    return TRAIT_CPU_PREFIX + re.sub(r'[^A-Z0-9]', '_', generation.upper())


# -- events: what a guest does that costs differently per mode ------------
# The cost model's per-event costs, the calibration, the profiler, the
# agent's advisory model and the ``event`` label of the sampled-events
# metric all use these names.
EVENT_INSTRUCTION = 'instruction'      # counted, costs nothing extra
EVENT_TLB_MISS = 'tlb_miss'
EVENT_PAGE_FAULT = 'page_fault'
EVENT_CR3_WRITE = 'cr3_write'
# Events with a cost per mode (hardware cost profiles' event_cost_ns).
COST_EVENTS = (EVENT_TLB_MISS, EVENT_PAGE_FAULT, EVENT_CR3_WRITE)
# Events a sample counts (paging_stats), in the DSP's order.
SAMPLED_EVENTS = (EVENT_INSTRUCTION, EVENT_TLB_MISS, EVENT_PAGE_FAULT)


# -- aggregate metadata ----------------------------------------------------
# Withholds policies from an aggregate's hosts (comma-separated subset of
# POLICIES).
AGGREGATE_KEY = 'adaptive_paging:policies'
