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

"""The switch guard's assumptions, each enforced or measured (issue 59):
a switch priced at what the VM's switches take and by the VM's memory,
the time switching takes bounded as a share of the run, switches forced
from outside not charged to the engine, and a flipping leader followed
fewer and fewer times.  The figures asserted come from the guard's
statement in doc/source/simulation.rst (arithmetic on the prices), and
the engine is checked against that statement written out independently
(tests/unit/paper_rules.py)."""

import random

import pytest

from nova_adaptive_paging import dsp
from tests.unit import paper_rules

NEHALEM = dsp.Guard(tlb_cost_ps=4000, pf_cost_ps=10000000,
                    switch_cost_ns=28648000, budget_ppm=5000,
                    switch_ns_per_gib=27648000)
TABLE2 = dsp.Thresholds(10000, 100, 5000000, 100000, 200000, 150000)
SECOND = 10 ** 9
E9 = 10 ** 9
# One interval of 10^9 instructions: TLB-bound (30 misses per 1000
# instructions: shadow wins) or fault-bound (40 faults per 10^8).
TLB_BOUND = dsp.Sample.from_counts(E9, 30 * E9 // 1000, 10)
FAULT_BOUND = dsp.Sample.from_counts(E9, 10 ** 4, 400)


def saving_per_interval(sample, guard):
    """What shadow saves over hap in one interval of ``sample``, ns."""
    return (sample.tlb_misses * guard.tlb_cost_ps
            - sample.page_faults * guard.pf_cost_ps) // 1000


@pytest.mark.parametrize('gib', [1, 64])
def test_a_switch_into_shadow_is_priced_by_the_vms_memory(gib):
    engine = dsp.Engine(TABLE2, 3, dsp.Mode.HAP, NEHALEM)
    steps = 1                            # intervals, the switch's included
    while engine.step(TLB_BOUND, SECOND, 0, gib * 1024) == dsp.Mode.HAP:
        steps += 1
        assert steps < 10000
    # The statement: a switch into shadow costs at least 27.648 ms a GiB;
    # a switch Figure 5 wants waits until the other mode has saved a
    # round trip, and until the credit (0.5 % of the time, from two
    # switches at switch_cost_ns) holds one.
    into_shadow = max(gib * 27648000, 28648000)
    round_trip = into_shadow + 28648000
    saved = saving_per_interval(TLB_BOUND, NEHALEM)
    assert engine.price(dsp.Mode.SHADOW) == into_shadow
    assert steps * saved >= round_trip
    # A switch to the cheaper static mode needs its own price in credit.
    credit_s = (2 * 28648000 + steps * SECOND * 5000 // dsp.PPM)
    assert credit_s >= into_shadow
    if gib == 64:
        # 1.77 s at 5 ms of credit a second: minutes, not the three
        # intervals a 1 GiB guest waits; by then the regret is over
        # budget, and the guard goes to the leader.
        assert steps == -(-(into_shadow - 2 * 28648000) // 5000000)
        assert engine.last_rule == dsp.Rule.REGRET_LEADER
    else:
        assert steps == 3


def test_what_a_switch_took_beyond_its_price_is_charged():
    engine = dsp.Engine(TABLE2, 3, dsp.Mode.HAP, NEHALEM)
    while engine.step(TLB_BOUND, SECOND, 0, 1024) == dsp.Mode.HAP:
        pass
    credit, regret = engine.credit, engine.regret
    # The switch took 0.5 s where it was priced at 28.648 ms.
    took = 500000000
    engine.step(TLB_BOUND, SECOND, took, 1024)
    extra = took - 28648000
    assert engine.credit == credit - extra + 5000000
    # Regret: the extra, and what this interval cost over the cheaper
    # static mode (nothing: the VM runs in the cheaper one).
    assert engine.regret == regret + extra
    assert engine.seen[dsp.Mode.SHADOW] == took
    assert engine.price(dsp.Mode.SHADOW) == took


def test_a_switch_forced_from_outside_prices_the_next_but_is_not_charged():
    engine = dsp.Engine(TABLE2, 3, dsp.Mode.HAP, NEHALEM)
    engine.step(TLB_BOUND, SECOND, 0, 1024)
    credit, regret = engine.credit, engine.regret
    assert engine.gain > 0
    engine.reset(dsp.Mode.SHADOW)
    assert engine.gain == engine.paid == 0      # a new stay
    engine.step(TLB_BOUND, SECOND, 300000000, 1024)
    assert engine.credit == credit + 5000000
    assert engine.regret == regret
    assert engine.price(dsp.Mode.SHADOW) == 300000000


def test_the_time_switching_takes_is_a_share_of_the_run():
    """Samples that flip every interval (Figure 5 alone would follow
    every window), and switches that take up to 20 times their price: the
    engine's switches take at most budget_ppm of the time, plus the two
    switches of credit it starts with, plus what one switch took beyond
    its price (the statement's bound)."""
    rng = random.Random(59)
    guard = dsp.Guard(0, 0, 10 ** 7, 5000)      # the rate cap alone
    engine = dsp.Engine(TABLE2, 1, dsp.Mode.HAP, guard)
    took_total, last_extra, pending, switches = 0, 0, 0, 0
    steps = 20000
    for i in range(steps):
        sample = TLB_BOUND if i % 2 else FAULT_BOUND
        mode = engine.mode
        got = engine.step(sample, SECOND, pending, 1024)
        pending = 0
        if got != mode:
            switches += 1
            pending = int(guard.switch_ns * rng.uniform(0.5, 20))
            took_total += pending
            last_extra = max(pending - engine.owed, 0)
    budget = steps * SECOND * 5000 // dsp.PPM
    assert took_total <= budget + 2 * 10 ** 7 + last_extra
    # ... and the cap does not starve it: most of the budget is used, by
    # hundreds of switches.
    assert took_total - last_extra >= budget // 2 and switches > 100


def _follows_of_a_flipping_leader(flips=40, swing=40):
    """REGRET_LEADER moves while the lead (static hap minus static
    shadow) swings between -``swing`` and +``swing`` switches ``flips``
    times; Figure 5 never asks (both frequencies under thresholds it
    cannot reach), so only the guard moves the VM."""
    guard = dsp.Guard(4000, 10000000, 10 ** 7, 1)
    silent = dsp.Thresholds(*(dsp.METRIC_MAX,) * 6)
    engine = dsp.Engine(silent, 1, dsp.Mode.HAP, guard)
    # As dear either way: 0.12 s an interval that one mode saves.
    fault_heavy = dsp.Sample.from_counts(E9, 10 ** 4, 12000)
    followed = 0
    for flip in range(flips):
        sample = TLB_BOUND if flip % 2 == 0 else fault_heavy
        target = swing * 10 ** 7 * (1 if flip % 2 == 0 else -1)
        while (engine.lead - target) * (1 if target < 0 else -1) > 0:
            mode = engine.mode
            engine.step(sample, 10 ** 12, 0, 1024)
            if engine.mode != mode:
                assert engine.last_rule == dsp.Rule.REGRET_LEADER
                followed += 1
        # Over budget throughout: the regret, not the budget, is what
        # the margin has to hold back.
        assert engine.regret > engine.budget_ns()
    return followed, engine


def test_a_flipping_leader_is_followed_fewer_and_fewer_times(monkeypatch):
    """The lead swings by 40 switches each way, 40 times.  With the
    doubling margin the leader is followed until the margin passes the
    swing: about log2(40) + 1 times (the statement's bound), and the
    margin is 2 to that power; with a margin held at one switch it is
    followed at many more of the flips."""
    followed, engine = _follows_of_a_flipping_leader()
    assert 2 <= followed <= 7
    assert engine.margin == 2 ** followed
    monkeypatch.setattr(dsp, 'MARGIN_MAX', 1)
    fixed, _ = _follows_of_a_flipping_leader()
    assert fixed >= 3 * followed


def _random_run(rng, oracle, seen):
    guard = rng.choice((NEHALEM, dsp.Guard(4000, 10000000, 10 ** 7, 50),
                        dsp.Guard(1000, 1000, 0, 20, 1024)))
    history = rng.choice((1, 2, 3))
    mode = rng.choice((dsp.Mode.HAP, dsp.Mode.SHADOW))
    engine = dsp.Engine(TABLE2, history, mode, guard)
    ref = oracle.Engine(TABLE2, history, mode, guard)
    lean = rng.random()
    for _ in range(rng.randrange(20, 400)):
        if rng.random() < 0.03:
            forced = rng.choice((dsp.Mode.HAP, dsp.Mode.SHADOW))
            engine.reset(forced)
            ref.reset(str(forced))
            continue
        lean = min(max(lean + rng.uniform(-0.3, 0.3), 0.0), 1.0)
        insns = rng.choice((0, E9, 5 * E9))
        sample = dsp.Sample.from_counts(
            insns, int(rng.randrange(1, 40) * insns // 1000 * lean),
            int(rng.randrange(0, 400) * insns // 10 ** 8 * (1 - lean)))
        took = rng.choice((0, 0, 0, rng.randrange(10 ** 9)))
        memory = rng.choice((0, 1024, 65536))
        elapsed = rng.choice((SECOND, 5 * SECOND, 60 * SECOND))
        # What handling the faults and walking took (0: not measured):
        # about the guard's prices, or far off them.
        maint = sample.page_faults * rng.choice((0, 3000, 10000, 40000))
        walk = sample.tlb_misses * rng.choice((0, 0, 5, 20))
        got = engine.step(sample, elapsed, took, memory, maint, walk)
        want = ref.step(sample, elapsed, took, memory, maint, walk)
        assert (str(got), int(engine.last_rule)) == (want, ref.last_rule)
        seen.add(engine.last_rule)
        if engine.pf_cost_ps() != guard.pf_cost_ps:
            seen.add('fault measured')
        if engine.tlb_cost_ps() != guard.tlb_cost_ps:
            seen.add('miss measured')


def test_the_engine_is_the_guard_as_its_statement_reads():
    rng = random.Random(2011)
    seen = set()
    for _ in range(300):
        _random_run(rng, paper_rules, seen)
    # The runs reached what the statement prices and does: both prices
    # measured, an exploration and a switch kept for it, the leader.
    assert {'fault measured', 'miss measured', dsp.Rule.EXPLORE,
            dsp.Rule.REGRET_LEADER, dsp.Rule.UNPAID} <= seen
