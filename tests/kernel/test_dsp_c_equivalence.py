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

"""The kernel's C DSP decision gives exactly nova_adaptive_paging.dsp's.

The patch series adds arch/x86/kvm/dsp.c and dsp.h, the decision the kernel
runs.  This test takes those two files out of the series (applying it to an
empty directory), compiles them in user space with gcc against small
stand-ins for <linux/types.h> and <linux/math64.h>, and feeds the result
and the canonical Python implementation the same random requests: at least
a million decisions plus sample metrics, the scaled-ratio helper,
threshold validation and long engine sequences.  Inputs are biased to the
places where an off-by-one would show: threshold boundaries (including the
80 % bounds), zeros, saturation at 2^48 - 1 and the edges of u64.

The C file is compiled twice: with unsigned __int128 helpers (as x86-64 has)
and with the shift-and-subtract helpers (as the kernel's generic ones).
The math64 stand-in aborts where the x86-64 "divq" would fault, so the
test also proves the saturation guard keeps every quotient in range.

NAP_DSP_CASES sets the number of decisions (default 1,000,000) and
NAP_DSP_SEED the random seed (default: a fixed one).
"""

import os
import random
import shutil
import subprocess

import pytest

from nova_adaptive_paging import dsp
from tests.kernel import kpatch

HERE = os.path.dirname(os.path.abspath(__file__))
C_FILES = ('arch/x86/kvm/dsp.c', 'arch/x86/kvm/dsp.h')
MAX = dsp.METRIC_MAX
U64 = dsp.U64_MAX
CASES = int(os.environ.get('NAP_DSP_CASES', 1000000))
SEED = int(os.environ.get('NAP_DSP_SEED', 20110309))
PAPER = dsp.Thresholds(10000, 100, 5000000, 100000, 200000, 150000)


@pytest.fixture(scope='module')
def drivers(tmp_path_factory):
    gcc = shutil.which('gcc')
    # A missing compiler must fail, not skip: this is the check that the
    # kernel's decision and dsp.py agree (.ci/run installs gcc).
    assert gcc is not None, 'gcc is needed to compile the C decision'
    tmp = tmp_path_factory.mktemp('dsp')
    src = tmp / 'src'
    kpatch.extract(C_FILES, str(src))
    built = {}
    for variant, defines in (('int128', []), ('generic',
                                              ['-DDSP_SHIM_GENERIC'])):
        exe = str(tmp / ('dsp_driver_' + variant))
        subprocess.run(
            [gcc, '-std=gnu11', '-O2', '-Wall', '-Wextra', '-Werror',
             '-Wno-unused-parameter', '-Wno-sign-compare',
             '-I', str(src / 'arch/x86/kvm'),
             '-I', os.path.join(HERE, 'dsp_shim')] + defines +
            ['-o', exe, str(src / C_FILES[0]),
             os.path.join(HERE, 'dsp_driver.c')],
            check=True)
        built[variant] = exe
    return built


OFFSETS = (-2, -1, -1, 0, 0, 1, 1, 2)
EDGES = (0, 0, 1, 1, MAX, MAX, MAX - 1, 2)


def near(rng, bound):
    """A value at or around ``bound``, or one of the edges."""
    pick = rng.random()
    if pick < 0.45:
        value = bound + OFFSETS[rng.getrandbits(3)]
    elif pick < 0.6:
        # Around the "80 percent of" bounds: 5 * x versus 4 * bound.
        value = (4 * bound) // 5 + OFFSETS[rng.getrandbits(3)] // 2
    elif pick < 0.7:
        return EDGES[rng.getrandbits(3)]
    elif pick < 0.85:
        value = int(rng.random() * (2 * bound + 2))
    else:
        value = rng.getrandbits(1 + rng.getrandbits(6) % 48)
    if value < 0:
        return 0
    return MAX if value > MAX else value


