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

"""Deriving DSP thresholds from a hardware profile's costs.

Two steps (doc/source/simulation.rst explains them):

1. Break-even analysis fixes the *shape* of the thresholds from the
   costs.  Per 1000 instructions, HAP loses ``FTLB * dt`` and shadow mode
   ``FPF * 1e-7 * dp`` (``dt``, ``dp``: extra cost of a TLB miss in HAP
   and of a page fault in shadow mode, over the other mode), so the modes
   break even at ``P-to-T* = 1e7 * dt / dp``:

   * ``pt_upper = P-to-T* * h`` and ``pt_lower = P-to-T* / h`` (a
     hysteresis band of factor ``h``);
   * ``tlb_lower`` is the TLB-miss frequency at which shadow mode saves
     a round trip of switches within the shortest stay, ``history *
     interval`` seconds; below it (and below ``pf_lower``) a switch
     cannot pay for itself and rule 3 keeps the mode;
   * ``pf_lower = tlb_lower * P-to-T*`` (the same cost in faults);
   * ``tlb_upper = k * tlb_lower`` and ``pf_upper = tlb_upper *
     P-to-T*``: on the break-even line, so that rules 1 and 2 (which look
     at one metric and 80 % of the other's bound) never pick the dearer
     mode.

2. A search over the free factors (sampling interval, history length,
   ``h``, ``k``) replays every given trace with :mod:`.evaluator` and
   scores each candidate with :mod:`.assess`.  It keeps, in order:
   candidates that meet the regret bound (at most 1 % slower than the
   better static mode on every trace) and do not switch on steady
   traces more than the oracle; then the largest worst-case share of
   the oracle's gain on phase-changing traces (to 1 %); then the
   smallest worst regret (to 0.1 %); then the longest interval (fewer
   samples, for the same result); then the smallest mean regret; then
   the one nearest the paper's choices (history 3, h 1.25, k 10).

   The interval is searched because it is the lever the costs move
   most: a phase change costs at least one interval in the wrong mode,
   which is cheap where the modes differ little and dear where a
   5-level nested walk or a costly fault makes the wrong mode slow.
"""

import collections
import datetime
import itertools
import math

from nova_adaptive_paging import cpu
from nova_adaptive_paging import dsp
from nova_adaptive_paging import exception
from nova_adaptive_paging import profiles
from nova_adaptive_paging.costmodel import traces as tracefiles
from nova_adaptive_paging.tuning import assess
from nova_adaptive_paging import vocabulary

INTERVALS = (1, 2, 5, 10)
HISTORIES = (1, 2, 3, 4, 5)
HYSTERESIS = (1.1, 1.25, 1.5, 2.0)
UPPER_FACTORS = (3.0, 10.0, 30.0)
DEFAULTS = (3, 1.25, 10.0)
# Below the lower thresholds a mode loses at most this share of the VM's
# time to the other: half the regret bound, the rest is left to the
# sampling lag.
QUIET_LOSS = assess.GOAL_REGRET / 2


def _round(value):
    """Three significant digits, at most 3 decimals, in milli units."""
    if value <= 0:
        return 0
    digits = 3 - len(str(int(value))) if value >= 1 else 3
    return profiles.to_milli(max(round(value, min(3, max(0, digits))),
                                 0.001))


def break_even(hw):
    """(P-to-T* in paper units, seconds per TLB miss saved by shadow)."""
    dt = hw.extra_cost_s(vocabulary.HAP, vocabulary.EVENT_TLB_MISS)
    dp = hw.extra_cost_s(vocabulary.SHADOW, vocabulary.EVENT_PAGE_FAULT)
    if dt <= 0 or dp <= 0:
        raise ValueError('%s: the break-even analysis needs TLB misses to '
                         'cost more in HAP and page faults more in shadow '
                         'mode' % hw.name)
    return 1e7 * dt / dp, dt


def derive(hw, history, interval_s, hysteresis, upper_factor):
    """Thresholds from costs for fixed free factors (step 1)."""
    pt_star, dt = break_even(hw)
    ws = hw.reference_working_set_mib
    round_trip = (hw.switch_s(vocabulary.SHADOW, ws) +
                  hw.switch_s(vocabulary.HAP, ws))
    # The share of its time a VM may lose before rule 3 stops keeping its
    # mode: what a round trip of switches costs over the shortest stay,
    # but never more than the regret bound allows.
    share = min(round_trip / (history * interval_s), QUIET_LOSS)
    tlb_lower = share * 1000 / (dt * hw.reference_ips)
    tlb_upper = tlb_lower * upper_factor
    values = dict(tlb_upper=_round(tlb_upper), tlb_lower=_round(tlb_lower),
                  pf_upper=_round(tlb_upper * pt_star),
                  pf_lower=_round(tlb_lower * pt_star),
                  pt_upper=_round(pt_star * hysteresis),
                  pt_lower=_round(pt_star / hysteresis))
    return dsp.Thresholds(**values)


class CalibrationError(exception.Error):
    pass


# The shipped traces calibration tunes on, and those it is judged on: a
# fixed split, so that no trace is on both sides.  Each side has a
# TLB-bound and a fault-bound program, a phase-changing trace and half of
# the Table 1 rows.
TUNING_TRACES = ('gcc', 'mcf', 'phases-tlb-fault', 'quiet') + tuple(
    'spec-int-t1-row%02d' % i for i in range(1, 13, 2))
