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

"""A family of workloads built to break a switching rule (MODELED).

Held-out judging of a paging decision on the shipped traces alone rewards
tuning to them.  This family is generated, seeded, from two shipped
programs' own rates (``mcf``: TLB-bound, shadow paging wins;
``fork-exec``: fault-bound, hap wins), so its phases are as heavy as real
ones, and arranged the ways a reactive rule can be made to lose:

* ``alt-<P>s``: the two programs alternate every P seconds, for every P
  from below the sampling interval (0.5 s) to minutes (300 s): a rule
  that follows the counters chases a workload that changes just slower
  than it reacts;
* ``burst-<n>``: the TLB-bound program with fault bursts of 1-3 s at
  random every 10-60 s;
* ``ramp``: one program fading into the other and back, slowly;
* ``noise``: every slice a random mix of the two (the rates of noise
  around the break-even point, a rule must not switch on it);
* ``idle``: a guest that does almost nothing;

plus every shipped trace.  Each slice's counts get a few per cent of
multiplicative noise.  Every trace is a :class:`traces.Trace`, replayed
by the evaluator like a file.

Beside it, adversaries aimed at the switch guard's assumptions (issue
59; :func:`assumption_sets` gathers them per assumption):

* ``<member>@<n>GiB``: a member in a guest of 1 to 512 GiB, all of it
  resident, so that entering shadow mode costs what the hardware
  profile's formula says at that size (``to_shadow + to_shadow_per_mib
  * working set``) while the guard prices a switch at the reference
  working set;
* ``<member>+cr3-<r>k``: a member whose guest also writes CR3 ``r``
  thousand times a second (up to 200k/s), which shadow mode pays for and
  neither thresholds nor ledger count;
* ``<member>+cr3-<r>k-<a>-<b>s``: the same writes from second ``a`` to
  ``b`` only, so that the guest's rate when the VM last ran in shadow
  mode (where the kernel counts them) is not its rate now;
* ``flip-<P>s`` and ``flip-<P>s-j<n>``: two mixes of the templates
  balanced on a profile's true costs, so that the better static mode
  flips every P seconds (one sampling interval to an hour), the first
  phase half as long so that the *cumulative* leader flips too; ``-j``
  draws each phase's length within +-50 % of P (timing jitter);
* ``lean<+m>%``: a steady mix on which hap is ``m`` per cent slower than
  shadow in truth (negative: faster), the cases a mispriced profile
  gets wrong;
* :func:`mispriced`: a hardware profile whose TLB-miss and page-fault
  prices are off from the truth by a given share (30 %, 50 %), in
  opposite directions, which moves the priced break-even most.
"""

import dataclasses
import functools
import math
import random

from nova_adaptive_paging.costmodel import traces as tracelib
from nova_adaptive_paging import vocabulary

SEED = 2011
DURATION_S = 600
SLICE_S = 0.25
PERIODS_S = (0.5, 1, 2, 3, 5, 8, 13, 20, 30, 60, 120, 300)
JITTER = 0.05           # relative, per slice and count
# Phase templates: (shipped trace, what it stands for).
TLB_BOUND, FAULT_BOUND = 'mcf', 'fork-exec'
COUNTS = ('instructions', 'tlb_misses', 'page_faults', 'cr3_writes')


def _rates(trace):
    """Mean per-second rate of each count over a trace."""
    total = sum(trace.interval_s)
    return {c: sum(getattr(trace, c)) / total for c in COUNTS}


@functools.lru_cache(maxsize=None)
def _templates():
    # Package data: parsed once, not for every generated trace.
    shipped = tracelib.builtin()
    return _rates(shipped[TLB_BOUND]), _rates(shipped[FAULT_BOUND])


