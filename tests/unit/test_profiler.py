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

"""The profiler's decisions that need no Prometheus (the rest runs
against a real one in tests/functional/test_profiler.py)."""

from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.telemetry import generation_aggregates
from nova_adaptive_paging.tuning import profiler

# A generation whose CPU counts walk cycles, and one whose CPU does not
# (pmu_events' table, from Linux's perf event lists).
COUNTED, UNCOUNTED = 'intel-skylake-server', 'amd-zen3'


def _rich(key):
    g = generation_aggregates.Generation(
        key, hosts=1, guests=2, samples=1000, shadow_maint_s=1.0,
        hap_walk_s=0.01, shadow_walk_s=0.004, switching_s=0.1, switches=100)
    g.events['shadow']['page_fault'] = 1e5       # 10 us a fault
    g.events['hap']['tlb_miss'] = 2e6            # 5 ns a 2-D walk
    g.events['shadow']['tlb_miss'] = 2e6         # 2 ns a shadow walk
    return g


def test_costs_are_overhead_over_events():
    costs = profiler.estimate(_rich(COUNTED))
    assert abs(costs.fault_s - 10e-6) < 1e-12
    # What hap adds to a miss: its walk less the shadow tables' walk.
    assert abs(costs.miss_s - 3e-9) < 1e-15
    assert abs(costs.switch_s - 1e-3) < 1e-12
    assert 'WALK_PENDING' in costs.miss_note


def test_without_a_walk_cycle_event_the_shipped_miss_cost_stays_and_says_so():
    g = _rich(UNCOUNTED)
    g.shadow_maint_s = 1.2              # 12 us a fault
    costs = profiler.estimate(g)
    assert costs.miss_s is None
    assert 'no page-walk-cycle event on amd-zen3' in costs.miss_note
    assert 'ls_tablewalker' in costs.miss_note
    base = hardware.for_generation(UNCOUNTED)
    hw = profiler.cost_profile(base, costs, UNCOUNTED)
    assert profiler.extra_miss_s(hw) == profiler.extra_miss_s(base)
    # The costs it did measure are in.
    assert abs(hw.extra_cost_s('shadow', 'page_fault') - 12e-6) < 1e-12


def test_too_little_data_is_a_reason_not_a_guess():
    g = _rich(COUNTED)
    g.hap_walk_s = 0.0                  # the events counted nothing
    reason = profiler.estimate(g)
    assert isinstance(reason, str) and 'two-dimensional walks' in reason
    g = _rich(COUNTED)
    g.events['shadow']['tlb_miss'] = 10  # nothing to compare with
    reason = profiler.estimate(g)
    assert isinstance(reason, str) and 'TLB misses sampled' in reason
    # Where the CPU has no such event, its absence is no lack of data.
    g = _rich(UNCOUNTED)
    g.hap_walk_s = 0.0
    assert not isinstance(profiler.estimate(g), str)


def test_a_label_that_is_no_generation_key_names_no_file():
    result = profiler.profile_generation(_rich('../../etc/x'), '7d', 'u')
    assert not result.ok and 'not a CPU generation key' in result.reason
    assert result.profile is None
