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

"""The agent's /metrics: what the kernel reports, the histograms of the
samples with data, a failing collector's neighbours, TLS and basic auth,
the web configuration's errors, the per-event costs' denominators."""

import base64
import ssl
import sys
import urllib.error
import urllib.request

import bcrypt
import prometheus_client
from prometheus_client import parser
import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.agent import web
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import vocabulary
from tests.unit.agent_support import GENERATION
from tests.unit.agent_support import _scrape
from tests.unit.agent_support import self_signed
from tests.unit.agent_support import _value
from tests.unit.agent_support import agent_for
from tests.unit.agent_support import run
from tests.unit.agent_support import start

if 'eventlet.patcher' in sys.modules and \
        sys.modules['eventlet.patcher'].is_monkey_patched('thread'):
    raise RuntimeError('%s needs real threads: run it in a pytest process '
                       'of its own, as tox.ini does' % __name__)


def test_metrics_over_http_carry_what_the_kernel_reports(sim):
    # The agent, not the simulated host, feeds this guest's fault count.
    start(sim, 'a', {'hw:paging': 'adaptive'}, flavor='m1.adaptive',
          guest_faults=False, balloon=True)
    start(sim, 'b', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.reconcile()
    for _ in range(120):                # 2 minutes of modeled time
        run(sim, 1)
        agent.sample()
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    server, thread = prometheus_client.start_http_server(
        0, '127.0.0.1', registry)
    try:
        fams = _scrape(server.server_port)
        a = sim.model.vms[sim.vms['a'].dirname]
        stats = spec.parse_stats(a.read(spec.FILE_STATS))
        uuid = sim.vms['a'].spec.uuid
        assert stats['switches_to_shadow'] >= 1
        for mode in vocabulary.MODES:
            assert _value(fams, metrics.SWITCHES, uuid=uuid, to=mode) \
                == stats['switches_to_%s' % mode]
            assert _value(fams, metrics.GUEST_MODE, uuid=uuid,
                          mode=mode) == float(stats['mode'] == mode)
        assert _value(fams, metrics.MODE_SECONDS, uuid=uuid,
                      mode='shadow') == pytest.approx(
            stats['time_shadow_ns'] / 1e9, rel=0.05)
        assert _value(fams, metrics.GUEST_INFO, uuid=uuid,
                      flavor='m1.adaptive', policy='adaptive',
                      source='flavor', domain='a') == 1
        assert _value(fams, metrics.LAST_FTLB, uuid=uuid) == \
            pytest.approx(stats['last_ftlb'] / 1000)
        # The guest's trace writes CR3 and its last sample was in shadow
        # mode, where every load exits: the loads the guard priced.
        assert stats['mode'] == 'shadow' and stats['last_cr3_loads'] > 0
        assert _value(fams, metrics.LAST_CR3_LOADS, uuid=uuid) == \
            stats['last_cr3_loads']
        assert _value(fams, metrics.HOST_INFO, generation=GENERATION,
                      abi_version=str(spec.ABI_VERSION),
                      switching='true') == 1
        assert _value(fams, metrics.GUESTS, policy='shadow') == 1
        for part in ('guests', 'host', 'agent'):
            assert _value(fams, metrics.SCRAPE_SUCCESS,
                          collector=part) == 1
        # The agent read the stats every second, more often than the
        # kernel samples (every 5 s): every sample with data is in the
        # histograms.  Only the adaptive guest's have data (both guests'
        # faults are fed, but the kernel counts instructions and TLB
        # misses only for adaptive VMs), from its second on: its counters
        # opened at the first (interface document, section 5).
        seen = sum(s.value for s in fams[metrics.SAMPLED_FTLB.name].samples
                   if s.name.endswith('_count'))
        b = spec.parse_stats(sim.model.vms[sim.vms['b'].dirname].read(
            spec.FILE_STATS))
        assert stats['samples'] == b['samples'] == 120 // 5
        assert (stats['pmu'], b['pmu']) == (1, 0)
        assert seen == stats['samples'] - 1
        # Every family the agent exports on a patched host is there.
        advisory = {metrics.ADVISED_MODE.name,
                    metrics.MODELED_GAIN_SECONDS.name,
                    metrics.MODELED_OTHER_MODE_GAIN.name,
                    metrics.ADVISED_SECONDS.name,
                    metrics.HOST_PAGING_MODE.name}
        # ... but nova-scheduler's, which node_exporter serves.
        elsewhere = {metrics.SCHEDULER_REQUEST_FILTER.name}
        for m in metrics.ALL:
            if m.name in advisory | elsewhere:
                continue
            name = m.name[:-len('_total')] if m.kind == metrics.COUNTER \
                else m.name
            assert name in fams, m.name
        # The series counts doc/source/agent.rst gives an operator.
        per_guest = [s for f in fams.values() for s in f.samples
                     if s.labels.get('uuid') == uuid]
        per_host = [s for f in fams.values() for s in f.samples
                    if 'uuid' not in s.labels]
        # (18, two for an adaptive guest, one as its flavor asks a
        # policy: guest_policy_not_honoured)
        assert (len(per_guest), len(per_host)) == (21, 91)
        assert _value(fams, metrics.GUEST_POLICY_NOT_HONOURED, uuid=uuid,
                      policy='adaptive') == 0
        # The fallback profile was obtained in March 2011 (its first day,
        # 2011-03-01T00:00:00Z).
        assert _value(fams, metrics.PROFILE_OBTAINED) == 1298937600
        # ... and its thresholds are the paper's Table 2.
        assert _value(fams, metrics.PROFILE_THRESHOLD,
                      threshold='pf_upper') == 5000
        assert _value(fams, metrics.PROFILE_THRESHOLD,
                      threshold='tlb_lower') == 0.1
        # A guest that leaves has no series once a pass saw it go (its
        # lifecycle event starts one at once).
        sim.stop_vm('a')
        agent.reconcile()
        fams = _scrape(server.server_port)
        assert not [s for s in fams[metrics.GUEST_MODE.name].samples
                    if s.labels['uuid'] == uuid]
    finally:
        server.shutdown()
        server.server_close()


def test_samples_without_data_stay_out_of_the_histograms(sim):
    """A guest under hap whose faults nobody feeds (the agent feeds only
    adaptive guests) has no page-fault source in hap mode: each of its
    kernel samples is "no data", reported as zeros, and must not count
    as an FTLB or FPF of 0.  On a host that counts every guest, a shadow
    guest's samples (the simulated host writes its faults) have data
    from the second on (its counters open at the first)."""
    start(sim, 'p', {'hw:paging': 'hap'}, guest_faults=False)
    start(sim, 's', {'hw:paging': 'shadow'})
    agent = agent_for(sim, count_all=True)
    agent.reconcile()
    for _ in range(60):
        run(sim, 1)
        agent.sample()
    p, s = (spec.parse_stats(sim.model.vms[sim.vms[n].dirname].read(
        spec.FILE_STATS)) for n in ('p', 's'))
    assert (p['mode'], p['pf_source'], p['pmu']) == ('hap', 'none', 1)
    assert p['samples'] == s['samples'] == 60 // 5
    for hist in (agent.ftlb, agent.fpf):
        assert sum(hist.counts['hap']) == 0
        assert sum(hist.counts['shadow']) == s['samples'] - 1
    # Their events still add up: the TLB misses of p's hap intervals.
    assert agent.events.counts['hap']['tlb_miss'] > 0


def test_a_failing_collector_leaves_the_others_series(sim):
    start(sim, 'a', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.reconcile()
    agent.thresholds = None             # breaks the host part only
    agent.publish()
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    fams = {f.name: f for f in parser.text_string_to_metric_families(
        prometheus_client.generate_latest(registry).decode())}
    assert _value(fams, metrics.SCRAPE_SUCCESS, collector='host') == 0
    assert _value(fams, metrics.SCRAPE_SUCCESS, collector='guests') == 1
    assert metrics.HOST_INFO.name not in fams
    assert _value(fams, metrics.GUEST_MODE, mode='shadow') == 1


def test_metrics_behind_tls_and_basic_auth(sim, tmp_path):
    start(sim, 'a', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.reconcile()
    key, crt = self_signed(tmp_path)
    hashed = bcrypt.hashpw(b'scrape-me', bcrypt.gensalt(rounds=4)).decode()
    config = tmp_path / 'web.yml'
    config.write_text('tls_server_config:\n  cert_file: %s\n  key_file: %s\n'
                      'basic_auth_users:\n  prometheus: %s\n'
                      % (crt, key, hashed))
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    server, _ = web.serve(registry, '127.0.0.1', 0, str(config))
    url = 'https://127.0.0.1:%d/metrics' % server.server_port
    ctx = ssl.create_default_context(cafile=str(crt))

    def get(user=None, password=None, context=ctx):
        req = urllib.request.Request(url)
        if user:
            req.add_header('Authorization', 'Basic ' + base64.b64encode(
                ('%s:%s' % (user, password)).encode()).decode())
        try:
            with urllib.request.urlopen(req, timeout=10,
                                        context=context) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, ''
    try:
        assert get()[0] == 401
        assert get('prometheus', 'wrong')[0] == 401
        assert get('nobody', 'scrape-me')[0] == 401
        status, body = get('prometheus', 'scrape-me')
        assert status == 200 and 'nova_paging_guest_info{' in body
        assert get('prometheus', 'scrape-me')[0] == 200     # remembered
        # Plain HTTP to the TLS port gets nothing.
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen('http://127.0.0.1:%d/metrics'
                                   % server.server_port, timeout=10)
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize('text, key', [
    ('tls_server_config:\n  cert_file: /nonexistent\n  key_file: /x\n',
     'tls_server_config.cert_file'),
    ('http_server_config:\n  http2: false\n', 'http_server_config'),
    ('basic_auth_users:\n  prometheus: plaintext\n', 'basic_auth_users'),
    ('tls_server_config: {cert_file: a, key_file: b, min_version: TLS10}\n',
     'tls_server_config.'),
    ('- a list\n', '(document)'),
])
def test_a_bad_web_config_is_one_line_naming_the_key(tmp_path, text, key):
    config = tmp_path / 'web.yml'
    config.write_text(text)
    with pytest.raises(web.WebConfigError) as err:
        web.serve(prometheus_client.CollectorRegistry(), '127.0.0.1', 0,
                  str(config))
    message = str(err.value)
    assert message.startswith(str(config)) and key in message
    assert '\n' not in message


def test_overhead_counters_over_sampled_events_give_the_per_event_costs(
        sim):
    """What the profiler divides: the kernel's overhead counters over the
    events of the agent's samples, per mode, come back to the hardware
    profile's extra costs (Nehalem: 10 us a shadow page fault, 4 ns a
    nested TLB miss), through the agent's clock conversion and /metrics.
    The walk cycles come from the events the agent names for an Intel
    generation that has them (Skylake-SP's WALK_PENDING)."""
    start(sim, 'sh', {'hw:paging': 'shadow'}, trace='fork-exec')
    start(sim, 'hp', {'hw:paging': 'hap'}, trace='mcf')
    agent = agent_for(sim, count_all=True,      # a profiling host
                      generation='intel-skylake-server')
    agent.reconcile()
    assert sim.model.read(spec.param_path(spec.PARAM_WALK_EVENTS)) == \
        'load=%d store=%d\n' % (0x1008, 0x1049)
    assert agent.cpu_hz == hardware.DEFAULT_CLOCK_HZ   # the sim's cpuinfo
    for _ in range(600):
        run(sim, 1)
        agent.sample()
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    text = prometheus_client.generate_latest(registry).decode()
    fams = {f.name: f for f in parser.text_string_to_metric_families(text)}

    def total(metric, **labels):
        name = metric.name[:-len('_total')]
        return sum(s.value for s in fams[name].samples
                   if s.name == metric.name
                   and all(s.labels.get(k) == v for k, v in labels.items()))
    faults = total(metrics.SAMPLED_EVENTS, mode='shadow',
                   event='page_fault')
    misses = {m: total(metrics.SAMPLED_EVENTS, mode=m, event='tlb_miss')
              for m in ('hap', 'shadow')}
    assert faults > 1000 and min(misses.values()) > 1000
    per_fault = total(metrics.SHADOW_MAINTENANCE_SECONDS) / faults
    per_miss = (total(metrics.HAP_WALK_SECONDS) / misses['hap']
                - total(metrics.SHADOW_WALK_SECONDS) / misses['shadow'])
    assert per_fault == pytest.approx(10000e-9, rel=0.05)
    # What hap adds to a walk, as the profiler takes it: the walk time per
    # miss in hap mode less that in shadow mode (a walk of the shadow
    # tables takes time too).
    assert per_miss == pytest.approx(4e-9, rel=0.05)
    assert total(metrics.SHADOW_WALK_SECONDS) > 0


def test_a_plain_scrape_gets_the_snapshot_the_loop_rendered(sim):
    """nova-paging-agent answers a plain scrape with the text its loop
    rendered after the pass (a scrape renders none of the guests'
    families); it is what the registry would render, sample for sample,
    and a filtered scrape (``name[]``) still gets the registry's view."""
    start(sim, 'a', {'hw:paging': 'adaptive'})
    start(sim, 'b', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.render_metrics = True         # as nova-paging-agent's, serving
    agent.reconcile()
    run(sim, 10)
    agent.sample()
    assert agent.snapshot.text
    registry = prometheus_client.CollectorRegistry()
    metrics_ = collector.Collector(agent)
    registry.register(metrics_)
    server, _ = web.serve(registry, '127.0.0.1', 0, render=metrics_.render)
    aged = {metrics.SNAPSHOT_AGE.name, metrics.LAST_RECONCILE_AGE.name}

    def samples(text):
        return sorted((s.name, tuple(sorted(s.labels.items())), s.value)
                      for f in parser.text_string_to_metric_families(text)
                      if f.name not in aged for s in f.samples)
    try:
        url = 'http://127.0.0.1:%d/metrics' % server.server_port
        with urllib.request.urlopen(url, timeout=10) as r:
            served = r.read().decode()
        assert samples(served) == samples(
            prometheus_client.generate_latest(registry).decode())
        assert served.count('nova_paging_guest_info{') == 2
        with urllib.request.urlopen(url + '?name[]=%s'
                                    % metrics.CPU_HZ.name, timeout=10) as r:
            filtered = r.read().decode()
        assert {f.name for f in parser.text_string_to_metric_families(
            filtered)} == {metrics.CPU_HZ.name}
    finally:
        server.shutdown()
        server.server_close()
