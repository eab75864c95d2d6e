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

2. A small search over the free factors (history length, ``h``, ``k``)
   replays every given trace with :mod:`.evaluator` and keeps the
   candidate with the smallest worst-case distance from the better static
   mode, then the smallest mean (both to 0.1 %), then the one nearest
   the paper's choices (history 3) and the defaults (h 1.25, k 10).
"""

import datetime
import itertools
import math

from nova_adaptive_paging import cpu
from nova_adaptive_paging import dsp
from nova_adaptive_paging import exception
from nova_adaptive_paging import profiles
from nova_adaptive_paging.costmodel import evaluator
from nova_adaptive_paging.costmodel import traces as tracefiles

HISTORIES = (1, 2, 3, 4, 5)
HYSTERESIS = (1.1, 1.25, 1.5, 2.0)
UPPER_FACTORS = (3.0, 10.0, 30.0)
DEFAULTS = (3, 1.25, 10.0)


def _round(value):
    """Three significant digits, at most 3 decimals, in milli units."""
    if value <= 0:
        return 0
    digits = 3 - len(str(int(value))) if value >= 1 else 3
    return profiles.to_milli(max(round(value, min(3, max(0, digits))),
                                 0.001))


def break_even(hw):
    """(P-to-T* in paper units, seconds per TLB miss saved by shadow)."""
    dt = hw.cost_s('hap', 'tlb_miss') - hw.cost_s('shadow', 'tlb_miss')
    dp = hw.cost_s('shadow', 'page_fault') - hw.cost_s('hap', 'page_fault')
    if dt <= 0 or dp <= 0:
        raise ValueError('%s: the break-even analysis needs TLB misses to '
                         'cost more in HAP and page faults more in shadow '
                         'mode' % hw.name)
    return 1e7 * dt / dp, dt


def derive(hw, history, interval_s, hysteresis, upper_factor):
    """Thresholds from costs for fixed free factors (step 1)."""
    pt_star, dt = break_even(hw)
    ws = hw.reference_working_set_mib
    round_trip = hw.switch_s('shadow', ws) + hw.switch_s('hap', ws)
    tlb_lower = round_trip / (history * interval_s) * 1000 / (
        dt * hw.reference_ips)
    tlb_upper = tlb_lower * upper_factor
    values = dict(tlb_upper=_round(tlb_upper), tlb_lower=_round(tlb_lower),
                  pf_upper=_round(tlb_upper * pt_star),
                  pf_lower=_round(tlb_lower * pt_star),
                  pt_upper=_round(pt_star * hysteresis),
                  pt_lower=_round(pt_star / hysteresis))
    return dsp.Thresholds(**values)


def score(hw, thresholds, history, interval_s, traces):
    """(worst, mean) distance of adaptive from the better static mode."""
    regrets = []
    for trace in traces:
        replay = evaluator.Replay(trace, hw)
        best = min(replay.static(m)['time_s'] for m in (0, 1))
        got = replay.adaptive(thresholds, history, interval_s)['time_s']
        regrets.append(got / best - 1.0)
    return max(regrets), sum(regrets) / len(regrets)


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


def calibrate(hw, traces, interval_s=5, generation=None):
    """Search the free factors; return (Profile, report dict)."""
    generation = generation_for(hw, generation)
    traces = list(traces)
    best = None
    for history, h, k in itertools.product(HISTORIES, HYSTERESIS,
                                           UPPER_FACTORS):
        thresholds = derive(hw, history, interval_s, h, k)
        worst, mean = score(hw, thresholds, history, interval_s, traces)
        key = (round(worst, 3), round(mean, 3), abs(history - DEFAULTS[0]),
               abs(math.log(h / DEFAULTS[1])),
               abs(math.log(k / DEFAULTS[2])))
        if best is None or key < best[0]:
            best = (key, thresholds, history, h, k, worst, mean)
    _, thresholds, history, h, k, worst, mean = best
    pt_star, _ = break_even(hw)
    source = ('nova-paging calibrate, hardware profile %s (modeled): '
              'break-even P-to-T %.4g; history %d, hysteresis %g, upper '
              'factor %g chosen over %d traces (worst %+.2f %%, mean '
              '%+.2f %% from the better static mode)'
              % (hw.name, pt_star, history, h, k, len(traces),
                 worst * 100, mean * 100))
    profile = profiles.Profile(
        generation=generation, thresholds=thresholds,
        history_samples=history, interval_s=int(interval_s),
        provenance=profiles.Provenance(
            method='calibrated', source=source,
            obtained=datetime.date.today().isoformat(), hosts=0,
            samples=sum(len(t) for t in traces)))
    report = {'hardware': hw.name, 'break_even_pt': pt_star,
              'history': history, 'hysteresis': h, 'upper_factor': k,
              'worst_regret': worst, 'mean_regret': mean,
              'traces': len(traces)}
    return profile, report
