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

"""A seeded family of hardware cost profiles spanning x86 servers.

Calibration must hold on CPU generations nobody has tuned it for, so it
is judged on profiles drawn from the ranges below (assumed, MODELED: the
span of what server cores have shipped and plausibly will ship), not only
on the shipped profiles.  Each cost is drawn log-uniformly (costs spread
over orders of magnitude); half the profiles have 5-level paging, whose
2-D walk touches up to 35 entries against 24 (Gandhi et al., ISCA 2016,
Section II), so their HAP TLB-miss cost is drawn from the range scaled by
35/24 (and clipped to it).
"""

import random

from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging import vocabulary

# (low, high), in ns unless said otherwise.
TLB_MISS_HAP = (2.0, 12.0)
PAGE_FAULT_SHADOW = (1000.0, 15000.0)
CR3_WRITE_SHADOW = (300.0, 3000.0)
TO_HAP = (10000.0, 100000.0)
TO_SHADOW = (100000.0, 2000000.0)
TO_SHADOW_PER_MIB = (2000.0, 30000.0)
FIVE_LEVEL_WALK = 35.0 / 24.0
REFERENCE_IPS = 2e9
REFERENCE_WORKING_SET_MIB = 1024
DEFAULT_SEED = 2011
DEFAULT_COUNT = 60


def _log_uniform(rng, low, high):
    return low * (high / low) ** rng.random()


def profiles(count=DEFAULT_COUNT, seed=DEFAULT_SEED):
    """``count`` :class:`~nova_adaptive_paging.costmodel.hardware.Hardware`
    profiles, the same for the same seed."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        levels = 5 if i % 2 else 4
        low, high = TLB_MISS_HAP
        if levels == 5:
            low = min(low * FIVE_LEVEL_WALK, high)
        else:
            high = max(high / FIVE_LEVEL_WALK, low)
        miss, fault, cr3 = (vocabulary.EVENT_TLB_MISS,
                            vocabulary.EVENT_PAGE_FAULT,
                            vocabulary.EVENT_CR3_WRITE)
        costs = {
            vocabulary.HAP: {miss: _log_uniform(rng, low, high),
                             fault: 0.0, cr3: 0.0},
            vocabulary.SHADOW: {
                miss: 0.0, fault: _log_uniform(rng, *PAGE_FAULT_SHADOW),
                cr3: _log_uniform(rng, *CR3_WRITE_SHADOW)},
        }
        switch = {'to_hap': _log_uniform(rng, *TO_HAP),
                  'to_shadow': _log_uniform(rng, *TO_SHADOW),
                  'to_shadow_per_mib': _log_uniform(rng,
                                                    *TO_SHADOW_PER_MIB)}
        out.append(hardware.Hardware(
            name='sweep-%d-%02d-%dlevel' % (seed, i, levels),
            description='MODELED: drawn from the sweep ranges of '
                        'nova_adaptive_paging.tuning.sweep',
            event_cost_ns=costs, switch_cost_ns=switch,
            reference_ips=REFERENCE_IPS,
            reference_working_set_mib=REFERENCE_WORKING_SET_MIB,
            sources={'(all)': 'assumed: sweep seed %d' % seed}))
    return out
