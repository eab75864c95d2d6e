#!/usr/bin/env python3
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

"""Calibration over a sweep of CPU generations, and its wall time.

    python bench/bench_derivation.py [--count 60] [--seed 2011] [--runs 5]
                                    [--interval S] [--verbose]

All figures are MODELED (cost model, shipped traces).  Prints:

* wall time of ``nova-paging calibrate``'s search for one generation
  over the shipped tuning traces (median of ``--runs``; target: a few
  seconds on a 2-core machine);
* for the shipped hardware profiles and ``--count`` sweep profiles
  (nova_adaptive_paging.tuning.sweep, seeded): thresholds searched on the
  tuning traces, judged on the held-out traces (derivation.TUNING_TRACES,
  HELD_OUT_TRACES): the distribution of the share of the per-interval
  oracle's gain captured on phase-changing traces (goal >= 90 %), of the
  regret against the better static mode (goal <= 1 %), the switches in
  excess of the oracle's on steady traces (goal 0), and how many
  profiles meet all three.  ``--interval`` fixes the sampling interval
  instead of searching it (5 s was the only choice before);
* with ``--cross N``, the cross-generation table (as ``nova-paging
  calibrate --compare`` prints it) over the shipped hardware profiles and
  the first N sweep profiles, the paper's Table 2 thresholds included.
"""

import argparse
import statistics
import time

from nova_adaptive_paging import profiles
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging.tuning import assess
from nova_adaptive_paging.tuning import derivation
from nova_adaptive_paging.tuning import sweep


def wall_time(runs, interval):
    hw = hardware.resolve('nehalem')
    tuning = derivation.tuning_traces()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        derivation.search(hw, tuning, interval)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), max(times)


def run_sweep(count, seed, interval, verbose):
    shipped = traces.builtin()
    tuning = [shipped[n] for n in derivation.TUNING_TRACES]
    held = [shipped[n] for n in derivation.HELD_OUT_TRACES]
    family = [hardware.resolve(n) for n in hardware.builtin_names()]
    family += sweep.profiles(count, seed)
    captures, regrets, excess, met = [], [], 0, 0
    for hw in family:
        choice = derivation.search(hw, tuning, interval)
        scores = assess.Bench(hw, held).score(
            choice.thresholds, choice.history, choice.interval_s)
        summary = assess.summarize(scores)
        captures += [s.capture for s in scores if s.phased]
        regrets += [s.regret for s in scores]
        excess += summary.excess_switches
        met += summary.meets_goal
        if verbose:
            print('  %-28s interval %2d s history %d: capture %s, worst '
                  'regret %+.2f %%' % (
                      hw.name, choice.interval_s, choice.history,
                      ' '.join('%s %.1f %%' % (s.trace, s.capture * 100)
                               for s in scores if s.phased) or '-',
                      summary.worst_regret * 100))
    return len(family), captures, regrets, excess, met


def cross(n):
    family = [hardware.resolve(name) for name in hardware.builtin_names()]
    family += sweep.profiles(n)
    tuning = derivation.tuning_traces()
    sources = []
    for hw in family:
        c = derivation.search(hw, tuning)
        sources.append((hw.name, profiles.Profile(
            hw.generation, c.thresholds, c.history, c.interval_s,
            profiles.Provenance('calibrated'))))
    sources.append(('paper Table 2', profiles.builtin()))
    table = assess.cross_table(family, sources, derivation.held_out_traces())
    print('cross-generation (MODELED): thresholds calibrated for the row\'s '
          'generation, run on the column\'s costs; worst capture, worst '
          'regret; * misses the goal')
    print('\n'.join(assess.format_table([hw.name for hw in family], table)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--count', type=int, default=sweep.DEFAULT_COUNT)
    parser.add_argument('--seed', type=int, default=sweep.DEFAULT_SEED)
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--interval', type=int)
    parser.add_argument('--verbose', action='store_true')
    parser.add_argument('--cross', type=int, metavar='N')
    args = parser.parse_args()
    if args.cross is not None:
        cross(args.cross)
        return

    med, lo, hi = wall_time(args.runs, args.interval)
    print('calibrate, one generation (nehalem), %d tuning traces: median '
          '%.2f s (min %.2f, max %.2f) over %d runs'
          % (len(derivation.TUNING_TRACES), med, lo, hi, args.runs))
    n, captures, regrets, excess, met = run_sweep(
        args.count, args.seed, args.interval, args.verbose)
    captures.sort()
    print('MODELED sweep: %d hardware profiles (shipped + %d drawn, seed '
          '%d), interval %s; judged on %d held-out traces'
          % (n, args.count, args.seed,
             args.interval or 'searched', len(derivation.HELD_OUT_TRACES)))
    print('  oracle gain captured on phase-changing traces (%d cases): '
          'median %.1f %%, 10th percentile %.1f %%, worst %.1f %% (goal '
          '>= %.0f %%)' % (
              len(captures), statistics.median(captures) * 100,
              captures[len(captures) // 10] * 100, captures[0] * 100,
              assess.GOAL_CAPTURE * 100))
    print('  regret vs the better static mode: median %+.2f %%, worst '
          '%+.2f %% (goal <= %+.0f %%)' % (
              statistics.median(regrets) * 100, max(regrets) * 100,
              assess.GOAL_REGRET * 100))
    print('  switches beyond the oracle\'s on steady traces: %d (goal 0)'
          % excess)
    print('  profiles meeting all three: %d of %d' % (met, n))


if __name__ == '__main__':
    main()