def threshold_value(rng):
    pick = rng.random()
    if pick < 0.1:
        return rng.choice((0, 1, MAX, MAX - 1))
    if pick < 0.4:
        return rng.randrange(0, 64)
    if pick < 0.7:
        return rng.randrange(0, 1 << 24)
    return rng.getrandbits(48)


def thresholds(rng):
    if rng.random() < 0.1:
        return PAPER
    values = []
    for _ in range(3):
        a, b = threshold_value(rng), threshold_value(rng)
        if rng.random() < 0.05:
            b = a
        values += [max(a, b), min(a, b)]
    return dsp.Thresholds(*values)


def count(rng):
    pick = rng.random()
    if pick < 0.1:
        return rng.choice((0, 0, 1, 2, U64, U64 - 1, 1 << 63, MAX))
    if pick < 0.5:
        return rng.getrandbits(rng.randrange(1, 65))
    return rng.randrange(0, 1 << 32)


def ratio_args(rng):
    """(numerator, scale, denominator) near the saturation boundary."""
    scale = rng.choice((dsp.FTLB_SCALE, dsp.FPF_SCALE, dsp.PT_SCALE,
                        1, 1 + rng.getrandbits(rng.randrange(1, 48))))
    den = count(rng)
    pick = rng.random()
    if pick < 0.5 and den:
        # numerator * scale just below, at and above den * 2^48, and at
        # exact multiples of den.
        target = (den << 48) // scale + rng.choice((-1, 0, 1, 2))
        num = target if 0 <= target <= U64 else count(rng)
    elif pick < 0.7 and den:
        q = rng.getrandbits(rng.randrange(1, 49))
        num = (q * den) // scale + rng.choice((-1, 0, 1))
        num = num if 0 <= num <= U64 else count(rng)
    else:
        num = count(rng)
    return num, scale, den


def counts(rng):
    """(instructions, tlb_misses, page_faults) for Sample.from_counts."""
    insns = count(rng)
    if rng.random() < 0.3 and insns:
        # FTLB or FPF right at the saturation boundary.
        scale = rng.choice((dsp.FTLB_SCALE, dsp.FPF_SCALE))
        edge = (insns << 48) // scale + rng.choice((-1, 0, 1))
        tlb = edge if 0 <= edge <= U64 else count(rng)
    else:
        tlb = count(rng)
    pf = count(rng)
    if rng.random() < 0.2 and tlb:
        edge = (tlb << 48) // dsp.PT_SCALE + rng.choice((-1, 0, 1))
        pf = edge if 0 <= edge <= U64 else pf
    return insns, tlb, pf


def have(rng):
    return 3 if rng.random() < 0.9 else rng.randrange(0, 3)


def py_sample(insns, tlb, pf, flags):
    return dsp.Sample.from_counts(insns, tlb if flags & 1 else None,
                                  pf if flags & 2 else None)


def tline(t):
    return ' '.join(str(v) for v in t.as_tuple())


def decide_requests(rng, n):
    done = 0
    while done < n:
        # A threshold set, then a batch of decisions around it.
        t = thresholds(rng)
        tl = tline(t)
        bounds_tlb = (t.tlb_upper, t.tlb_lower)
        bounds_pf = (t.pf_upper, t.pf_lower)
        bounds_pt = (t.pt_upper, t.pt_lower)
        bounds_htlb = (0, t.tlb_upper, t.tlb_lower, 1)
        batch = min(64, n - done)
        done += batch
        for _ in range(batch):
            bits = rng.getrandbits(7)
            mode = bits & 1
            ftlb = near(rng, bounds_tlb[(bits >> 1) & 1])
            fpf = near(rng, bounds_pf[(bits >> 2) & 1])
            cpt = near(rng, bounds_pt[(bits >> 3) & 1])
            hpt = near(rng, bounds_pt[(bits >> 4) & 1])
            htlb = near(rng, bounds_htlb[bits >> 5])
            got, rule = dsp.decide(mode, ftlb, fpf, cpt, htlb, hpt, t)
            yield ('d %d %d %d %d %d %d %s'
                   % (mode, ftlb, fpf, cpt, htlb, hpt, tl),
                   '%d %d' % (got, rule))


