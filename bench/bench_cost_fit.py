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

"""How well and how fast the calibration recovers per-event costs.

Builds the calibration microbenchmarks, starts a simulated host (FUSE)
of each fleet generation (simhost/data/fleet: invented true costs), and
``--runs`` times runs ``nova-paging calibration measure`` on each with
the modeled calibration guest (simhost.guest_bench: native benchmark
runs plus the simulated mode's costs), then ``calibration fit``.
Prints, per generation, the median and worst relative error of the
per-fault and per-miss costs, and the median time of one measurement.
The error is this machine's noise on the native runs: the shadow-hap
difference per TLB miss is a few ns over ~7-40 ns a native access.

    python bench/bench_cost_fit.py [--runs 5] [--repeats 3]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from nova_adaptive_paging.abi import spec  # noqa: E402
from nova_adaptive_paging.costmodel import hardware as costhw  # noqa: E402
from nova_adaptive_paging.tuning import cost_fit  # noqa: E402

REPO = os.path.join(os.path.dirname(__file__), '..')
FLEET = os.path.join(REPO, 'nova_adaptive_paging', 'simhost', 'data',
                     'fleet')
BENCH = os.path.join(REPO, 'ansible', 'roles', 'calibrate', 'files')
CLI = [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli']


def start_host(root, hardware):
    sim = subprocess.Popen(CLI + ['sim-host', '--root', root, '--hardware',
                                  hardware, '--vms', '1', '--paging', 'none',
                                  '--duration', '7200'],
                           stdout=subprocess.DEVNULL)
    debugfs = os.path.join(root, spec.DEBUGFS_DIR)
    while not (os.path.isdir(debugfs) and os.listdir(debugfs)):
        time.sleep(0.1)
    return sim


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--tlb-args', default='--pages 2048')
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix='nap-bench-calibration-')
    bindir = os.path.join(work, 'bin')
    shutil.copytree(BENCH, bindir)
    subprocess.run(['make', '-s', '-C', bindir], check=True)
    sims = []
    try:
        for name in sorted(os.listdir(FLEET)):
            hardware = os.path.join(FLEET, name)
            hw = costhw.resolve(hardware)
            root = os.path.join(work, name[:-5])
            sims.append(start_host(root, hardware))
            domain = 'instance-00000001'
            errors = {'fault': [], 'miss': []}
            seconds = []
            for run in range(args.runs):
                out = os.path.join(work, '%s-%d.json' % (name, run))
                t0 = time.monotonic()
                subprocess.run(CLI + [
                    'calibration', 'measure', '--root', root, '--domain',
                    domain, '--bin-dir', bindir, '--repeats',
                    str(args.repeats), '--tlb-args', args.tlb_args,
                    '--out', out, '--exec', ' '.join([
                        sys.executable, '-m',
                        'nova_adaptive_paging.simhost.guest_bench',
                        '--root', root, '--domain', domain, '--hardware',
                        hardware, '--'])],
                    check=True, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
                seconds.append(time.monotonic() - t0)
                with open(out) as f:
                    fitted = cost_fit.fit([(out, json.load(f))])
                    costs = fitted[hw.generation][2]
                errors['fault'].append(
                    costs.fault_s * 1e9
                    / hw.event_cost_ns['shadow']['page_fault'] - 1)
                errors['miss'].append(
                    costs.miss_s * 1e9 / hw.event_cost_ns['hap']['tlb_miss']
                    - 1)
            print('%-22s fault error median %+5.1f %% worst %+5.1f %%; miss '
                  'error median %+5.1f %% worst %+5.1f %%; measure %.1f s '
                  '(median of %d)' % (
                      hw.generation,
                      statistics.median(errors['fault']) * 100,
                      max(errors['fault'], key=abs) * 100,
                      statistics.median(errors['miss']) * 100,
                      max(errors['miss'], key=abs) * 100,
                      statistics.median(seconds), args.runs))
    finally:
        for sim in sims:
            sim.send_signal(signal.SIGTERM)
            sim.wait(30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
