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

"""The compute-node agent with many guests: CPU, memory, scrape time.

    python bench/bench_agent.py [--vms 200] [--runs 20] [--seconds 60]
        [--during-pass 200,1000]

Prints medians (targets from the agent's issue, on a 2-core machine):

* in process, against the simulated host's interface model and the
  libvirt test driver: CPU time of one ``sample()`` pass per guest
  (target < 100 us), of one steady ``reconcile()`` per guest, and of one
  scrape of ``/metrics`` rendered for all guests (target < 50 ms);
* during a full pass: the time of an HTTP scrape of ``/metrics`` while
  the agent reconciles N guests that all appeared at once (target:
  < 50 ms at 200 guests; a scrape must not wait for the pass);
* as a service: ``nova-paging-agent`` (5 s interval) run against
  ``nova-paging sim-host --vms N`` served over FUSE (needs root and
  /dev/fuse) for ``--seconds``: its resident memory (target < 80 MiB),
  its CPU as a share of one core, and the time of an HTTP scrape.

Every figure includes the interface's cost as the simulated host serves
it (the model in process; FUSE as a service), not a kernel's: MODELED.
"""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from oslo_config import cfg
import prometheus_client

from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.agent import service
from nova_adaptive_paging.agent import web
from nova_adaptive_paging.conf import adaptive_paging as ap_conf
from nova_adaptive_paging.conf import agent as agent_conf
from nova_adaptive_paging.conf import nova as nova_conf
from nova_adaptive_paging.conf import placement as placement_conf
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging import vocabulary


def make_conf(root, uri):
    conf = cfg.ConfigOpts()
    for module in (ap_conf, agent_conf, nova_conf, placement_conf):
        module.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override('host_root', root, 'adaptive_paging')
    conf.set_override('libvirt_uri', uri, 'adaptive_paging')
    conf.set_override('profile_dirs', [], 'adaptive_paging')
    return conf


class Clock:
    ns = 0

    def __call__(self):
        return self.ns


def cpu_per_call(fn, runs):
    out = []
    for _ in range(runs):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return statistics.median(out)