def _build(name, weights, rng, comment, idle=1.0):
    """A trace whose slice i mixes the TLB-bound template with weight
    ``1 - weights[i]`` and the fault-bound one with ``weights[i]``."""
    tlb, fault = _templates()
    columns = {c: [] for c in COUNTS}
    for w in weights:
        for c in COUNTS:
            rate = (1 - w) * tlb[c] + w * fault[c]
            columns[c].append(rate * SLICE_S * idle
                              * rng.uniform(1 - JITTER, 1 + JITTER))
    n = len(weights)
    return tracelib.Trace(
        name=name, interval_s=(SLICE_S,) * n,
        instructions=tuple(columns['instructions']),
        tlb_misses=tuple(columns['tlb_misses']),
        page_faults=tuple(columns['page_faults']),
        cr3_writes=tuple(columns['cr3_writes']),
        working_set_mib=(0.0,) * n, comment=comment)


def alternating(period_s, rng, duration_s=DURATION_S):
    slices = int(round(duration_s / SLICE_S))
    per = max(int(round(period_s / SLICE_S)), 1)
    weights = [float((i // per) % 2) for i in range(slices)]
    comment = 'generated: %s and %s alternating every %g s' % (
        TLB_BOUND, FAULT_BOUND, period_s)
    return _build('alt-%gs' % period_s, weights, rng, comment)


def burst(index, rng, duration_s=DURATION_S):
    slices = int(round(duration_s / SLICE_S))
    weights = [0.0] * slices
    at = rng.uniform(10, 60)
    while at < duration_s:
        length = rng.uniform(1, 3)
        for i in range(int(at / SLICE_S), min(slices, int(
                (at + length) / SLICE_S))):
            weights[i] = 1.0
        at += length + rng.uniform(10, 60)
    return _build('burst-%d' % index, weights, rng, 'generated: %s with '
                  '%s bursts of 1-3 s every 10-60 s' % (TLB_BOUND,
                                                        FAULT_BOUND))


def ramp(rng, duration_s=DURATION_S):
    slices = int(round(duration_s / SLICE_S))
    half = slices / 2
    weights = [1 - abs(i - half) / half for i in range(slices)]
    return _build('ramp', weights, rng, 'generated: %s fading into %s and '
                  'back' % (TLB_BOUND, FAULT_BOUND))


def noise(rng, duration_s=DURATION_S):
    slices = int(round(duration_s / SLICE_S))
    weights = [rng.random() for _ in range(slices)]
    return _build('noise', weights, rng, 'generated: a random mix of %s '
                  'and %s every slice' % (TLB_BOUND, FAULT_BOUND))


def idle(rng, duration_s=DURATION_S):
    slices = int(round(duration_s / SLICE_S))
    return _build('idle', [0.5] * slices, rng, 'generated: an idle guest '
                  '(1 %% of the mix\'s activity)', idle=0.01)


def family(seed=SEED, periods=PERIODS_S, bursts=3, duration_s=DURATION_S,
           shipped=True):
    """The family: generated traces (seeded) and the shipped ones."""
    rng = random.Random(seed)
    out = [alternating(p, rng, duration_s) for p in periods]
    out += [burst(i, rng, duration_s) for i in range(1, bursts + 1)]
    out += [ramp(rng, duration_s), noise(rng, duration_s),
            idle(rng, duration_s)]
    if shipped:
        out += list(tracelib.builtin().values())
    return out


def unit_family(seed=SEED):
    """A unit-test-sized family: the periods' extremes and middle, one
    burst trace, noise and idle, two minutes each, no shipped trace."""
    return family(seed, periods=(0.5, 3, 30), bursts=1, duration_s=120,
                  shipped=False)


# The assumptions' adversaries (issue 59).  Guest sizes are powers of two
# from a small guest to a large host's share; CR3 rates reach what a busy
# multi-vCPU server makes (tens of thousands of context switches a
# second per vCPU); flip periods run from the shortest sampling interval
# calibration picks (derivation.INTERVALS) to an hour.
GUEST_GIB = (1, 4, 16, 64, 128, 256, 512)
CR3_RATES = (10000, 20000, 50000, 100000, 200000)
# When the CR3 writes of ``CR3 rate changes`` happen (s of a 600 s run).
CR3_WINDOWS_S = ((0, 60), (0, 200), (200, 400), (200, 600))
FLIP_PERIODS_S = (1, 2, 3, 5, 8, 13, 20, 30, 60, 120, 300, 600, 1800, 3600)
FLIP_JITTER = 0.5
LEANS = (-0.05, -0.02, -0.01, -0.005, 0.005, 0.01, 0.02, 0.05)
PRICE_ERRORS = (0.3, 0.5)
MIB_PER_GIB = 1024
_EVENT_OF = {'tlb_misses': vocabulary.EVENT_TLB_MISS,
             'page_faults': vocabulary.EVENT_PAGE_FAULT,
             'cr3_writes': vocabulary.EVENT_CR3_WRITE}


def at_size(trace, gib):
    """``trace`` in a guest of ``gib`` GiB, all of it resident: the
    working set the switch into shadow mode rebuilds."""
    n = len(trace)
    return dataclasses.replace(
        trace, name='%s@%dGiB' % (trace.name, gib),
        working_set_mib=(float(gib * MIB_PER_GIB),) * n,
        has_working_set=True,
        comment=trace.comment + '; in a %d GiB guest, all resident' % gib)


def _cr3_added(trace, rate, rng, start_s=0.0, end_s=math.inf):
    """``trace``'s CR3 writes with ``rate`` more a second in the slices
    that start from ``start_s`` to before ``end_s``, each jittered (a
    draw of ``rng`` per such slice)."""
    cr3, at = [], 0.0
    for c, d in zip(trace.cr3_writes, trace.interval_s):
        on = start_s <= at < end_s
        cr3.append(c + (rate * d * rng.uniform(1 - JITTER, 1 + JITTER)
                        if on else 0.0))
        at += d
    return tuple(cr3)


def with_cr3(trace, rate, rng):
    """``trace`` with ``rate`` more CR3 writes per second (jittered per
    slice like the other counts)."""
    return dataclasses.replace(
        trace, name='%s+cr3-%gk' % (trace.name, rate / 1000),
        cr3_writes=_cr3_added(trace, rate, rng),
        comment=trace.comment + '; plus %g CR3 writes/s' % rate)


def with_cr3_between(trace, rate, start_s, end_s, rng):
    """``trace`` with ``rate`` more CR3 writes per second from second
    ``start_s`` to ``end_s`` of its native time only."""
    what = (rate / 1000, start_s, end_s)
    return dataclasses.replace(
        trace, name='%s+cr3-%gk-%d-%ds' % ((trace.name,) + what),
        cr3_writes=_cr3_added(trace, rate, rng, start_s, end_s),
        comment=trace.comment
        + '; plus %gk CR3 writes/s from %d s to %d s' % what)


def _extra(hw, rates):
    """Seconds over native per native second in (hap, shadow), true
    costs."""
    return tuple(sum(rates[c] * hw.cost_s(m, e) for c, e in
                     _EVENT_OF.items()) for m in vocabulary.MODES)


def _lean_weight(hw, lean):
    """The fault-bound weight at which hap runs ``1 + lean`` times as
    long as shadow (``lean`` 0: the true break-even)."""
    (ht, st), (hf, sf) = (_extra(hw, t) for t in _templates())
    w = (((1 + lean) * (1 + st) - 1 - ht)
         / ((hf - ht) - (1 + lean) * (sf - st)))
    if not 0 <= w <= 1:
        raise ValueError('%s: no mix of the templates leans %+g' % (
            hw.name, lean))
    return w


def _gap_weight(hw, gap):
    """The fault-bound weight at which hap costs ``gap`` seconds a native
    second more than shadow."""
    (ht, st), (hf, sf) = (_extra(hw, t) for t in _templates())
    return ((ht - st) - gap) / ((ht - st) - (hf - sf))


def flipping(period_s, hw, rng, jitter=0.0, duration_s=None, draw=None):
    """Phases that take turns being cheaper in shadow mode and in hap by
    the same seconds per second on ``hw``'s true costs, every
    ``period_s`` (the first phase half of it); with ``jitter``, each
    phase lasts ``period_s`` times a draw within ``1 +- jitter``."""
    duration_s = duration_s or max(DURATION_S, 4 * period_s)
    (ht, st), (hf, sf) = (_extra(hw, t) for t in _templates())
    gap = min(ht - st, sf - hf)
    # Shadow's phase first (the VM starts in hap), then hap's.
    levels = (_gap_weight(hw, gap), _gap_weight(hw, -gap))
    slices = int(round(duration_s / SLICE_S))
    weights, phase, length = [], 0, period_s / 2
    while len(weights) < slices:
        if jitter:
            length *= rng.uniform(1 - jitter, 1 + jitter)
        weights += [levels[phase % 2]] * max(int(round(length / SLICE_S)),
                                             1)
        phase, length = phase + 1, period_s
    name = 'flip-%gs' % period_s + ('-j%d' % draw if draw is not None
                                    else '')
    return _build(name, weights[:slices], rng, 'generated: the better '
                  'static mode flips every %g s on %s\'s costs%s' % (
                      period_s, hw.name, ' (phases within +-%d %%)'
                      % (jitter * 100) if jitter else ''))


def leaning(lean, hw, rng, duration_s=DURATION_S):
    """A steady mix on which hap takes ``1 + lean`` times shadow's time on
    ``hw``'s true costs."""
    slices = int(round(duration_s / SLICE_S))
    return _build('lean%+g%%' % (lean * 100), [_lean_weight(hw, lean)]
                  * slices, rng, 'generated: hap %+g %% against shadow on '
                  '%s\'s costs' % (lean * 100, hw.name))


def mispriced(hw, error):
    """``hw`` as a profile that prices a TLB miss ``1 + error`` times and
    a page fault ``1 - error`` times their true cost (switches and CR3
    writes as they are): the prices calibration and the guard believe."""
    scale = {vocabulary.EVENT_TLB_MISS: 1 + error,
             vocabulary.EVENT_PAGE_FAULT: 1 - error}
    costs = {m: {e: c * scale.get(e, 1.0) for e, c in per.items()}
             for m, per in hw.event_cost_ns.items()}
    return dataclasses.replace(hw, name='%s%+d%%tlb' % (hw.name,
                                                        round(error * 100)),
                               event_cost_ns=costs)


def assumption_sets(hw, seed=SEED, full=False):
    """Per assumption of the guard's bound, the traces aimed at it on
    ``hw``'s true costs: ``full`` adds the flips of 30 minutes and an
    hour and ten jitter draws a period instead of three."""
    def rng(*what):
        # One stream per trace, so that a trace is the same in the full
        # sweep and in the default one.
        return random.Random('%s/%d' % ('/'.join(map(str, what)), seed))
    base = family(seed, shipped=False)
    periods = [p for p in FLIP_PERIODS_S if full or p <= 600]
    flips = [flipping(p, hw, rng('flip', p)) for p in periods]
    flips += [flipping(p, hw, rng('flip', p, i), FLIP_JITTER, draw=i)
              for p in periods if p <= 60 for i in range(10 if full else 3)]
    cr3_base = [t for t in base if t.name in (
        'alt-5s', 'alt-120s', 'alt-300s', 'ramp')]
    steady = _build(TLB_BOUND, [0.0] * int(DURATION_S / SLICE_S),
                    rng(TLB_BOUND), 'generated: %s alone' % TLB_BOUND)
    return {
        'switch cost at size': [at_size(t, g) for g in GUEST_GIB
                                for t in base],
        'CR3 unpriced': [with_cr3(t, r, rng('cr3', t.name, r))
                         for r in CR3_RATES for t in [steady] + cr3_base],
        # The rate the kernel last counted in shadow mode is not the
        # guest's now: it stops, starts, or both.
        'CR3 rate changes': [
            with_cr3_between(steady, r, a, b, rng('cr3', r, a, b))
            for r in CR3_RATES[2::2] for a, b in CR3_WINDOWS_S],
        'flipping leader': flips,
        'price error': base + list(tracelib.builtin().values()) + [
            leaning(v, hw, rng('lean', v)) for v in LEANS],
    }
