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

"""``nova-paging demo`` end to end: a simulated fleet with real agents
and a real Prometheus (Debian's package) running the shipped rules; every
dashboard panel's query returns data there; Ctrl-C stops everything, and
a second run beside the first does not collide with it."""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import psutil
import requests

from nova_adaptive_paging.telemetry import dashboards
from nova_adaptive_paging.telemetry import metrics
from tests.functional import prometheus

ROOT = os.path.join(os.path.dirname(__file__), '..', '..')


def start_demo(workdir, minutes):
    """The demo up and running: (process, Prometheus URL, its output so
    far); ``process.output`` keeps receiving the rest."""
    # PYTHONFAULTHANDLER: a demo that hangs on Ctrl-C is sent SIGABRT and
    # prints where each of its threads is.
    proc = subprocess.Popen(
        [sys.executable, '-W', 'ignore', '-m', 'nova_adaptive_paging.cmd.cli',
         'demo', '--minutes', str(minutes), '--workdir', str(workdir),
         '--keep-running'],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, PYTHONFAULTHANDLER='1'),
        # Ctrl-C as at a terminal: a test run started in the background
        # of a shell inherits SIGINT ignored, and Python then never
        # raises KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip('\n'))
        if line.startswith('running; Ctrl-C'):
            url = [x.split()[2] for x in lines
                   if x.startswith('Prometheus UI:')][0]
            # Keep reading, so that a demo that writes is never stuck on
            # a full pipe.
            proc.output = []
            proc.reader = threading.Thread(
                target=lambda: proc.output.extend(proc.stdout), daemon=True)
            proc.reader.start()
            return proc, url, lines
    proc.kill()
    raise AssertionError('the demo did not come up:\n' + '\n'.join(lines))


def kill_leftovers(workdir):
    """Every process whose command line names ``workdir``: a demo and its
    Prometheus, which runs in a session of its own."""
    for p in psutil.process_iter(['cmdline']):
        if any(str(workdir) in arg for arg in p.info['cmdline'] or ()):
            try:
                p.kill()
            except psutil.Error:
                pass


def stop_demo(proc, workdir):
    """Ctrl-C: the demo's exit code, or, if it did not stop within a
    minute, where its threads were and its last output; then it and what
    it started are killed, so that nothing of it slows the tests after
    this one."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        kill_leftovers(workdir)
        proc.wait()
        proc.reader.join(10)        # until the pipe's end
        return 'no exit within 60 s of Ctrl-C; its output after ' \
            '"running":\n' + ''.join(proc.output)[-6000:]


def query(url, expr):
    resp = requests.post(url + '/api/v1/query', data={'query': expr},
                         timeout=30).json()
    assert resp['status'] == 'success', (expr, resp)
    return resp['data']['result']


def fill(expr, **values):
    """The dashboard's template variables as Grafana fills them."""
    expr = expr.replace('$__rate_interval', '1m').replace('$__range', '5m')
    for name in ('generation', 'host', 'instance'):
        expr = expr.replace('$' + name, values.get(name, '.*'))
    assert '$' not in expr.replace('$1', ''), expr
    return expr


def test_the_demo_fills_every_dashboard_and_stops_cleanly(tmp_path):
    prometheus.binaries()
    proc, url, lines = start_demo(tmp_path / 'one', 1.5)
    second = None
    try:
        out = '\n'.join(lines)
        assert 'MODELED' in out
        # One table row per generation, and the profile it wrote.
        for generation in ('amd-zen3', 'intel-icelake-server',
                           'intel-skylake-server'):
            assert re.search(r'^%s +\d+ hosts, \d+ guests +\d of 6 changed'
                             % generation, out, re.M), out
            assert os.path.exists(tmp_path / 'one' / 'profiles' / (
                generation + '.yaml'))
        assert os.path.exists(tmp_path / 'one' / 'profiles' / 'report.html')
        docs = {}
        for path in sorted(glob.glob(os.path.join(
                ROOT, 'dashboards', 'grafana', '*.json'))):
            with open(path, encoding='utf-8') as f:
                doc = json.load(f)
            docs[doc['uid']] = doc
        assert len(docs) == 5
        # Every query with the variables at "All".
        for uid, doc in docs.items():
            for title, expr in dashboards.queries(doc):
                assert query(url, fill(expr)), (uid, title, fill(expr))
        # ... and with a concrete host and guest: a patched host and an
        # adaptive guest on it; the stock host for the advisory one.
        patched = query(url, '%s{switching="true"}' % metrics.HOST_INFO.name)
        stock = query(url, '%s{switching="false"}' % metrics.HOST_INFO.name)
        assert patched and stock
        host = patched[0]['metric']
        guests = query(url, '%s{instance="%s",policy="adaptive"}' % (
            metrics.GUEST_INFO.name, host['instance']))
        chosen = {
            'nova-paging-host': dict(generation=host['generation'],
                                     host=host['instance']),
            'nova-paging-guest': dict(
                generation=host['generation'], host=host['instance'],
                instance=guests[0]['metric'][metrics.GUEST_LABEL]),
            'nova-paging-advisory': dict(
                generation=stock[0]['metric']['generation'],
                host=stock[0]['metric']['instance']),
        }
        for uid, values in chosen.items():
            for title, expr in dashboards.queries(docs[uid]):
                assert query(url, fill(expr, **values)), (uid, title)
        # A second demo beside the first: its own ports and directory.
        second, url2, lines2 = start_demo(tmp_path / 'two', 0.5)
        assert url2 != url
        # Two hosts of each of 3 generations, a stock host in each pool.
        assert query(url, 'count(up)')[0]['value'][1] == '8'
        assert query(url2, 'count(up)')[0]['value'][1] == '8'
    finally:
        codes = [stop_demo(p, tmp_path / d)
                 for p, d in ((second, 'two'), (proc, 'one'))
                 if p is not None]
    assert codes == [0, 0], '\n'.join(map(str, codes))
    # Nothing is left running: both Prometheus servers are gone.
    for u in (url, url2):
        try:
            requests.get(u + '/-/ready', timeout=2)
        except requests.ConnectionError:
            continue
        raise AssertionError('%s still answers after Ctrl-C' % u)


def test_without_prometheus_the_demo_says_how_to_install_it(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))     # no prometheus there
    run = subprocess.run(
        [sys.executable, '-W', 'ignore', '-m', 'nova_adaptive_paging.cmd.cli',
         'demo', '--workdir', str(tmp_path / 'w')], env=env,
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and 'apt-get install prometheus' in lines[0], \
        run.stderr
