"""The profiler's decisions that need no Prometheus (the rest runs
against a real one in tests/functional/test_profiler.py)."""

from nova_adaptive_paging.telemetry import fleet
from nova_adaptive_paging.tuning import profiler


def _rich(key):
    g = fleet.Generation(key, hosts=1, guests=2, samples=1000,
                         shadow_maint_s=1.0, hap_walk_s=0.01,
                         switching_s=0.1, switches=100)
    g.events['shadow']['page_fault'] = 1e5       # 10 us a fault
    g.events['hap']['tlb_miss'] = 2e6            # 5 ns a miss
    return g


def test_costs_are_overhead_over_events():
    costs = profiler.estimate(_rich('amd-zen3'))
    assert abs(costs.fault_s - 10e-6) < 1e-12
    assert abs(costs.miss_s - 5e-9) < 1e-15
    assert abs(costs.switch_s - 1e-3) < 1e-12


def test_too_little_data_is_a_reason_not_a_guess():
    g = _rich('amd-zen3')
    g.hap_walk_s = 0.0                  # the patch counts no walk time
    reason = profiler.estimate(g)
    assert isinstance(reason, str) and 'nested walks' in reason


def test_a_label_that_is_no_generation_key_names_no_file():
    result = profiler.profile_generation(_rich('../../etc/x'), '7d', 'u')
    assert not result.ok and 'not a CPU generation key' in result.reason
    assert result.profile is None
