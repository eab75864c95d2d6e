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

"""The switching decision against the adversarial family (MODELED).

    python bench/bench_family.py [--count 10] [--seed 2011]

For the shipped hardware profiles and the first ``--count`` profiles of
the calibration sweep (nova_adaptive_paging.tuning.sweep, seeded), the
thresholds calibration chooses on the tuning traces are replayed on the
family of nova_adaptive_paging.costmodel.family (generated, seeded, plus
the shipped traces), and the worst case over the family is printed per
profile, without the switch guard (the paper's rule alone) and with it:
regret against the better static mode (goal <= 1 %), the least share of
the per-interval oracle's gain captured on phase-changing traces (goal
>= 90 %; also over those whose phases last two minutes or more), and the
most switches per hour on any trace, beside the cap the
guard derives from the switch's cost.  The trace each worst case comes
from is named.
"""

import argparse
import statistics

from nova_adaptive_paging import dsp
from nova_adaptive_paging.costmodel import family
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.tuning import assess
from nova_adaptive_paging.tuning import derivation
from nova_adaptive_paging.tuning import sweep


def long_phases(name):
    """Phases of two minutes or more: the shipped phase-changing traces,
    the ramp and the slowest alternations (not bursts of 1-3 s)."""
    if name.startswith('alt-'):
        return float(name[len('alt-'):-1]) >= 120
    return not name.startswith('burst-')


def per_hour(score, traces):
    seconds = sum(traces[score.trace].interval_s)
    return score.switches * 3600 / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--count', type=int, default=10)
    parser.add_argument('--seed', type=int, default=sweep.DEFAULT_SEED)
    parser.add_argument('--family-seed', type=int, default=family.SEED)
    args = parser.parse_args()
    members = family.family(args.family_seed)
    by_name = {t.name: t for t in members}
    hws = [hardware.resolve(n) for n in hardware.builtin_names()]
    hws += sweep.profiles(args.count, args.seed)
    tuning = derivation.tuning_traces()
    print('MODELED: %d traces (%d generated, seed %d), %d hardware '
          'profiles' % (len(members), len(members) - len(
              derivation.tuning_traces()) - len(derivation.held_out_traces()),
              args.family_seed, len(hws)))
    print('%-22s %-6s %-9s %-26s %-24s %-24s %-18s %s' % (
        'hardware', 'guard', 'interval', 'worst regret',
        'least capture (phased)', 'same, phases >= 2 min',
        'most switches/hour', 'cap/hour'))
    worst = {'off': [], 'on': []}
    for hw in hws:
        # The generation only names the profile; sweep profiles have none.
        profile, _ = derivation.calibrate(
            hw, tuning, generation=hw.generation or 'intel-nehalem')
        bench = assess.Bench(hw, members)
        for label, guard in (('off', None), ('on', profile.guard)):
            scores = bench.score(profile.thresholds, profile.history_samples,
                                 profile.interval_s, guard=guard)
            bad = max(scores, key=lambda s: s.regret)
            phased = [s for s in scores if s.phased]
            least = min(phased, key=lambda s: s.capture) if phased else None
            slow = [s for s in phased if long_phases(s.trace)]
            least_slow = min(slow, key=lambda s: s.capture)
            busiest = max(scores, key=lambda s: per_hour(s, by_name))
            worst[label].append(bad.regret)
            cap = ('%.0f' % (3600e9 * guard.budget_ppm / dsp.PPM
                             / guard.switch_ns + 2) if guard else '-')
            print('%-22s %-6s %3d s, h%d %+6.2f %% (%-14s) %s %4.0f %% '
                  '(%-16s) %5.0f (%-9s) %s' % (
                      hw.name[:22], label, profile.interval_s,
                      profile.history_samples, bad.regret * 100, bad.trace,
                      '%4.0f %% (%-16s)' % (least.capture * 100, least.trace)
                      if least else '%-24s' % '-',
                      least_slow.capture * 100, least_slow.trace,
                      per_hour(busiest, by_name), busiest.trace[:9], cap))
    for label in ('off', 'on'):
        print('guard %-3s: worst regret over all profiles %+.2f %%, median '
              '%+.2f %%; profiles within the 1 %% bound: %d of %d' % (
                  label, max(worst[label]) * 100,
                  statistics.median(worst[label]) * 100,
                  sum(1 for w in worst[label] if w <= assess.GOAL_REGRET),
                  len(worst[label])))


if __name__ == '__main__':
    main()
