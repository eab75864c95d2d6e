"""The compute-node agent against real libvirt (the test:/// driver over
the simulated host's node XML, written with Nova's own metadata classes)
and the simulated host's interface (the reference model, which refuses
every value the spec forbids, as the conformance suite uses it)."""

import base64
import gc
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.error
import urllib.request

import bcrypt
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import libvirt
from oslo_config import cfg
import prometheus_client
from prometheus_client import parser
import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.agent import domains
from nova_adaptive_paging.agent import health
from nova_adaptive_paging.agent import nova_api
from nova_adaptive_paging.host import privileged
from nova_adaptive_paging.agent import service
from nova_adaptive_paging.agent import web
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging import dsp
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import placement
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import vocabulary

if 'eventlet.patcher' in sys.modules and \
        sys.modules['eventlet.patcher'].is_monkey_patched('thread'):
    raise RuntimeError('tests/unit/test_agent.py needs real threads: run it '
                       'in a pytest process of its own, as tox.ini does')

NEHALEM = hardware.resolve('nehalem')
TRACES = traces.builtin()
GENERATION = 'amd-zen3'
# A profile for this host's generation, with thresholds unlike the
# built-in fallback's (so that its arrival is visible in dsp_thresholds).
ZEN3 = """format_version: 1
generation: amd-zen3
thresholds: {tlb_upper: 7, tlb_lower: 0.2, pf_upper: 4000, pf_lower: 90,
             pt_upper: 300, pt_lower: 120}
history_samples: 2
interval_s: 1
provenance: {method: calibrated, source: test, obtained: 2026-11-25,
             hosts: 1, samples: 10}
"""


Clock = simfleet.Clock


class Recording:
    """The model's interface, with every write kept (it is still the
    model that accepts or refuses them)."""

    def __init__(self, model):
        self.model = model
        self.writes = []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def write(self, rel, text):
        self.writes.append((rel, text.strip()))
        return self.model.write(rel, text)


make_conf = simfleet.agent_conf_for


def start(sim, name, specs, trace='phases-tlb-fault', **kw):
    return sim.start_vm(simhost.VmSpec(name, TRACES[trace], specs, **kw))


def agent_for(sim, default=vocabulary.HAP, count_all=False,
              generation=GENERATION, **kw):
    conf = make_conf(sim.root, sim.libvirt_uri, default, count_all)
    transport = Recording(sim.model)
    kw.setdefault('clock', sim.now_s)
    return service.Agent(conf, generation, transport=transport, **kw)


def policy_of(sim, name):
    return sim.model.vms[sim.vms[name].dirname].policy


def run(sim, seconds):
    for _ in range(int(seconds)):
        sim.clock.ns += int(1e9)
        sim.tick()


def test_each_guest_ends_in_the_policy_its_flavor_asks(sim, caplog):
    start(sim, 'adaptive', {'hw:paging': 'adaptive'})
    start(sim, 'hap', {'hw:paging': 'hap'})
    start(sim, 'shadow', {'hw:paging': 'shadow'})
    start(sim, 'missing', {'hw:cpu_policy': 'dedicated'})
    start(sim, 'invalid', {'hw:paging': 'ept'})
    agent = agent_for(sim, default=vocabulary.SHADOW)
    assert agent.reconcile()
    assert {name: policy_of(sim, name) for name in sim.vms} == {
        'adaptive': 'adaptive', 'hap': 'hap', 'shadow': 'shadow',
        'missing': 'shadow', 'invalid': 'shadow'}
    # One warning for the invalid value, naming instance, key and value.
    uuid = sim.vms['invalid'].spec.uuid
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == 'WARNING' and 'hw:paging' in r.getMessage()]
    assert len(warned) == 1
    assert uuid in warned[0] and "hw:paging='ept'" in warned[0]
    assert agent.errors[health.POLICY] == 1
    # The report names each guest's source of policy.
    lines = dict(line.split(' ', 1) for line in agent.report())
    assert 'policy=shadow(default)' in lines['missing']
    assert 'policy=adaptive(flavor)' in lines['adaptive']
    # Idempotent: a second pass writes nothing and warns no more.
    before = len(agent.transport.writes)
    assert agent.reconcile()
    assert agent.transport.writes[before:] == []
    assert len([r for r in caplog.records if r.levelname == 'WARNING'
                and 'hw:paging' in r.getMessage()]) == 1