def in_process(vms, runs):
    root = tempfile.mkdtemp(prefix='bench-agent-')
    try:
        _in_process(root, vms, runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def every_guest(text, vms):
    """Fail unless a scrape holds one guest_info series per guest."""
    found = text.count('nova_paging_guest_info{')
    if found != vms:
        raise SystemExit('a scrape holds %d of %d guests' % (found, vms))
    return found


def _in_process(root, vms, runs):
    clock = Clock()
    sim = simhost.SimHost(root, hardware.resolve('nehalem'),
                          profiles.builtin(), clock=clock)
    shipped = list(traces.builtin().values())
    policies = vocabulary.POLICIES
    for i in range(vms):
        sim.start_vm(simhost.VmSpec(
            'instance-%08x' % (i + 1), shipped[i % len(shipped)],
            {'hw:paging': policies[i % len(policies)]}))
    agent = service.Agent(make_conf(root, sim.libvirt_uri), 'amd-zen3',
                          transport=sim.model, clock=sim.now_s)
    t0 = time.process_time()
    agent.reconcile()
    first = time.process_time() - t0

    def step():
        clock.ns += 5 * 10 ** 9
        sim.tick()
    sample = []
    for _ in range(runs):
        step()
        t0 = time.process_time()
        agent.sample()
        sample.append(time.process_time() - t0)
    reconcile = cpu_per_call(agent.reconcile, max(3, runs // 4))
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    scrape = []
    for _ in range(runs):
        t0 = time.perf_counter()
        text = prometheus_client.generate_latest(registry)
        scrape.append(time.perf_counter() - t0)
    print('in process, %d guests (interface: the model, MODELED):' % vms)
    print('  sample(): %.1f us CPU per guest (median of %d; target < 100)'
          % (statistics.median(sample) / vms * 1e6, runs))
    print('  reconcile(): first %.0f us, steady %.0f us CPU per guest'
          % (first / vms * 1e6, reconcile / vms * 1e6))
    print('  /metrics rendered: %.1f ms (median of %d; target < 50), '
          '%d bytes, %d of %d guests' % (
              statistics.median(scrape) * 1e3, runs, len(text),
              every_guest(text.decode(), vms), vms))


def during_pass(vms):
    """Median and longest HTTP scrape while one reconcile pass brings
    ``vms`` guests that appeared at once to their policies."""
    root = tempfile.mkdtemp(prefix='bench-agent-pass-')
    try:
        return _during_pass(root, vms)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _during_pass(root, vms):
    sim = simhost.SimHost(root, hardware.resolve('nehalem'),
                          profiles.builtin(), clock=Clock())
    agent = service.Agent(make_conf(root, sim.libvirt_uri), 'amd-zen3',
                          transport=sim.model, clock=sim.now_s)
    shipped = list(traces.builtin().values())
    policies = vocabulary.POLICIES

    def start(i):
        sim.start_vm(simhost.VmSpec(
            'instance-%08x' % (i + 1), shipped[i % len(shipped)],
            {'hw:paging': policies[i % len(policies)]}))
    start(0)
    agent.reconcile()                   # running, with one guest
    agent.sample()
    registry = prometheus_client.CollectorRegistry()
    metrics = collector.Collector(agent)
    registry.register(metrics)
    # As nova-paging-agent serves it (render: where this version has it).
    render = getattr(metrics, 'render', None)
    agent.render_metrics = True
    server, _ = web.serve(registry, '127.0.0.1', 0, timeout=60.0,
                          **({'render': render} if render else {}))
    url = 'http://127.0.0.1:%d/metrics' % server.server_port
    for i in range(1, vms):
        start(i)
    # The test driver reads its guests when a connection opens: the
    # pass's new connection sees them all at once.
    agent.domains.close()
    done = threading.Event()

    def full_pass():
        agent.reconcile()
        agent.sample()
        done.set()
    scrapes = []
    t0 = time.perf_counter()
    worker = threading.Thread(target=full_pass)
    worker.start()
    try:
        # Every scrape that starts before the pass ends counts, however
        # long it then takes.
        while not done.is_set():
            t1 = time.perf_counter()
            with urllib.request.urlopen(url, timeout=120) as resp:
                resp.read()
            scrapes.append(time.perf_counter() - t1)
            time.sleep(0.01)
        worker.join()
        seconds = time.perf_counter() - t0
    finally:
        server.shutdown()
        server.server_close()
        agent.domains.close()
    return seconds, scrapes


def report_during_pass(counts):
    for vms in counts:
        seconds, scrapes = during_pass(vms)
        print('during a full pass over %d new guests (%.1f s, MODELED '
              'interface): HTTP scrape %.1f ms median, %.1f ms longest '
              '(%d scrapes; target < 50 at 200 guests)' % (
                  vms, seconds, statistics.median(scrapes) * 1e3,
                  max(scrapes) * 1e3, len(scrapes)))


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _proc(pid):
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    ticks = os.sysconf('SC_CLK_TCK')
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    with open('/proc/%d/status' % pid) as f:
        rss = [int(line.split()[1]) for line in f
               if line.startswith('VmRSS:')][0]
    return cpu, rss / 1024


def as_service(vms, seconds, runs):
    if os.geteuid() != 0 or not os.path.exists('/dev/fuse'):
        print('as a service: skipped (needs root and /dev/fuse)')
        return
    work = tempfile.mkdtemp(prefix='bench-agent-svc-')
    root = os.path.join(work, 'node')
    sim = subprocess.Popen(
        [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli', 'sim-host',
         '--root', root, '--vms', str(vms), '--duration',
         str(seconds + 120)], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    debugfs = os.path.join(root, 'sys/kernel/debug/kvm')
    agent = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if os.path.isdir(debugfs) and len(os.listdir(debugfs)) == vms:
                break
            time.sleep(0.2)
        port = _free_port()
        conf = os.path.join(work, 'agent.conf')
        with open(conf, 'w') as f:
            f.write('[adaptive_paging]\nhost_root = %s\nlibvirt_uri = '
                    'test://%s\ncpu_generation = amd-zen3\nprofile_dirs =\n'
                    '[agent]\nlisten_port = %d\n' % (
                        root, os.path.join(root, simhost.NODE_XML), port))
        agent = subprocess.Popen(
            [sys.executable, '-m', 'nova_adaptive_paging.cmd.agent',
             '--config-file', conf], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        time.sleep(10)                  # start-up and the first reconcile
        cpu0, _ = _proc(agent.pid)
        t0 = time.monotonic()
        time.sleep(seconds)
        cpu1, rss = _proc(agent.pid)
        share = (cpu1 - cpu0) / (time.monotonic() - t0)
        scrape = []
        for _ in range(runs):
            t0 = time.perf_counter()
            with urllib.request.urlopen('http://127.0.0.1:%d/metrics'
                                        % port, timeout=30) as resp:
                text = resp.read().decode()
            scrape.append(time.perf_counter() - t0)
        every_guest(text, vms)
        print('as a service, %d guests over FUSE for %d s (MODELED '
              'interface):' % (vms, seconds))
        print('  resident memory %.1f MiB (target < 80)' % rss)
        print('  CPU %.2f %% of one core (%.1f us per guest per 5 s '
              'interval)' % (share * 100, share * 5 / vms * 1e6))
        print('  HTTP scrape of /metrics: %.1f ms (median of %d)'
              % (statistics.median(scrape) * 1e3, runs))
    finally:
        for proc in (agent, sim):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--vms', type=int, default=200)
    parser.add_argument('--runs', type=int, default=20)
    parser.add_argument('--seconds', type=int, default=60)
    parser.add_argument('--during-pass', default='200,1000',
                        help='guest counts of the scrape-during-a-pass '
                             'figures (comma-separated; empty: none)')
    parser.add_argument('--only-during-pass', action='store_true')
    args = parser.parse_args()
    counts = [int(n) for n in args.during_pass.split(',') if n]
    if args.only_during_pass:
        report_during_pass(counts)
        return
    in_process(args.vms, args.runs)
    report_during_pass(counts)
    as_service(args.vms, args.seconds, args.runs)


if __name__ == '__main__':
    main()
