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

"""The profiler against a large fleet's telemetry in a real Prometheus.

Backfills a Prometheus (``promtool tsdb create-blocks-from openmetrics``)
with series shaped like ``--hosts`` hosts of three CPU generations, each
with ``--guests`` guests, scraped every ``--step`` seconds over ``--hours``
(at least a million samples by default), then times ``nova-paging
profile`` for one generation and for all, ``--runs`` times each, and
prints medians.  The counters grow at each generation's invented rates
(overhead = events x the generation's per-event cost), so the recovered
costs are printed too.  Target: all generations in under 60 s on a
2-core machine.

    python bench/bench_profiler.py [--hosts 1000] [--guests 10]
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from nova_adaptive_paging.telemetry import metrics as M  # noqa: E402
from nova_adaptive_paging.telemetry import queries as Q  # noqa: E402
from nova_adaptive_paging.telemetry import prometheus_api  # noqa: E402
from nova_adaptive_paging.tuning import profiler  # noqa: E402
from nova_adaptive_paging.simhost import prometheus  # noqa: E402

# generation -> (fault cost s, miss cost s, switch cost s): invented.
GENERATIONS = {'amd-zen3': (6e-6, 5e-9, 3e-3),
               'intel-icelake-server': (7e-6, 3e-9, 4e-3),
               'intel-skylake-server': (12e-6, 4.5e-9, 6e-3)}
THRESHOLDS = {'tlb_upper': 10, 'tlb_lower': 0.1, 'pf_upper': 5000,
              'pf_lower': 100, 'pt_upper': 200, 'pt_lower': 150}


def series(args, end):
    """{name: [line, ...]} of OpenMetrics samples."""
    out = {}
    steps = int(args.hours * 3600 / args.step)
    start = end - (steps - 1) * args.step

    def add(metric_name, labels, values):
        body = ','.join('%s="%s"' % kv for kv in sorted(labels.items()))
        lines = out.setdefault(metric_name, [])
        for i, v in enumerate(values):
            lines.append('%s{%s} %r %d' % (metric_name, body, v,
                                           start + i * args.step))
    gens = list(GENERATIONS)
    for h in range(args.hosts):
        gen = gens[h % len(gens)]
        fault, miss, switch = GENERATIONS[gen]
        host = {'job': Q.AGENT_JOB, Q.HOST: 'host%05d:9118' % h}
        ones = [1.0] * steps
        add(M.HOST_INFO.name, dict(host, generation=gen, abi_version='1',
                                   switching='true'), ones)
        add(M.PROFILE_INFO.name, dict(host, generation='intel-nehalem',
                                      method='paper', obtained='2011-03',
                                      file='builtin', history='3',
                                      interval_s='5'), ones)
        for name, value in THRESHOLDS.items():
            add(M.PROFILE_THRESHOLD.name, dict(host, threshold=name),
                [float(value)] * steps)
        g = args.guests
        # Per host and step: sampled events per mode.
        per_step = {('shadow', 'page_faults'): 2000.0 * g,
                    ('hap', 'tlb_misses'): 2e6 * g,
                    ('hap', 'instructions'): 5e9 * g,
                    ('shadow', 'instructions'): 5e9 * g,
                    ('hap', 'page_faults'): 500.0 * g,
                    ('shadow', 'tlb_misses'): 1e6 * g}
        for (mode, event), rate in per_step.items():
            add(M.SAMPLED_EVENTS.name, dict(host, mode=mode, event=event),
                [rate * i for i in range(steps)])
        for metric in (M.SAMPLED_FTLB, M.SAMPLED_FPF):
            bounds = (M.FTLB_BUCKETS if metric is M.SAMPLED_FTLB
                      else M.FPF_BUCKETS)
            for mode in ('hap', 'shadow'):
                for k, le in enumerate(bounds + (float('inf'),)):
                    add(metric.name + '_bucket', dict(
                        host, mode=mode, le='+Inf' if le == float('inf')
                        else repr(float(le))),
                        [float(i * (k + 1)) for i in range(steps)])
        for j in range(g):
            guest = dict(host, uuid='g%05d-%02d' % (h, j))
            add(M.GUEST_INFO.name, dict(guest, domain='instance-%d' % j,
                                        flavor='m1.adaptive', project='p',
                                        policy='adaptive', source='flavor'),
                ones)
            add(M.SHADOW_MAINTENANCE_SECONDS.name, guest,
                [2000.0 * fault * i for i in range(steps)])
            add(M.HAP_WALK_SECONDS.name, guest,
                [2e6 * miss * i for i in range(steps)])
            add(M.SWITCHES.name, dict(guest, to='shadow'),
                [float(i // 4) for i in range(steps)])
            add(M.SWITCHING_SECONDS.name, guest,
                [switch * (i // 4) for i in range(steps)])
            add(M.SAMPLES.name, guest,
                [float(i * args.step // 5) for i in range(steps)])
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--guests', type=int, default=10)
    parser.add_argument('--hours', type=float, default=2)
    parser.add_argument('--step', type=int, default=600)
    parser.add_argument('--runs', type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix='bench-profiler-')
    server = None
    try:
        end = int(time.time()) - 60
        t0 = time.monotonic()
        data = series(args, end)
        text = ''.join('# TYPE %s unknown\n%s\n' % (n, '\n'.join(lines))
                       for n, lines in sorted(data.items())) + '# EOF\n'
        samples = sum(len(v) for v in data.values())
        n_series = sum(len(v) for v in data.values()) // int(
            args.hours * 3600 / args.step)
        t1 = time.monotonic()
        server = prometheus.Server(work, openmetrics=text)
        t2 = time.monotonic()
        print('fleet: %d hosts x %d guests, 3 generations; %d series, %d '
              'samples (generated in %.1f s, backfilled and loaded in '
              '%.1f s)' % (args.hosts, args.guests, n_series, samples,
                           t1 - t0, t2 - t1))
        window = '%dm' % int(args.hours * 60 + 10)
        client = prometheus_api.Client(server.url, timeout=300)
        for label, gens in (('one generation', ['amd-zen3']),
                            ('all generations', [])):
            times = []
            for _ in range(args.runs):
                t = time.monotonic()
                results = profiler.profile_fleet(client, window, end,
                                                 server.url, gens)
                times.append(time.monotonic() - t)
            print('profile, %s: median %.2f s over %d runs (min %.2f, max '
                  '%.2f)' % (label, statistics.median(times), args.runs,
                             min(times), max(times)))
        for r in results:
            true = GENERATIONS[r.generation]
            print('  %s: fault %.3g us (true %.3g), miss %.3g ns (true '
                  '%.3g), switch %.3g ms (true %.3g)' % (
                      r.generation, r.costs.fault_s * 1e6, true[0] * 1e6,
                      r.costs.miss_s * 1e9, true[1] * 1e9,
                      r.costs.switch_s * 1e3, true[2] * 1e3))
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