def test_a_guest_that_cannot_run_shadow_keeps_its_mode(sim):
    start(sim, 'noshadow', {'hw:paging': 'shadow'}, can_shadow=False)
    start(sim, 'fine', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.reconcile()
    vm = sim.model.vms[sim.vms['noshadow'].dirname]
    assert (vm.policy, vm.mode) == ('hap', 'hap')
    assert policy_of(sim, 'fine') == 'shadow'
    assert agent.errors[health.APPLY] == 1
    assert 'EOPNOTSUPP' in agent.guests['noshadow'].problem


def test_a_profile_dropped_in_reaches_dsp_thresholds(sim):
    agent = agent_for(sim)
    agent.reconcile()
    fallback = spec.ThresholdSet.from_profile(profiles.builtin())
    assert sim.model.thresholds == fallback
    assert not agent.caps.calibrated
    path = os.path.join(sim.root, 'profiles', 'amd-zen3.yaml')
    with open(path, 'w') as f:
        f.write(ZEN3)
    agent.reconcile()
    zen3 = spec.ThresholdSet.from_profile(profiles.loads(ZEN3))
    assert sim.model.thresholds == zen3
    assert agent.caps.calibrated
    assert vocabulary.TRAIT_CALIBRATED in agent.caps.traits()
    # A truncated file: reported, and the last good profile stays.
    with open(path, 'w') as f:
        f.write(ZEN3[:60])
    os.utime(path, ns=(1, 1))
    agent.reconcile()
    assert sim.model.thresholds == zen3
    assert agent.errors[health.PROFILE] == 1
    # Garbage in another file of the same generation changes nothing.
    with open(os.path.join(sim.root, 'profiles', 'junk.yaml'), 'wb') as f:
        f.write(b'\xff\xfe\x00garbage')
    agent.reconcile()
    assert sim.model.thresholds == zen3


def test_flavor_profile_and_interval_give_a_per_vm_override(sim):
    with open(os.path.join(sim.root, 'profiles', 'amd-zen3.yaml'),
              'w') as f:
        f.write(ZEN3)
    start(sim, 'tuned', {'hw:paging': 'adaptive',
                         'hw:paging_profile': 'intel-nehalem',
                         'hw:paging_interval': '7'})
    start(sim, 'plain', {'hw:paging': 'adaptive'})
    start(sim, 'unknown', {'hw:paging': 'adaptive',
                           'hw:paging_profile': 'intel-nowhere'})
    agent = agent_for(sim)
    agent.reconcile()
    tuned = sim.model.vms[sim.vms['tuned'].dirname]
    nehalem = profiles.builtin()
    assert tuned.override == spec.ThresholdSet(
        nehalem.thresholds, nehalem.history_samples, 7000)
    assert sim.model.vms[sim.vms['plain'].dirname].override is None
    # An unknown profile: the host's thresholds, and a warning.
    assert sim.model.vms[sim.vms['unknown'].dirname].override is None
    assert 'intel-nowhere' in agent.guests['unknown'].target.problem
    # The flavor no longer asks for an override: it goes.
    sim.stop_vm('tuned')
    start(sim, 'tuned', {'hw:paging': 'adaptive'})
    agent.domains.close()               # the test driver rereads the node
    agent.reconcile()
    assert sim.model.vms[sim.vms['tuned'].dirname].override is None


def _scrape(port):
    with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port,
                                timeout=10) as resp:
        text = resp.read().decode()
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def _value(fams, metric, **labels):
    name = metric.name[:-len('_total')] if metric.kind == metrics.COUNTER \
        else metric.name
    for s in fams[name].samples:
        if all(s.labels.get(k) == v for k, v in labels.items()) and \
                not s.name.endswith(('_created', '_bucket', '_count',
                                     '_sum')):
            return s.value
    raise AssertionError('%s%s not scraped' % (metric.name, labels))


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
        # (17, two for an adaptive guest, one as its flavor asks a
        # policy: guest_policy_not_honoured)
        assert (len(per_guest), len(per_host)) == (20, 91)
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


def test_only_adaptive_guests_are_counted_unless_the_host_profiles(sim):
    """The kernel opens a guest's perf events (hardware counters its own
    PMU then lacks) only under adaptive, or for every guest while
    dsp_pmu_all is set: [adaptive_paging] count_all_guests, which the
    agent writes, and writes back when the configuration changes."""
    start(sim, 'h', {'hw:paging': 'hap'})
    start(sim, 's', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.reconcile()
    param = '%s/%s' % (spec.PARAMS_DIR, spec.PARAM_PMU_ALL)
    assert sim.model.read(param) == 'N\n'
    assert [w for w in agent.transport.writes if w[0] == param] == []
    for _ in range(30):
        run(sim, 1)
        agent.sample()
    assert agent.events.counts['hap']['tlb_miss'] == 0
    assert agent.events.counts['shadow']['tlb_miss'] == 0
    assert sum(agent.ftlb.counts['hap']) == sum(agent.ftlb.counts[
        'shadow']) == 0

    agent.conf.set_override('count_all_guests', True, 'adaptive_paging')
    agent.reconcile()
    agent.reconcile()                   # written once, then left alone
    assert [w for w in agent.transport.writes if w[0] == param] == [
        (param, 'Y')]
    for _ in range(30):
        run(sim, 1)
        agent.sample()
    assert agent.events.counts['hap']['tlb_miss'] > 0
    assert agent.events.counts['shadow']['tlb_miss'] > 0

    agent.conf.set_override('count_all_guests', False, 'adaptive_paging')
    agent.reconcile()
    assert sim.model.read(param) == 'N\n'
    assert agent.errors[health.COUNTERS] == 0


def test_a_kernel_that_cannot_count_every_guest_is_reported_once(
        sim, caplog):
    """count_all_guests on a kernel without dsp_pmu_all: one warning
    naming the parameter, an error counted per pass, the rest of the
    pass done."""
    start(sim, 'a', {'hw:paging': 'adaptive'})
    agent = agent_for(sim, count_all=True)
    param = '%s/%s' % (spec.PARAMS_DIR, spec.PARAM_PMU_ALL)
    real_read = sim.model.read

    def read(rel):
        if rel == param:
            raise FileNotFoundError(2, 'No such file or directory', rel)
        return real_read(rel)
    agent.transport.read = read
    assert not agent.reconcile()
    assert not agent.reconcile()
    assert agent.errors[health.COUNTERS] == 2
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == 'WARNING' and param in r.getMessage()]
    assert warned == ['%s: cannot make it Y (count_all_guests): No such '
                      'file or directory' % param]
    assert policy_of(sim, 'a') == 'adaptive'


