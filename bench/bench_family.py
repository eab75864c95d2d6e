#!/usr/bin/env python3
"""The switching decision against the adversarial family (MODELED).

    python bench/bench_family.py [--count 10] [--seed 2011]

For the shipped hardware profiles and the first ``--count`` profiles of
the calibration sweep (nova_adaptive_paging.tuning.sweep, seeded), the
thresholds calibration chooses on the tuning traces are replayed on the
family of nova_adaptive_paging.costmodel.family (generated, seeded, plus
the shipped traces), and the worst case over the family is printed per
profile: regret against the better static mode (goal <= 1 %), the least
share of the per-interval oracle's gain captured on phase-changing
traces (goal >= 90 %), and the most switches per hour on any trace.
The trace each worst case comes from is named.
"""

import argparse
import statistics

from nova_adaptive_paging.costmodel import family
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.tuning import assess
from nova_adaptive_paging.tuning import calibrate
from nova_adaptive_paging.tuning import sweep


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
    tuning = calibrate.tuning_traces()
    print('MODELED: %d traces (%d generated, seed %d), %d hardware '
          'profiles' % (len(members), len(members) - len(
              calibrate.tuning_traces()) - len(calibrate.held_out_traces()),
              args.family_seed, len(hws)))
    print('%-22s %-9s %-26s %-24s %s' % (
        'hardware', 'interval', 'worst regret', 'least capture',
        'most switches/hour'))
    worst = []
    for hw in hws:
        # The generation only names the profile; sweep profiles have none.
        profile, _ = calibrate.calibrate(
            hw, tuning, generation=hw.generation or 'intel-nehalem')
        scores, summary = assess.assess(hw, profile, members)
        bad = max(scores, key=lambda s: s.regret)
        phased = [s for s in scores if s.phased]
        least = min(phased, key=lambda s: s.capture) if phased else None
        busiest = max(scores, key=lambda s: per_hour(s, by_name))
        worst.append(bad.regret)
        print('%-22s %3d s, h%d %+6.2f %% (%-14s) %s %5.0f (%s)' % (
            hw.name[:22], profile.interval_s, profile.history_samples,
            bad.regret * 100, bad.trace,
            '%4.0f %% (%-14s)' % (least.capture * 100, least.trace)
            if least else '%-24s' % '-',
            per_hour(busiest, by_name), busiest.trace))
    print('worst regret over all profiles: %+.2f %%, median %+.2f %%; '
          'profiles within the 1 %% bound: %d of %d' % (
              max(worst) * 100, statistics.median(worst) * 100,
              sum(1 for w in worst if w <= assess.GOAL_REGRET), len(worst)))


if __name__ == '__main__':
    main()