def sample_requests(rng, n):
    for _ in range(n):
        insns, tlb, pf = counts(rng)
        flags = have(rng)
        s = py_sample(insns, tlb, pf, flags)
        yield ('s %d %d %d %d' % (insns, tlb, pf, flags),
               '%d %d %d %d' % (s.instructions, s.ftlb, s.fpf, s.pt))


def ratio_requests(rng, n):
    for _ in range(n):
        num, scale, den = ratio_args(rng)
        yield ('r %d %d %d' % (num, scale, den),
               str(dsp._scaled_ratio(num, scale, den)))


def counter_reading(rng):
    """(prev, now) readings of a perf counter: starved, idle,
    multiplexed, saturating, reopened, or ordinary."""
    prev = tuple(count(rng) // 2 for _ in range(3))
    pick = rng.random()
    enabled = rng.choice((0, 1, 2, rng.randrange(1, 1 << 40), U64 // 2))
    if pick < 0.15:
        running = 0                                 # starved (or idle)
    elif pick < 0.3:
        running = enabled                           # always on the PMU
    elif pick < 0.45:
        # Multiplexed at a ratio that overflows 64 bits with the count.
        running = 1
        enabled = max(enabled, 2)
    else:
        running = rng.randrange(0, enabled + 1)
    grow = (count(rng) // 2, enabled, running)
    now = tuple(min(p + g, U64) for p, g in zip(prev, grow))
    if rng.random() < 0.05:                         # reopened
        i = rng.randrange(3)
        now = now[:i] + (rng.randrange(0, prev[i] + 1) if prev[i] else 0,
                         ) + now[i + 1:]
    return prev, now


def counter_requests(rng, n):
    for _ in range(n):
        prev, now = counter_reading(rng)
        delta = dsp.counter_delta(prev, now)
        yield ('c ' + ' '.join(map(str, prev + now)),
               '0 0' if delta is None else '1 %d' % delta)


def valid_requests(rng, n):
    for _ in range(n):
        values = [threshold_value(rng) for _ in range(6)]
        if rng.random() < 0.3:
            values[rng.randrange(6)] = rng.choice(
                (MAX + 1, U64, MAX + rng.randrange(1, 1 << 20)))
        try:
            dsp.Thresholds(*values)
            ok = 1
        except ValueError:
            ok = 0
        yield 'v ' + ' '.join(map(str, values)), str(ok)


def engine_requests(rng, n):
    done = 0
    while done < n:
        for pair in engine_run(rng):
            done += 1
            yield pair


def build_requests(rng, n_decide):
    """Yield (request line, expected answer line) pairs.

    ``n_decide`` decisions, a fifth as many samples from counts and engine
    steps, a tenth as many scaled ratios and perf counters' intervals, a
    fiftieth threshold checks.
    """
    yield from decide_requests(rng, n_decide)
    yield from sample_requests(rng, n_decide // 5)
    yield from ratio_requests(rng, n_decide // 10)
    yield from counter_requests(rng, n_decide // 10)
    yield from valid_requests(rng, n_decide // 50)
    yield from guard_requests(rng, n_decide // 50)
    yield from engine_requests(rng, n_decide // 5)
    yield from cr3_revisit_run()


def cr3_revisit_run():
    """One engine on a path the random runs reach rarely: a TLB-bound
    guest that loads CR3 2 * 10^6 times a 10 s sample (they exit in
    shadow mode only), on Nehalem's prices, so that the VM leaves shadow
    mode and then, once the regret budget holds a visit, goes back again
    and again to count the loads, the wait doubling each time."""
    t = dsp.Thresholds(10000, 100, 5000000, 100000, 200000, 150000)
    g = dsp.Guard(4000, 10000000, 28648000, 5000, 27648000, 2000000)
    yield 'i 3 1 %s %s' % (tline(t), tline(g)), '1'
    engine = dsp.Engine(t, 3, dsp.Mode.SHADOW, g)
    switched = False
    for _ in range(600):
        insns, tlb = 10 ** 10, 3 * 10 ** 8
        cr3 = 2 * 10 ** 6 if engine.mode == dsp.Mode.SHADOW else 0
        sw = 30 * 10 ** 6 if switched else 0
        line = 'e %d %d 0 3 %d %d 1024 0 0 %d' % (
            insns, tlb, 10 ** 10, sw, cr3)
        before = engine.mode
        got = engine.step(dsp.Sample.from_counts(insns, tlb, 0), 10 ** 10,
                          sw, 1024, 0, 0, cr3)
        switched = got != before
        yield line, step_answer(engine, got)


def guard_value(rng, typical):
    pick = rng.random()
    if pick < 0.1:
        return rng.choice((0, 0, 1, MAX))
    if pick < 0.85:
        return rng.randrange(0, 2 * typical)
    return rng.getrandbits(48)


def cr3_cost(rng):
    """A CR3 load's price: often none (a set written before version 6),
    else of real hardware's order (300 ps to 3 us), or any, or the edges."""
    pick = rng.random()
    if pick < 0.4:
        return 0
    if pick < 0.75:
        return rng.randrange(300, 3000001)
    if pick < 0.9:
        return rng.randrange(MAX + 1)
    return rng.choice((1, 1000, MAX - 1, MAX))


def guard(rng):
    """A guard: mostly costs of real hardware's order, sometimes none (a
    version 2 set), sometimes the extremes."""
    pick = rng.random()
    if pick < 0.1:
        return dsp.Guard()
    if pick < 0.3:
        # 1 ns an event and the cheapest switch: counts on the ledger's
        # own boundaries (below) make its comparisons meet equality.
        return dsp.Guard(1000, 1000, rng.choice((0, dsp.SWITCH_COST_MIN_NS)),
                         rng.choice((10, 20, 1000, dsp.PPM)),
                         rng.choice((0, 1024, dsp.SWITCH_COST_MIN_NS)),
                         rng.choice((0, 0, 1000)))
    return dsp.Guard(guard_value(rng, 10 ** 4), guard_value(rng, 10 ** 7),
                     guard_value(rng, 10 ** 7),
                     rng.choice((0, 1, 5000, 5000, 50000, dsp.PPM,
                                 rng.randrange(dsp.PPM + 1))),
                     guard_value(rng, 3 * 10 ** 7), cr3_cost(rng))


def guard_requests(rng, n):
    for _ in range(n):
        values = [rng.choice((0, 1, MAX, MAX + 1, U64, rng.getrandbits(49)))
                  for _ in range(3)]
        values.append(rng.choice((0, dsp.PPM, dsp.PPM + 1, U64,
                                  rng.randrange(2 * dsp.PPM))))
        for _ in range(2):
            values.append(rng.choice((0, 1, MAX, MAX + 1, U64,
                                      rng.getrandbits(49))))
        try:
            dsp.Guard(*values)
            ok = 1
        except ValueError:
            ok = 0
        yield 'g ' + ' '.join(map(str, values)), str(ok)


def elapsed(rng):
    pick = rng.random()
    if pick < 0.05:
        return rng.choice((0, U64, MAX, 1 << 62))
    if pick < 0.8:
        return rng.choice((10 ** 8, 10 ** 9, 5 * 10 ** 9))
    return rng.getrandbits(rng.randrange(1, 64))


def switching(rng, engine, directed):
    """What the VM's switches took in an interval: mostly nothing; after
    a switch, about its price (less, so that the price stays owed, or
    far more, a guest bigger than the price says); the edges of u64."""
    pick = rng.random()
    if directed:
        return (dsp.SWITCH_COST_MIN_NS // 2) * rng.randrange(5) if (
            pick < 0.3) else 0
    if pick < 0.6:
        return 0
    if pick < 0.9:
        price = engine.price(engine.mode) if engine.guard else 10 ** 7
        return max(int(price * rng.choice((0.3, 0.99, 1, 1.01, 2, 60))), 1)
    return rng.choice((1, MAX, MAX + 1, 1 << 62, U64, rng.getrandbits(64)))


def memory(rng, directed):
    """A VM's memory, in MiB: a guest's sizes, a size that prices a switch
    on the ledger's grid of half switches (directed runs), the edges."""
    pick = rng.random()
    if directed:
        return rng.choice((0, 512, 1024, 2048))
    if pick < 0.9:
        return rng.choice((0, 512, 4096, 65536, 1 << 19))
    return rng.choice((1, U64, 1 << 62, rng.getrandbits(64)))


def events_took(rng, count_, directed):
    """What handling or walking ``count_`` events took, in ns: mostly
    nothing (not measured); a price per event from 1 ns to 100 us; the
    edges of u64, which halve the measure."""
    pick = rng.random()
    if directed:
        return count_ * rng.choice((0, 0, 1, 2)) // 2
    if pick < 0.4:
        return 0
    if pick < 0.9:
        return min(count_ * rng.choice((1, 7, 30, 150, 4000, 10 ** 5)), U64)
    return rng.choice((1, MAX, MAX + 1, 1 << 62, U64, rng.getrandbits(64)))


def cr3_loads(rng, insns, directed):
    """The loads of CR3 that exited in an interval: mostly none (TDP, or
    a guest that does not switch address spaces), a few, a rate per
    instruction of real guests (one in 10^3 to 10^6), the edges of the
    measure and of u64; directed runs, on the grid of half switches."""
    pick = rng.random()
    if directed:
        return (dsp.SWITCH_COST_MIN_NS // 2) * rng.randrange(3) if (
            pick < 0.4) else 0
    if pick < 0.4:
        return 0
    if pick < 0.6:
        return rng.randrange(1, 1000)
    if pick < 0.85:
        return insns // rng.choice((1000, 5000, 10 ** 5, 10 ** 6))
    return rng.choice((MAX, MAX + 1, 1 << 63, U64 - 1, U64,
                       rng.getrandbits(64)))


def step_answer(engine, got):
    return ' '.join(map(str, (
        int(got), int(engine.last_rule), engine.last_htlb, engine.last_hpt,
        engine.regret, engine.lead, engine.gain, engine.paid,
        engine.run_ns, engine.credit, engine.backoff, engine.margin,
        engine.seen[0], engine.seen[1], int(engine.measuring), engine.owed,
        engine.sized, *engine.maint, *engine.walk[0], *engine.walk[1],
        int(engine.explored), engine.exploring, int(engine.switched),
        engine.since_change, int(engine.had_data[0]),
        int(engine.had_data[1]), *engine.cr3, engine.cr3_at,
        engine.cr3_wait)))


def engine_run(rng):
    """One engine: init (sometimes refused), then a run of steps."""
    t = thresholds(rng)
    g = guard(rng)
    # The guard on the ledger's boundaries (guard() above): short windows,
    # so that Figure 5 asks often, and counts on a grid of half switches.
    directed = g.tlb_cost_ps == 1000
    history = rng.choice((1, 2, 3, 3, 3, 4, 8, rng.randrange(1, 65), 64))
    if directed:
        history = rng.choice((1, 1, 2))
    mode = rng.randrange(2)
    if rng.random() < 0.05:
        bad = rng.choice((0, 65, 1000))
        yield 'i %d %d %s %s' % (bad, mode, tline(t), tline(g)), '0'
    yield 'i %d %d %s %s' % (history, mode, tline(t), tline(g)), '1'
    engine = dsp.Engine(t, history, dsp.Mode(mode), g)
    # A workload leaning one way makes the ledger's leader and backoff
    # move; independent counts would only make it hover around zero.
    lean = rng.random()
    for _ in range(rng.randrange(1, 3 * history + 40)):
        pick = rng.random()
        if pick < 0.02:
            mode = rng.randrange(2)
            engine.reset(dsp.Mode(mode))
            yield 'R %d' % mode, str(mode)
            continue
        if pick < 0.04:
            # What a replaced engine had left, around the credit's range
            # (below zero after a switch that took more than its price).
            credit = rng.choice((0, 1, -1, engine.credit, engine.credit + 1,
                                 -rng.getrandbits(40), rng.getrandbits(40),
                                 dsp.LEDGER_MAX, -dsp.LEDGER_MAX))
            engine.keep_credit(credit)
            yield 'K %d' % credit, str(engine.credit)
            continue
        ns = rng.choice((0, 10 ** 8, 10 ** 9)) if directed else elapsed(rng)
        if directed:
            half = dsp.SWITCH_COST_MIN_NS // 2
            tlb = half * rng.randrange(5) + rng.choice((0, 0, 0, 1))
            pf = half * rng.randrange(5)
        if pick < 0.3:
            if directed:
                insns = rng.randrange(max(tlb, pf, 1), 1 << 40)
            else:
                insns, tlb, pf = counts(rng)
            flags = have(rng)
            sw = switching(rng, engine, directed)
            mib = memory(rng, directed)
            maint = events_took(rng, pf, directed)
            walk = events_took(rng, tlb, directed)
            cr3 = cr3_loads(rng, insns, directed)
            line = 'e %d %d %d %d %d %d %d %d %d %d' % (
                insns, tlb, pf, flags, ns, sw, mib, maint, walk, cr3)
            sample = py_sample(insns, tlb, pf, flags)
        else:
            insns = 0 if rng.random() < 0.05 else rng.randrange(1, 1 << 40)
            if directed:
                pass
            elif rng.random() < 0.1:
                tlb, pf = count(rng), count(rng)
            else:
                lean = min(max(lean + rng.uniform(-0.2, 0.2), 0.0), 1.0)
                tlb = int(rng.randrange(1 << 30) * lean)
                pf = int(rng.randrange(1 << 24) * (1 - lean))
            sample = dsp.Sample(
                insns,
                near(rng, rng.choice((t.tlb_upper, t.tlb_lower, 0))),
                near(rng, rng.choice((t.pf_upper, t.pf_lower))),
                near(rng, rng.choice((t.pt_upper, t.pt_lower))), tlb, pf)
            sw = switching(rng, engine, directed)
            mib = memory(rng, directed)
            maint = events_took(rng, pf, directed)
            walk = events_took(rng, tlb, directed)
            cr3 = cr3_loads(rng, insns, directed)
            line = 'E %d %d %d %d %d %d %d %d %d %d %d %d' % (
                sample.instructions, sample.ftlb, sample.fpf, sample.pt,
                tlb, pf, ns, sw, mib, maint, walk, cr3)
        got = engine.step(sample, ns, sw, mib, maint, walk, cr3)
        yield line, step_answer(engine, got)


def run_driver(exe, requests):
    proc = subprocess.run([exe], input=requests, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.splitlines()


def test_series_adds_the_decision_file():
    assert kpatch.patches_touching(C_FILES[0]), \
        'no patch in kvm-patch/patches/series adds %s' % C_FILES[0]


@pytest.mark.parametrize('variant', ['int128', 'generic'])
def test_c_decision_matches_python(drivers, variant):
    rng = random.Random(SEED if variant == 'int128' else SEED + 1)
    n = CASES if variant == 'int128' else max(CASES // 10, 1000)
    pairs = list(build_requests(rng, n))
    requests = ''.join(req + '\n' for req, _ in pairs)
    answers = run_driver(drivers[variant], requests)
    assert answers[-1].startswith('divisions ')
    assert int(answers[-1].split()[1]) > 0
    answers = answers[:-1]
    assert len(answers) == len(pairs)
    bad = [(req, want, got) for (req, want), got in zip(pairs, answers)
           if want != got]
    kinds = {}
    for req, _ in pairs:
        kinds[req[0]] = kinds.get(req[0], 0) + 1
    assert kinds['d'] >= n
    # Every rule of Figure 5, the window's warm-up and "no data", and both
    # sides of the saturation guard were exercised.
    rules = {int(want.split()[1]) for req, want in pairs
             if req[0] in 'dEe'}
    assert rules == set(int(r) for r in dsp.Rule)
    # What switches took and the leader's margin were exercised: credit
    # below zero, a price still owed, both modes' switches measured, the
    # leader followed after its margin had doubled twice.
    steps = [[int(f) for f in want.split()] for req, want in pairs
             if req[0] in 'eE']
    assert any(s[9] < 0 for s in steps) and any(s[15] for s in steps)
    assert any(s[14] for s in steps) and any(s[16] for s in steps)
    assert any(s[12] and s[13] for s in steps)
    assert any(s[1] == dsp.Rule.REGRET_LEADER and s[11] > 2 for s in steps)
    # The events' measures: faults handled in shadow mode, walks measured
    # in both modes (a miss priced by the VM's own), sums halved past MAX.
    assert any(s[18] for s in steps) and any(s[20] and s[22] for s in steps)
    assert any(s[17] > MAX // 2 for s in steps)
    assert any(s[19] > MAX // 2 or s[21] > MAX // 2 for s in steps)
    # The VM's rate of CR3 loads, measured in shadow mode: loads over
    # instructions, halved past the loads' MAX and past the span.
    assert any(s[29] and s[30] for s in steps)
    assert any(s[29] > MAX // 2 for s in steps)
    assert any(s[30] > dsp.CR3_SPAN_INSNS // 2 for s in steps)
    # A visit to count the loads again (its wait doubled) and a measure
    # after one (the wait kept, the measure's time moved on).
    assert any(s[32] > dsp.CR3_REVISIT_NS for s in steps)
    assert any(s[32] > dsp.CR3_REVISIT_NS and s[31] for s in steps)
    # A switch to explore (it leaves the switch measuring), a switch
    # Figure 5 wanted kept for the visit (after the switch's time), and
    # the way back when the visit ended (rule 14, no visit left).
    assert any(s[1] == dsp.Rule.EXPLORE and s[14] and s[24] for s in steps)
    assert any(s[1] == dsp.Rule.EXPLORE and not s[14] and s[24]
               for s in steps)
    assert any(s[1] == dsp.Rule.EXPLORE and s[14] and not s[24]
               for s in steps)
    ratios = [int(want) for req, want in pairs if req[0] == 'r']
    assert MAX in ratios and any(0 < r < MAX for r in ratios)
    # A perf counter's interval: no data (starved or reopened), scaled
    # for multiplexing, saturated, and as counted.
    counters = [want for req, want in pairs if req[0] == 'c']
    assert '0 0' in counters and '1 %d' % U64 in counters
    assert len(set(counters)) > len(counters) // 2
    assert not bad, ('%d of %d answers differ (seed %d, %s); first: %s'
                     % (len(bad), len(pairs), SEED, kinds, bad[:5]))


def test_boundaries_exhaustively(drivers):
    """Every decision input at -1/0/+1 of small thresholds, all modes."""
    t = dsp.Thresholds(10, 5, 20, 10, 30, 15)
    points = sorted({v for b in (0, 5, 8, 10, 15, 16, 20, 30)
                     for v in (b - 1, b, b + 1) if v >= 0})
    pairs = []
    for mode in (0, 1):
        for ftlb in points:
            for fpf in points:
                for cpt in points:
                    for htlb in (0, 1, 10):
                        for hpt in (0, 14, 15, 30, 31):
                            got, rule = dsp.decide(dsp.Mode(mode), ftlb,
                                                   fpf, cpt, htlb, hpt, t)
                            pairs.append((
                                'd %d %d %d %d %d %d %s'
                                % (mode, ftlb, fpf, cpt, htlb, hpt,
                                   tline(t)),
                                '%d %d' % (got, rule)))
    answers = run_driver(drivers['int128'],
                         ''.join(r + '\n' for r, _ in pairs))[:-1]
    assert answers == [want for _, want in pairs]
