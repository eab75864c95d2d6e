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
"""

import functools
import random

from nova_adaptive_paging.costmodel import traces as tracelib

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