def test_the_walk_cycle_events_follow_the_generation_and_the_config(
        sim, caplog):
    """The agent names the walk-cycle events of its CPU generation in
    dsp_walk_events, none where the generation has none or
    count_walk_cycles is off; a kernel without the parameter is an error
    only when there is something to count, and the pass goes on."""
    start(sim, 'a', {'hw:paging': 'adaptive'})
    param = spec.param_path(spec.PARAM_WALK_EVENTS)
    zen3 = agent_for(sim)                       # counts walks, not cycles
    assert zen3.reconcile()
    assert sim.model.read(param) == 'load=0 store=0\n'
    assert [w for w in zen3.transport.writes if w[0] == param] == []

    agent = agent_for(sim, generation='intel-icelake-server')
    assert agent.reconcile() and agent.reconcile()
    assert [w for w in agent.transport.writes if w[0] == param] == [
        (param, 'load=4104 store=4169')]
    agent.conf.set_override('count_walk_cycles', False, 'adaptive_paging')
    assert agent.reconcile()
    assert sim.model.read(param) == 'load=0 store=0\n'
    agent.conf.clear_override('count_walk_cycles', 'adaptive_paging')

    real_read = sim.model.read

    def read(rel):
        if rel == param:
            raise FileNotFoundError(2, 'No such file or directory', rel)
        return real_read(rel)
    zen3.transport.read = agent.transport.read = read
    assert zen3.reconcile()                     # nothing to count
    assert not agent.reconcile()
    assert agent.errors[health.COUNTERS] == 1
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == 'WARNING' and param in r.getMessage()]
    assert len(warned) == 1 and 'WALK_PENDING' in warned[0], warned
    assert policy_of(sim, 'a') == 'adaptive'


def test_an_adaptive_guests_balloon_fault_count_reaches_the_kernel(sim):
    """libvirt's test driver reports balloon statistics (a fault count
    of 0): the agent writes the guest's count, the kernel's samples then
    take their faults from user space in both modes."""
    start(sim, 'a', {'hw:paging': 'adaptive'}, guest_faults=False,
          balloon=True)
    start(sim, 'p', {'hw:paging': 'hap'}, guest_faults=False, balloon=True)
    start(sim, 'n', {'hw:paging': 'adaptive'}, guest_faults=False)
    agent = agent_for(sim)
    agent.reconcile()
    agent.sample()
    written = [w for w in agent.transport.writes
               if w[0].endswith(spec.FILE_GUEST_FAULTS)]
    a = sim.vms['a'].dirname
    assert written == [('%s/%s/%s' % (spec.DEBUGFS_DIR, a,
                                      spec.FILE_GUEST_FAULTS), '0')]
    run(sim, 10)
    stats = spec.parse_stats(sim.model.vms[a].read(spec.FILE_STATS))
    assert stats['pf_source'] == 'user'
    assert agent.guests['a'].fault_stats is True
    assert agent.guests['p'].fault_stats is None     # not adaptive
    # Without a balloon there is no count: reported once, not hidden.
    assert agent.guests['n'].fault_stats is False
    agent.sample()
    assert agent.errors[health.FAULTS] == 2
    assert len([m for m in agent._said.values() if 'balloon' in m]) == 1


