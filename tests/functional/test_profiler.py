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

"""``nova-paging profile`` against a real Prometheus holding a simulated
fleet's telemetry: three CPU generations whose true costs (invented,
MODELED) are not those behind any shipped profile."""

import glob
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

from nova_adaptive_paging.costmodel import hardware as costhw
from nova_adaptive_paging.costmodel import traces as tracefiles
from nova_adaptive_paging import pmu_events
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging.telemetry import generation_aggregates
from nova_adaptive_paging.telemetry import prometheus_api
from nova_adaptive_paging.tuning import assess
from nova_adaptive_paging.tuning import profiler
from nova_adaptive_paging import vocabulary
from tests.functional import prometheus

MODELED_S = 1200
HOSTS = 2


@pytest.fixture(scope='module')
def telemetry(tmp_path_factory):
    prometheus.binaries()
    work = tmp_path_factory.mktemp('fleet')
    end = time.time() - 30
    source = work / 'fleet.om'
    # The agents' libvirt threads need a process without eventlet.
    subprocess.run([sys.executable, '-W', 'ignore', '-m',
                    'nova_adaptive_paging.simhost.scraped_fleet', str(source),
                    str(MODELED_S), str(end), str(HOSTS)], check=True,
                   timeout=600)
    server = prometheus.Server(str(work), source.read_text())
    try:
        yield server.url, end
    finally:
        server.stop()


def nova_paging(*args):
    return subprocess.run(
        [sys.executable, '-W', 'ignore', '-m',
         'nova_adaptive_paging.cmd.cli'] + list(args),
        capture_output=True, text=True, timeout=600)


def _extra(hw):
    hap, shadow = vocabulary.HAP, vocabulary.SHADOW
    return (hw.cost_s(shadow, 'page_fault') - hw.cost_s(hap, 'page_fault'),
            hw.cost_s(hap, 'tlb_miss') - hw.cost_s(shadow, 'tlb_miss'))


def test_the_profiler_recovers_the_costs_and_its_thresholds_fit(
        telemetry, tmp_path):
    url, end = telemetry
    out = tmp_path / 'out'
    run = nova_paging('profile', '--prometheus', url, '--range', '30m',
                      '--until', str(end), '--out', str(out))
    assert run.returncode == 0, run.stderr
    seen = generation_aggregates.read(prometheus_api.Client(url), '30m', end)
    shipped = list(tracefiles.builtin().values())
    for truth in simfleet.truths():
        key = truth.generation
        written = profiles.load(str(out / ('%s.yaml' % key)))
        assert written.generation == key
        assert written.provenance.method == 'profiled'
        assert written.provenance.hosts == HOSTS
        # The per-event costs, against the generation's true costs.
        result = profiler.profile_generation(seen[key], '30m', url)
        fault, miss = _extra(truth)
        assert result.costs.fault_s == pytest.approx(fault, rel=0.2), key
        if pmu_events.walk_events(key).counted:
            # Intel: two-dimensional walk cycles less the shadow tables'
            # (Skylake-SP's truth makes the latter cost something).
            assert result.costs.miss_s == pytest.approx(miss, rel=0.2), key
        else:
            # Zen 3 has no walk-cycle event: the shipped profile's cost
            # stays, and the output says why.
            assert result.costs.miss_s is None, key
            assert profiler.extra_miss_s(result.hardware) == \
                profiler.extra_miss_s(costhw.for_generation(key))
            assert ('%s: no page-walk-cycle event on %s' % (key, key)
                    in run.stdout), run.stdout
            assert 'no page-walk-cycle event' in written.provenance.source
        assert written.thresholds == result.profile.thresholds
        # The thresholds, replayed on every shipped trace under the true
        # costs: adaptive within 1 % of the better static mode.
        scores, summary = assess.assess(truth, written, shipped)
        assert summary.worst_regret <= assess.GOAL_REGRET, (key, summary)
        print('%s: fault %.3g us (true %.3g), miss %.3g ns (true %.3g); '
              'oracle-gain capture on phase-changing traces: median '
              '%.1f %%, worst %.1f %%; worst regret %+.2f %%' % (
                  key, result.costs.fault_s * 1e6, fault * 1e6,
                  profiler.extra_miss_s(result.hardware) * 1e9, miss * 1e9,
                  summary.median_capture * 100,
                  summary.worst_capture * 100, summary.worst_regret * 100))
        assert summary.median_capture >= 0.5, (key, summary)
    page = (out / 'report.html').read_text()
    for truth in simfleet.truths():
        for plot in ('ftlb', 'fpf', 'replay'):
            name = '%s-%s.png' % (truth.generation, plot)
            assert 'src="%s"' % name in page
            assert (out / name).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert 'MODELED' in page or 'modeled' in page


