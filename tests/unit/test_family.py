"""The adversarial workload family (costmodel/family.py): seeded, its
phases as heavy as the shipped programs they come from, its periods from
below the shortest sampling interval to minutes, and phase-changing for
the per-interval oracle (so that it tests a rule, not nothing)."""

import random
import statistics

from nova_adaptive_paging.costmodel import evaluator
from nova_adaptive_paging.costmodel import family
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging.tuning import calibrate


def test_the_same_seed_gives_the_same_family_and_another_does_not():
    one, two = family.unit_family(7), family.unit_family(7)
    assert [t.page_faults for t in one] == [t.page_faults for t in two]
    assert [t.page_faults for t in one] != [
        t.page_faults for t in family.unit_family(8)]


def test_its_periods_reach_below_the_shortest_interval_and_to_minutes():
    assert min(family.PERIODS_S) < min(calibrate.INTERVALS)
    assert max(family.PERIODS_S) >= 5 * 60
    names = {t.name for t in family.family(duration_s=10, shipped=False)}
    assert {'alt-%gs' % p for p in family.PERIODS_S} <= names
    assert {'ramp', 'noise', 'idle', 'burst-1'} <= names
    with_shipped = {t.name for t in family.family(duration_s=10)}
    assert set(traces.builtin()) <= with_shipped


def test_its_phases_run_at_the_shipped_programs_rates():
    # The phase templates are the shipped traces' own means: a phase of
    # alt-30s holds the fault rate of fork-exec and the TLB-miss rate of
    # mcf, within the per-slice jitter.
    shipped = traces.builtin()
    mcf, fork = shipped['mcf'], shipped['fork-exec']

    def rate(trace, column, rows=None):
        rows = rows or range(len(trace))
        return (sum(getattr(trace, column)[i] for i in rows)
                / sum(trace.interval_s[i] for i in rows))
    alt = family.alternating(30, random.Random(1))
    per = int(30 / family.SLICE_S)
    tlb_phase = [i for i in range(len(alt)) if (i // per) % 2 == 0]
    fault_phase = [i for i in range(len(alt)) if (i // per) % 2 == 1]
    assert abs(rate(alt, 'tlb_misses', tlb_phase)
               / rate(mcf, 'tlb_misses') - 1) < 0.01
    assert abs(rate(alt, 'page_faults', fault_phase)
               / rate(fork, 'page_faults') - 1) < 0.01


def test_the_alternations_are_worth_switching_for():
    # On the seed paper's machine the oracle that samples every second
    # gains over the better static mode on every alternation it can
    # follow (period of at least two of its intervals).
    hw = hardware.resolve('nehalem')
    gains = []
    for trace in family.unit_family():
        if not trace.name.startswith('alt-') or float(
                trace.name[4:-1]) < 2:
            continue
        replay = evaluator.Replay(trace, hw)
        static = min(replay.static(m)['time_s']
                     for m in (evaluator.HAP, evaluator.SHADOW))
        gains.append(1 - replay.oracle(1)['time_s'] / static)
    assert gains and min(gains) > 0.05, gains
    assert statistics.median(gains) > 0.05
