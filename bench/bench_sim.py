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

"""Speed of the evaluator and CPU use of the simulated host.

    python bench/bench_sim.py [--runs 5] [--rows 200000] [--vms 200]
                              [--host-seconds 20]

Prints medians over ``--runs`` runs:

* evaluator: trace rows replayed per second by the adaptive policy
  (target >= 200,000 on a 2-core machine), on a synthetic trace of 1 s
  rows with phase changes, parsing excluded (and reported separately);
* sim-host: CPU time of the simulated host's timer (process_control,
  tick, status file) with ``--vms`` VMs at a 5 s interval in real time,
  as a share of one core (target < 2 %).  The FUSE server is idle here:
  it costs only what the agent reads.
"""

import argparse
import os
import resource
import statistics
import tempfile
import threading
import time

from nova_adaptive_paging.simhost import control as simcontrol
from nova_adaptive_paging import profiles
from nova_adaptive_paging.costmodel import evaluator
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.costmodel import traces


def synthetic(rows):
    kinds = [(30.0, 50), (1.0, 300000), (0.05, 10), (3.0, 8000)]
    out = []
    for i in range(rows):
        ftlb, fpf = kinds[(i // 97) % len(kinds)]
        out.append({'interval_s': 1, 'instructions': 2e9,
                    'tlb_misses': ftlb * 2e6,
                    'page_faults': fpf * 1e-7 * 2e6,
                    'working_set_mib': 1024})
    return traces.dumps(out)


def bench_evaluator(runs, rows):
    text = synthetic(rows)
    hw = hardware.resolve('nehalem')
    profile = profiles.builtin()
    parse, replay_rate = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        trace = traces.loads(text, 'bench.csv')
        t1 = time.perf_counter()
        replay = evaluator.Replay(trace, hw)
        replay.adaptive(profile.thresholds, profile.history_samples,
                        profile.interval_s)
        t2 = time.perf_counter()
        parse.append(rows / (t1 - t0))
        replay_rate.append(rows / (t2 - t1))
    return statistics.median(replay_rate), statistics.median(parse)


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def bench_host(runs, vms, seconds):
    shares = []
    names = sorted(traces.builtin())
    loaded = traces.builtin()
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, simcontrol.CONTROL_DIR))
            os.makedirs(os.path.join(root, '.sim'), exist_ok=True)
            host = simhost.SimHost(root, hardware.resolve('nehalem'),
                                   profiles.builtin(), speed=1.0)
            for i in range(vms):
                vm = host.start_vm(simhost.VmSpec(
                    'vm-%d' % i, loaded[names[i % len(names)]],
                    {'hw:paging': 'adaptive'}))
                vm.model.write('paging_policy', 'adaptive\n')
            stop = threading.Event()
            before, t0 = cpu_s(), time.monotonic()
            thread = threading.Thread(target=simcontrol.run_loop,
                                      args=(host, stop, seconds))
            thread.start()
            thread.join()
            shares.append((cpu_s() - before) / (time.monotonic() - t0))
            samples = sum(vm.model.stats['samples']
                          for vm in host.vms.values())
    return statistics.median(shares), samples


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--rows', type=int, default=200000)
    parser.add_argument('--vms', type=int, default=200)
    parser.add_argument('--host-seconds', type=float, default=20)
    args = parser.parse_args()
    rate, parse = bench_evaluator(args.runs, args.rows)
    print('evaluator (adaptive, %d rows, median of %d): %.0f rows/s '
          '(target >= 200000); parsing %.0f rows/s'
          % (args.rows, args.runs, rate, parse))
    share, samples = bench_host(args.runs, args.vms, args.host_seconds)
    print('sim-host (%d VMs, 5 s interval, %g s, median of %d): %.2f %% '
          'of one core (target < 2 %%); %d samples in the last run'
          % (args.vms, args.host_seconds, args.runs, share * 100, samples))


if __name__ == '__main__':
    main()