class _Failing(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = (b'{"status":"error","errorType":"bad_data",'
                b'"error":"parse error at char 1"}')
        self.send_response(400)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _bad(args, out):
    run = nova_paging('profile', '--out', str(out), *args)
    lines = run.stderr.strip().splitlines()
    assert run.returncode != 0
    assert 'Traceback' not in run.stderr
    assert not list(out.glob('*.yaml')) if out.exists() else True
    return run, lines


def test_bad_inputs_give_one_line_and_no_profile(telemetry, tmp_path):
    url, end = telemetry
    # Nothing listens there.
    run, lines = _bad(['--prometheus', 'http://127.0.0.1:%d'
                       % prometheus.free_port()], tmp_path / 'a')
    assert len(lines) == 1 and 'cannot reach it' in lines[0], lines
    # A PromQL endpoint that answers every query with an error.
    server = http.server.HTTPServer(('127.0.0.1', 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        run, lines = _bad(['--prometheus', 'http://127.0.0.1:%d'
                           % server.server_port], tmp_path / 'b')
    finally:
        server.shutdown()
        server.server_close()
    assert len(lines) == 1 and 'bad_data' in lines[0], lines
    # A range with no sample in it.
    run, lines = _bad(['--prometheus', url, '--range', '1m', '--until',
                       str(end + 3600)], tmp_path / 'c')
    assert len(lines) == 1 and 'no nova-paging host reported' in lines[0]
    # A generation the fleet does not have: reported, not guessed.
    run = nova_paging('profile', '--prometheus', url, '--range', '30m',
                      '--until', str(end), '--generation', 'intel-westmere',
                      '--out', str(tmp_path / 'd'))
    assert run.returncode == 1
    assert 'intel-westmere' in run.stdout and 'no profile' in run.stdout
    assert not list((tmp_path / 'd').glob('*.yaml'))
    # A generation with too few samples for an estimate: the same.
    assert profiler.estimate(
        generation_aggregates.Generation('amd-zen3')).startswith('0 ')
    assert os.path.exists(tmp_path / 'd' / 'report.html')


def browser():
    for name in ('chromium', 'chromium-browser'):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get('NAP_REQUIRE_BROWSER'):
        pytest.fail('chromium is missing: apt-get install chromium')
    pytest.skip('Debian\'s chromium is not installed')


def test_the_report_renders_every_plot_in_a_browser(telemetry, tmp_path):
    chromium = browser()
    url, end = telemetry
    out = tmp_path / 'out'
    run = nova_paging('profile', '--prometheus', url, '--range', '30m',
                      '--until', str(end), '--out', str(out))
    assert run.returncode == 0, run.stderr
    page = 'file://%s' % (out / 'report.html')
    common = [chromium, '--headless', '--no-sandbox', '--disable-gpu',
              '--virtual-time-budget=10000',
              '--user-data-dir=%s' % (tmp_path / 'profile')]
    dom = subprocess.run(common + ['--dump-dom', page], capture_output=True,
                         text=True, timeout=120).stdout
    images = re.findall(r'<img [^>]*>', dom)
    assert len(images) == 3 * len(glob.glob(str(out / '*.yaml'))) == 9
    assert all('data-rendered="yes"' in img for img in images), images
    # A screenshot to look at (kept under the test's tmp directory).
    subprocess.run(common + ['--window-size=1000,4000',
                             '--screenshot=%s' % (tmp_path / 'report.png'),
                             page], capture_output=True, timeout=120)
    print('report screenshot: %s' % (tmp_path / 'report.png'))