def test_a_guest_that_forges_its_fault_count_is_bounded(sim):
    """A guest reports whatever its balloon says; libvirt's test driver
    reports a constant, so the lying guest is stood in for by the values
    it reports (the one modeled part).  What reaches the kernel rises no
    faster than one fault per 100 ns per vCPU, never goes backwards, and
    each bounded report is counted."""
    start(sim, 'a', {'hw:paging': 'adaptive'}, guest_faults=False,
          balloon=True, vcpus=2)
    agent = agent_for(sim)
    agent.reconcile()
    reports = iter([1000, 1000 + 2 ** 63, 5, 5 + 3000, 2 ** 64 - 1])
    agent.domains.guest_faults = lambda name: next(reports)
    fed = []
    for _ in range(5):
        agent.sample()
        fed.append(int([w for w in agent.transport.writes if w[0].endswith(
            spec.FILE_GUEST_FAULTS)][-1][1]))
        run(sim, 5)
    # 2 vCPUs for 5 s at most 10^7 faults a second each: 10^8 a report.
    assert fed == [0, 10 ** 8, 10 ** 8, 10 ** 8 + 3000, 2 * 10 ** 8 + 3000]
    assert agent.guests['a'].fault_feed.clamped == 3
    clamped = metrics.GUEST_FAULTS_CLAMPED
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    fams = {f.name: f for f in parser.text_string_to_metric_families(
        prometheus_client.generate_latest(registry).decode())}
    [sample] = [s for s in fams[clamped.name[:-len('_total')]].samples
                if s.name == clamped.name]
    assert sample.value == 3


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