HELD_OUT_TRACES = ('fork-exec', 'libquantum-bursts', 'phases-irregular') + \
    tuple('spec-int-t1-row%02d' % i for i in range(2, 13, 2))


def tuning_traces():
    """The shipped traces ``calibrate`` tunes on by default."""
    shipped = tracefiles.builtin()
    return [shipped[name] for name in TUNING_TRACES]


def held_out_traces():
    """The shipped traces calibration is judged on."""
    shipped = tracefiles.builtin()
    return [shipped[name] for name in HELD_OUT_TRACES]


def generation_for(hw, generation=None):
    """The generation key a calibrated profile is filed under: the one
    given, else the hardware profile's; it must be a key cpu.py can give
    a host, or no host would ever select the profile."""
    key = generation or hw.generation
    if key is None:
        raise CalibrationError(
            'hardware profile %s names no CPU generation: give --generation '
            'KEY (as "nova-paging cpu-generation" prints it)' % hw.name)
    if not cpu.is_generation_key(key):
        raise CalibrationError(
            '--generation %r: expected a CPU generation key that '
            '"nova-paging cpu-generation" can print, such as intel-nehalem '
            'or intel-6-85' % key)
    return key


def _rank(summary, interval, history, h, k):
    """Sort key of a candidate: smaller is better (module docstring)."""
    feasible = (summary.worst_regret <= assess.GOAL_REGRET
                and summary.excess_switches == 0)
    capture = (1.0 if summary.worst_capture is None
               else summary.worst_capture)
    return (not feasible,
            0.0 if feasible else round(summary.worst_regret, 3),
            -round(min(capture, 1.0), 2),
            round(summary.worst_regret, 3), -interval,
            round(summary.mean_regret, 3), abs(history - DEFAULTS[0]),
            abs(math.log(h / DEFAULTS[1])), abs(math.log(k / DEFAULTS[2])))


def _loses_to(incumbent):
    """A test that a candidate's score so far already ranks it below the
    incumbent's Summary, whatever its other traces give."""
    if incumbent is None or not (
            incumbent.worst_regret <= assess.GOAL_REGRET
            and incumbent.excess_switches == 0):
        return None
    floor = round(1.0 if incumbent.worst_capture is None
                  else min(incumbent.worst_capture, 1.0), 2)

    def stop(score):
        return (score.regret > assess.GOAL_REGRET or score.excess_switches
                or (score.phased and round(min(score.capture, 1.0), 2)
                    < floor))
    return stop


class Choice(collections.namedtuple('Choice', (
        'thresholds', 'interval_s', 'history', 'hysteresis', 'upper_factor',
        'summary'))):
    """What the search keeps: thresholds, the free factors, their score
    on the tuning traces."""


def search(hw, traces, interval_s=None):
    """Step 2: the best :class:`Choice` for ``hw`` over ``traces``.  A
    given ``interval_s`` is kept; otherwise it is searched too."""
    traces = list(traces)
    bench = assess.Bench(hw, traces)
    guard = hw.guard()
    intervals = INTERVALS if interval_s is None else (int(interval_s),)
    best = None
    for interval, history, h, k in itertools.product(
            intervals, HISTORIES, HYSTERESIS, UPPER_FACTORS):
        thresholds = derive(hw, history, interval, h, k)
        scores = bench.score(thresholds, history, interval,
                             stop=_loses_to(best and best[1].summary),
                             guard=guard)
        if len(scores) < len(traces):
            continue
        summary = assess.summarize(scores)
        key = _rank(summary, interval, history, h, k)
        if best is None or key < best[0]:
            best = (key, Choice(thresholds, interval, history, h, k,
                                summary))
    return best[1]


def calibrate(hw, traces, interval_s=None, generation=None):
    """Search the free factors; return (Profile, report dict)."""
    generation = generation_for(hw, generation)
    traces = list(traces)
    thresholds, interval, history, h, k, summary = search(hw, traces,
                                                          interval_s)
    pt_star, _ = break_even(hw)
    capture = ('' if summary.worst_capture is None else
               ', at least %.0f %% of the oracle\'s gain'
               % (summary.worst_capture * 100))
    source = ('nova-paging calibrate, hardware profile %s (modeled): '
              'break-even P-to-T %.4g; interval %d s, history %d, '
              'hysteresis %g, upper factor %g chosen over %d traces (worst '
              '%+.2f %%, mean %+.2f %% from the better static mode%s)'
              % (hw.name, pt_star, interval, history, h, k, len(traces),
                 summary.worst_regret * 100, summary.mean_regret * 100,
                 capture))
    profile = profiles.Profile(
        generation=generation, thresholds=thresholds,
        history_samples=history, interval_s=interval,
        provenance=profiles.Provenance(
            method='calibrated', source=source,
            obtained=datetime.date.today().isoformat(), hosts=0,
            samples=sum(len(t) for t in traces)),
        guard=hw.guard())
    report = {'hardware': hw.name, 'break_even_pt': pt_star,
              'interval_s': interval, 'history': history, 'hysteresis': h,
              'upper_factor': k, 'worst_regret': summary.worst_regret,
              'mean_regret': summary.mean_regret,
              'worst_capture': summary.worst_capture,
              'excess_switches': summary.excess_switches,
              'traces': len(traces)}
    return profile, report