def test_a_guest_destroyed_between_discovery_and_write(sim):
    start(sim, 'a', {'hw:paging': 'shadow'})
    start(sim, 'b', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.domains.connect()             # libvirt still lists 'a' after...
    sim.stop_vm('a')                    # ...its QEMU is gone
    assert agent.reconcile()
    assert policy_of(sim, 'b') == 'shadow'
    assert agent.errors[health.VM] == 1
    assert agent.guests['a'].vm is None


def test_an_unwritable_vm_directory_leaves_its_guest_as_it_was(sim):
    """A VM whose files refuse writes (EACCES: a stand-in, as root passes
    any mode bits here): its guest keeps the mode it had, the others get
    their policy, the refusal is counted, and the next pass after the
    directory is writable again applies it."""
    a = start(sim, 'a', {'hw:paging': 'shadow'})
    start(sim, 'b', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    real = agent.transport.write

    def write(rel, text):
        if a.dirname in rel:
            raise PermissionError(13, 'Permission denied', rel)
        return real(rel, text)
    agent.transport.write = write
    agent.reconcile()
    assert policy_of(sim, 'a') == 'hap'
    assert sim.model.vms[a.dirname].mode == 'hap'
    assert policy_of(sim, 'b') == 'shadow'
    assert agent.errors[health.APPLY] == 1
    assert 'EACCES' in agent.guests['a'].problem
    agent.transport.write = real
    agent.reconcile()
    assert policy_of(sim, 'a') == 'shadow'
    assert agent.guests['a'].problem is None


def test_an_unknown_interface_version_is_never_written(sim):
    start(sim, 'a', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    real = agent.transport.model.read

    def read(rel):
        if rel.endswith(spec.PARAM_ABI):
            return '%d\n' % (spec.ABI_VERSION + 1)
        return real(rel)
    agent.transport.read = read
    agent.reconcile()
    assert agent.transport.writes == []
    assert policy_of(sim, 'a') == 'hap'
    assert not agent.caps.switching


def test_libvirt_down_is_retried_with_backoff_and_survived(sim, tmp_path):
    start(sim, 'a', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    now = [0.0]
    agent.domains = domains.Domains('test:///%s' % (tmp_path / 'gone.xml'),
                                    clock=lambda: now[0])
    assert not agent.reconcile()
    assert not agent.reconcile()        # within the backoff: no new try
    assert agent.errors[health.LIBVIRT] == 2
    now[0] += 1.5
    agent.domains.uri = sim.libvirt_uri  # libvirtd is back
    assert agent.reconcile()
    assert policy_of(sim, 'a') == 'shadow'


def test_a_lifecycle_event_wakes_the_agent_on_a_read_only_connection():
    """libvirt's shared test:///default: what another client does to a
    guest reaches the agent's connection, which cannot do it itself."""
    seen = []
    agent = domains.Domains('test:///default', seen.append)
    conn = agent.connect()
    other = libvirt.open('test:///default')
    if not other.lookupByName('test').isActive():
        other.lookupByName('test').create()
    try:
        with pytest.raises(libvirt.libvirtError, match='read only'):
            conn.lookupByName('test').destroy()
        other.lookupByName('test').destroy()
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.02)
        assert seen and 'test' in seen[0]
    finally:
        other.lookupByName('test').create()
        other.close()
        agent.close()


def test_metadata_without_extra_specs_waits_for_the_nova_api(
        sim, tmp_path, caplog):
    """Guests started before Nova 32.0.0, with the Nova API down (a closed
    loopback port): they are left as they are, the outage is logged once
    and asked about once per retry period, not once per guest.  The API
    answering is tests/functional/test_agent_nova_api.py's."""
    start(sim, 'old1', {'hw:paging': 'shadow'}, flavor='m1.old')
    start(sim, 'old2', {'hw:paging': 'shadow'}, flavor='m1.old')
    start(sim, 'new', {'hw:paging': 'shadow'})
    node = open(os.path.join(sim.root, simhost.NODE_XML)).read()
    stripped = tmp_path / 'old-node.xml'
    cut = node.split('  <domain')
    for i, part in enumerate(cut):
        if 'm1.old' in part:
            a = part.index('<nova:extraSpecs')
            b = part.index('</nova:extraSpecs>') + len('</nova:extraSpecs>')
            cut[i] = part[:a] + part[b:]
    stripped.write_text('  <domain'.join(cut))
    with socket.socket() as closed:
        closed.bind(('127.0.0.1', 0))
        port = closed.getsockname()[1]
    now = [0.0]
    lookup = nova_api.ServerFlavors(
        lambda: ks_adapter.Adapter(ks_session.Session(
            auth=token_endpoint.Token('http://127.0.0.1:%d' % port, 't'))),
        retry_s=60, timeout_s=2, clock=lambda: now[0])
    agent = agent_for(sim, lookup=lookup)
    agent.domains.uri = 'test://%s' % stripped
    agent.reconcile()
    agent.reconcile()
    assert agent.guests['old1'].decision.policy is None
    assert (policy_of(sim, 'old1'), policy_of(sim, 'old2')) == ('hap', 'hap')
    assert policy_of(sim, 'new') == 'shadow'
    assert lookup.requests == 1
    assert len([r for r in caplog.records if 'Nova API' in
                r.getMessage()]) == 1
    assert 'Nova API' in agent.guests['old2'].problem
    now[0] += 61
    agent.reconcile()
    assert lookup.requests == 2


def test_the_privileged_side_touches_interface_files_only():
    for rel in ('sys/kernel/debug/kvm/123-11/paging_policy',
                'sys/module/kvm/parameters/dsp_thresholds'):
        privileged.check_path(rel, write=True)
    privileged.check_path('sys/kernel/debug/kvm')
    privileged.check_path('sys/kernel/debug/kvm/1-2/paging_stats')
    for rel, write in (('etc/shadow', False),
                       ('sys/kernel/debug/kvm/../../../etc/shadow', True),
                       ('sys/kernel/debug/kvm/1-2/paging_stats', True),
                       ('sys/module/kvm/parameters/paging_switch_abi', True),
                       ('sys/kernel/debug/kvm/1-2/../x', False),
                       ('sys/kernel/debug/kvm/1-2/paging_policy/x', False)):
        with pytest.raises(PermissionError):
            privileged.check_path(rel, write=write)


def test_sudoers_allows_the_command_the_agent_runs(monkeypatch, tmp_path):
    """host-agent's sudoers rule and the privsep helper command the agent
    runs must agree, or the daemon never starts: the command is the
    rule's, and its arguments, with a socket oslo.privsep's mkdtemp makes
    in the runtime directory, match the rule's regular expression (sudo's
    own matching is tests/unit/test_privileges.py's)."""
    monkeypatch.setattr(sys, 'argv', [
        '/opt/nova-adaptive-paging/bin/nova-paging-agent'])
    privileged.Transport()
    sock = os.path.join(tempfile.mkdtemp(dir=tmp_path), 'privsep.sock')
    sock = privileged.RUNTIME_DIR + sock[len(str(tmp_path)):]
    command = privileged.host_admin.helper_command(sock)
    path = os.path.join(os.path.dirname(__file__), '..', '..', 'host-agent',
                        'sudoers.d-nova-paging-agent')
    with open(path) as f:
        rule = [line for line in f if line.startswith('nova-paging ALL')]
    binary, args = rule[0].split('NOPASSWD: ', 1)[1].strip().split(' ', 1)
    assert command[:2] == ['sudo', binary]
    assert args.startswith('^') and args.endswith('$')
    assert re.fullmatch(args[1:-1], ' '.join(command[2:]))
    assert not re.fullmatch(args[1:-1], ' '.join(
        command[2:] + ['--log-config-append', '/tmp/x']))


def test_the_agent_conf_sets_the_privsep_helper(tmp_path, monkeypatch):
    """oslo.privsep reads its section from the global cfg.CONF; a
    helper_command in the agent's own configuration file must reach it
    (a root without sudo, as the end-to-end test in the emulated host
    runs)."""
    monkeypatch.setattr(sys, 'argv', [
        '/opt/nova-adaptive-paging/bin/nova-paging-agent'])
    path = tmp_path / 'agent.conf'
    path.write_text('[nova_adaptive_paging_privileged]\n'
                    'helper_command = privsep-helper --config-file %s\n'
                    % path)
    conf = cfg.ConfigOpts()
    conf([], default_config_files=[str(path)])
    try:
        privileged.Transport(conf)
        command = privileged.host_admin.helper_command('S')
    finally:
        cfg.CONF.clear()
    assert command == ['privsep-helper', '--config-file', str(path),
                       '--privsep_context', privileged.host_admin.pypath,
                       '--privsep_sock_path', 'S']


def test_the_loop_survives_a_bug_and_stop_ends_it(sim):
    start(sim, 'a', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.conf.set_override('interval', 1, 'agent')
    real, calls = agent.sample, []

    def sample():
        calls.append(1)
        if len(calls) == 1:
            raise KeyError('a bug')
        real()
    agent.sample = sample
    thread = threading.Thread(target=agent.run)
    thread.start()
    deadline = time.monotonic() + 10
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    agent.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert len(calls) >= 2 and agent.errors[health.INTERNAL] == 1
    assert policy_of(sim, 'a') == 'shadow'
    assert libvirt.getVersion() > 0


# -- the command, against the simulated host served over FUSE ---------------
def _fuse_usable():
    return (os.path.exists('/dev/fuse') and os.geteuid() == 0
            and (shutil.which('fusermount3') or shutil.which('fusermount')))


@pytest.mark.skipif(
    not _fuse_usable() and not os.environ.get('NAP_REQUIRE_FUSE'),
    reason='needs /dev/fuse, root and fusermount (set NAP_REQUIRE_FUSE=1 '
           'to make this a failure)')
def test_agent_once_brings_a_served_host_to_the_flavors(tmp_path):
    """``nova-paging-agent --once``: real files (FUSE), real libvirt (the
    test driver), the real command line and config file."""
    root = str(tmp_path / 'node')
    sim = subprocess.Popen(
        [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli', 'sim-host',
         '--root', root, '--vms', '4', '--speed', '1', '--duration', '300',
         '--paging', 'shadow', '--paging', 'adaptive', '--paging', 'none',
         '--paging', 'hap'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    debugfs = os.path.join(root, spec.DEBUGFS_DIR)
    try:
        for _ in range(1200):
            if os.path.isdir(debugfs) and len(os.listdir(debugfs)) == 4:
                break
            assert sim.poll() is None, sim.communicate()
            time.sleep(0.05)
        (tmp_path / 'profiles').mkdir()
        (tmp_path / 'profiles' / 'amd-zen3.yaml').write_text(ZEN3)
        config = tmp_path / 'agent.conf'
        config.write_text(
            '[adaptive_paging]\nhost_root = %s\nlibvirt_uri = test://%s\n'
            'default_policy = shadow\ncpu_generation = amd-zen3\n'
            'profile_dirs = %s\n' % (root, os.path.join(
                root, simhost.NODE_XML), tmp_path / 'profiles'))

        def status():
            out = subprocess.run(
                [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli',
                 '--config-file', str(config), 'host', 'status'],
                capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            return out.stdout.splitlines()

        # What the agent would do, before it runs: it reads only.
        before = status()
        assert before[0].startswith('host: generation amd-zen3, switching')
        pending = [line for line in before[1:] if 'would write' in line]
        assert len(pending) == 3        # shadow, adaptive, default shadow
        assert all(open(os.path.join(debugfs, name, spec.FILE_POLICY))
                   .read().strip() == 'hap' for name in os.listdir(debugfs))
        done = subprocess.run(
            [sys.executable, '-m', 'nova_adaptive_paging.cmd.agent',
             '--config-file', str(config), '--once'],
            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert [line for line in status() if 'would write' in line] == []
        lines = dict(line.split(' ', 1)
                     for line in done.stdout.splitlines())
        assert sorted(lines) == ['instance-%08x' % i for i in (1, 2, 3, 4)]
        assert 'policy=shadow(flavor)' in lines['instance-00000001']
        assert 'policy=shadow(default)' in lines['instance-00000003']
        files = {}
        for name in os.listdir(debugfs):
            with open(os.path.join(debugfs, name, spec.FILE_POLICY)) as f:
                files[name] = f.read().strip()
        assert sorted(files.values()) == ['adaptive', 'hap', 'shadow',
                                          'shadow']
        with open(os.path.join(root, spec.PARAMS_DIR,
                               spec.PARAM_THRESHOLDS)) as f:
            assert spec.ThresholdSet.parse(f.read()) == \
                spec.ThresholdSet.from_profile(profiles.loads(ZEN3))
        # A bad configuration: one line, exit 2, nothing written.
        config.write_text('[agent]\ninterval = soon\n')
        bad = subprocess.run(
            [sys.executable, '-m', 'nova_adaptive_paging.cmd.agent',
             '--config-file', str(config), '--once'],
            capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2
        assert bad.stderr.count('\n') == 1 and 'interval' in bad.stderr
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.communicate(timeout=20)


def test_a_thousand_guests_come_and_go_without_leaks(sim):
    """Guests started and destroyed through libvirt (the agent's own
    connection, so its events fire) and the simulated host, one at a
    time: nothing the agent holds grows with the number that came and
    went."""
    sim.write_layout()                  # an empty node
    agent = agent_for(sim)
    agent.transport = sim.model         # no record of writes kept
    # The agent's connection is read-only: the guests are started and
    # destroyed by another client of libvirt's shared test driver.
    agent.domains = domains.Domains('test:///default', agent.wake)
    conn = libvirt.open('test:///default')
    if conn.lookupByName('test').isActive():
        conn.lookupByName('test').destroy()
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))

    def cycle(i):
        vm = start(sim, 'churn-%d' % i, {'hw:paging': 'shadow'})
        dom = conn.createXML(vm.domain.strip(), 0)
        agent.reconcile()
        assert sim.model.vms[vm.dirname].policy == 'shadow'
        text = prometheus_client.generate_latest(registry).decode()
        dom.destroy()
        sim.stop_vm(vm.spec.name)
        agent.reconcile()
        return text

    def footprint():
        return (len(os.listdir('/proc/self/fd')), threading.active_count(),
                len(agent.guests), len(agent._said))
    for i in range(20):                 # warm up: imports, caches
        cycle(i)
    before = footprint()
    tracemalloc.start()
    gc.collect()
    snap = tracemalloc.take_snapshot()
    for i in range(20, 1020):
        text = cycle(i)
    gc.collect()                        # the simulated VMs' cycles
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(
        snap, 'filename'))
    tracemalloc.stop()
    after = footprint()
    # A leak per cycle would show as a thousand; libvirt may open a file
    # or start a thread of its own once, at any time.
    assert after[0] - before[0] <= 2 and after[1] - before[1] <= 1
    # No guest left; of what was said, only the host's missing profile.
    assert after[2:] == before[2:] == (0, 1)
    # One guest's series while it ran, none of the 999 gone before it.
    assert text.count('nova_paging_guest_info{') == 1
    # Python memory kept over 1,000 cycles by the agent, the libvirt
    # bindings and the simulated host (which remembers every name that
    # left, about 80 KiB here): under 1 MiB, about 1 KiB a guest.
    assert grown < 1 << 20, grown
    conn.lookupByName('test').create()
    conn.close()
    agent.domains.close()


# -- /metrics with TLS and basic auth (exporter-toolkit's web config) --------
def _self_signed(tmp_path):
    key, crt = tmp_path / 'agent.key', tmp_path / 'agent.crt'
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048',
                    '-nodes', '-days', '2', '-subj', '/CN=localhost',
                    '-addext', 'subjectAltName=IP:127.0.0.1',
                    '-keyout', str(key), '-out', str(crt)],
                   check=True, capture_output=True)
    return key, crt


def test_metrics_behind_tls_and_basic_auth(sim, tmp_path):
    start(sim, 'a', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.reconcile()
    key, crt = _self_signed(tmp_path)
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


# -- advisory mode on a host without the switching patch --------------------
TraceCounters = simfleet.TraceCounters


def stock_kernel(agent):
    """The simulated host as a stock kernel: no paging_switch_abi."""
    agent.transport = simfleet.StockTransport(agent.transport)


def test_advisory_mode_says_what_adaptive_would_do(sim):
    start(sim, 'tlb', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault',
          guest_faults=False, balloon=True)
    agent = agent_for(sim, counters=lambda pid: TraceCounters(sim, pid))
    stock_kernel(agent)
    agent.reconcile()
    assert agent.caps.kvm and not agent.caps.switching
    # The same samples, fed to the DSP engine by the test, with the switch
    # guard on the agent's (simulated) clock: one interval a sample.
    profile = profiles.builtin()
    engine = dsp.Engine(profile.thresholds, profile.history_samples,
                        guard=profile.guard)
    prev, decided = None, []
    for _ in range(60):
        run(sim, profile.interval_s)
        agent.sample()
        insns, tlb, _ = sim.vms['tlb'].counters()
        faults = 0                      # the test driver's balloon count
        if prev is not None:
            engine.step(dsp.Sample.from_counts(insns - prev[0],
                                               tlb - prev[1], 0),
                        profile.interval_s * 10 ** 9)
        prev = (insns, tlb, faults)
        decided.append(str(engine.mode))
        assert agent.guests['tlb'].advisor.mode == decided[-1]
    assert agent.transport.writes == []          # it only advises
    assert 'shadow' in decided                   # TLB-bound phases
    assert agent.guests['tlb'].advisor.gain_s > 0
    # ... and says so on /metrics.
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    text = prometheus_client.generate_latest(registry).decode()
    uuid = sim.vms['tlb'].spec.uuid
    fams = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert _value(fams, metrics.ADVISED_MODE, uuid=uuid,
                  mode=decided[-1]) == 1
    assert _value(fams, metrics.GUEST_COUNTERS, uuid=uuid) == 1


def test_advisory_in_the_shadow_pool_models_what_hap_would_save(tmp_path):
    """A stock host with npt=0 runs every guest shadowed (the shadow
    pool): its agent models, from counts that mean the same in both
    modes, what hap would have saved each guest, and exports it with the
    host's pool for the fleet strategy."""
    clock = Clock()
    sim = simhost.SimHost(str(tmp_path), hardware.resolve('nehalem'),
                          profiles.builtin(), clock=clock, tdp=False)
    sim.clock = clock
    os.makedirs(os.path.join(sim.root, 'profiles'))
    start(sim, 'faults', {'hw:paging': 'adaptive'}, trace='gcc',
          guest_faults=False, balloon=True)
    start(sim, 'tlb', {'hw:paging': 'adaptive'}, trace='mcf',
          guest_faults=False, balloon=True)
    agent = agent_for(sim, counters=lambda pid: TraceCounters(sim, pid))
    agent.conf.set_override('pool', True, 'adaptive_paging')
    stock_kernel(agent)
    agent.domains = simfleet.SimBalloon(agent.domains, sim)
    agent.reconcile()
    assert agent.caps.host_mode == vocabulary.SHADOW
    assert {sim.model.vms[vm.dirname].mode for vm in sim.vms.values()} == {
        vocabulary.SHADOW}
    agent.sample()
    first = {n: sim.vms[n].counters() for n in sim.vms}
    for _ in range(24):
        run(sim, 5)
        agent.sample()
    # The oracle: the counts between the agent's first and last read,
    # priced with the generation's cost data (what shadow costs over hap).
    hw = hardware.for_generation(GENERATION)
    saved = {}
    for name, vm in sim.vms.items():
        counts = [b - a for a, b in zip(first[name], vm.counters())]
        saved[name] = sum(
            n * (hw.cost_s(vocabulary.SHADOW, event)
                 - hw.cost_s(vocabulary.HAP, event))
            for n, event in ((counts[1], vocabulary.EVENT_TLB_MISS),
                             (counts[2], vocabulary.EVENT_PAGE_FAULT)))
        advisor = agent.guests[name].advisor
        assert advisor.host_mode == vocabulary.SHADOW
        assert advisor.other_s == pytest.approx(saved[name], rel=1e-9)
        assert advisor.observed_s == pytest.approx(120)
    assert saved['faults'] > 0 > saved['tlb']    # gcc faults, mcf misses
    assert agent.transport.writes == []
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    text = prometheus_client.generate_latest(registry).decode()
    fams = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert _value(fams, metrics.HOST_PAGING_MODE, mode='shadow') == 1
    assert _value(fams, metrics.HOST_PAGING_MODE, mode='hap') == 0
    assert vocabulary.TRAIT_POOL in agent.caps.traits()
    # Outside the pools: no pool, no pool trait; the figures stay.
    agent.conf.set_override('pool', False, 'adaptive_paging')
    agent.reconcile()
    text = prometheus_client.generate_latest(registry).decode()
    assert metrics.HOST_PAGING_MODE.name not in text
    assert metrics.MODELED_OTHER_MODE_GAIN.name in text
    assert vocabulary.TRAIT_POOL not in agent.caps.traits()
    for name, vm in sim.vms.items():
        assert _value(fams, metrics.MODELED_OTHER_MODE_GAIN,
                      uuid=vm.spec.uuid) == pytest.approx(saved[name])
        assert _value(fams, metrics.ADVISED_SECONDS,
                      uuid=vm.spec.uuid) == pytest.approx(120)


def test_advisory_mode_without_counters_says_so_once(sim, caplog):
    start(sim, 'a', {'hw:paging': 'adaptive'})
    start(sim, 'b', {'hw:paging': 'adaptive'})
    agent = agent_for(sim)              # the real perf counters
    stock_kernel(agent)
    agent.reconcile()
    for _ in range(5):
        agent.sample()
    said = [r.getMessage() for r in caplog.records
            if 'guest-only counters' in r.getMessage()]
    assert len(said) == 1 and 'adaptive paging would do' in said[0]
    assert agent.guests['a'].counters_ok is False
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    text = prometheus_client.generate_latest(registry).decode()
    uuid = sim.vms['a'].spec.uuid
    assert 'nova_paging_guest_counters{uuid="%s"} 0.0' % uuid in text
    assert 'nova_paging_guest_modeled_mode{' not in text


def test_an_unreachable_placement_is_retried_and_blocks_nothing(
        sim, caplog):
    start(sim, 'a', {'hw:paging': 'shadow'})
    with socket.socket() as closed:
        closed.bind(('127.0.0.1', 0))
        port = closed.getsockname()[1]
    adapter = ks_adapter.Adapter(ks_session.Session(
        auth=token_endpoint.Token('http://127.0.0.1:%d' % port, 't')),
        raise_exc=False)
    agent = agent_for(sim, publisher=lambda caps: placement.publish(
        adapter, ['compute1'], caps, retries=0))
    agent.reconcile()
    agent.reconcile()
    assert policy_of(sim, 'a') == 'shadow'
    assert agent.errors[health.PLACEMENT] == 2       # tried each pass
    assert agent.published is None
    assert len([r for r in caplog.records
                if 'publishing traits' in r.getMessage()]) == 1


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
    misses = total(metrics.SAMPLED_EVENTS, mode='hap', event='tlb_miss')
    assert faults > 1000 and misses > 1000
    per_fault = total(metrics.SHADOW_MAINTENANCE_SECONDS) / faults
    per_miss = total(metrics.HAP_WALK_SECONDS) / misses
    assert per_fault == pytest.approx(10000e-9, rel=0.05)
    assert per_miss == pytest.approx(4e-9, rel=0.05)
    # Nehalem's model prices a walk of the shadow tables at nothing.
    assert total(metrics.SHADOW_WALK_SECONDS) == 0
