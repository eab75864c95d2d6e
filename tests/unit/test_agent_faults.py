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

"""The agent's fault matrix: each fault against a running agent on the
simulated host, asserting the documented behaviour, that no guest ends
in a mode nobody asked for and that the other guests' series stay
(doc/source/agent.rst, "Faults").  Runs in a process of its own, as
the other agent tests do (real threads)."""

import errno
import os
import socket
import ssl
import threading
import time
import urllib.request

import prometheus_client
from prometheus_client import parser
import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import health
from nova_adaptive_paging.agent import web
from nova_adaptive_paging.conf import check as conf_check
from nova_adaptive_paging import exception
from nova_adaptive_paging.host import files
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging import profiles
from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import vocabulary
from tests.unit.agent_support import self_signed
from tests.unit.conftest import needs_fuse

ABI = spec.param_path(spec.PARAM_ABI)


class Faulty:
    """The simulated kernel's interface with faults injected: a read of
    a path containing a key of ``faults`` raises that exception or
    returns that text, as a broken kernel file would."""

    def __init__(self, model):
        self.model = model
        self.faults = {}

    def __getattr__(self, name):
        return getattr(self.model, name)

    def _fault(self, rel):
        for key, fault in self.faults.items():
            if key in rel:
                if isinstance(fault, BaseException):
                    raise fault
                return fault
        return None

    def read(self, rel):
        fault = self._fault(rel)
        return self.model.read(rel) if fault is None else fault

    def write(self, rel, text):
        self._fault(rel)
        return self.model.write(rel, text)

    def set_mode(self, vm, mode):
        # The mechanism's control, faulted as a write of the VM's is.
        self._fault(spec.vm_path(vm, vmfiles.SET_MODE))
        return self.model.set_mode(vm, mode)


def policy_of(sim, name):
    return sim.model.vms[sim.vms[name].dirname].policy


def drift(sim, name, policy):
    """Somebody else (an operator by hand) changes a VM's policy."""
    rel = '%s/%s/%s' % (spec.DEBUGFS_DIR, sim.vms[name].dirname,
                        spec.FILE_POLICY)
    sim.model.write(rel, policy + '\n')


def scrape(agent):
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    text = prometheus_client.generate_latest(registry).decode()
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def guests_with(fams, metric):
    name = metric.name[:-len('_total')] if metric.kind == metrics.COUNTER \
        else metric.name
    return {s.labels[metrics.GUEST_LABEL] for s in fams[name].samples}


@pytest.mark.parametrize('fault', [
    'mode: garbage\n',                                   # garbage
    UnicodeDecodeError('ascii', b'\xff', 0, 1, 'ordinal not in range'),
    OSError(errno.EIO, 'Input/output error'),
    RuntimeError('anything else'),
], ids=['garbage', 'non-ascii', 'eio', 'any-exception'])
def test_one_vms_broken_files_are_that_guests_problem(
        sim, start_guest, make_agent, fault):
    start_guest('a-broken', {'hw:paging': 'shadow'})
    start_guest('b', {'hw:paging': 'shadow'})
    start_guest('c', {'hw:paging': 'adaptive'})
    transport = Faulty(sim.model)
    agent = make_agent(transport=transport)
    assert agent.reconcile()
    agent.sample()
    transport.faults[sim.vms['a-broken'].dirname] = fault
    # Listed first, it fails first: the guests after it are still
    # brought back from a drift.
    drift(sim, 'b', vocabulary.HAP)
    drift(sim, 'c', vocabulary.HAP)
    agent.reconcile()
    agent.sample()
    assert policy_of(sim, 'b') == vocabulary.SHADOW
    assert policy_of(sim, 'c') == vocabulary.ADAPTIVE
    assert policy_of(sim, 'a-broken') == vocabulary.SHADOW   # untouched
    assert sum(agent.errors[k] for k in (health.GUEST, health.VM,
                                         health.APPLY)) >= 1
    fams = scrape(agent)
    uuids = {n: sim.vms[n].spec.uuid for n in sim.vms}
    assert guests_with(fams, metrics.GUEST_INFO) == set(uuids.values())
    assert {uuids['b'], uuids['c']} <= guests_with(fams, metrics.GUEST_MODE)
    success = {s.labels['collector']: s.value
               for s in fams[metrics.SCRAPE_SUCCESS.name].samples}
    assert success == {'guests': 1.0, 'host': 1.0, 'agent': 1.0}


def test_a_non_ascii_kernel_file_is_an_io_error(tmp_path):
    (tmp_path / 'f').write_bytes(b'2\xff\n')
    with pytest.raises(OSError) as exc:
        files.FileTransport(str(tmp_path)).read('f')
    assert exc.value.errno == errno.EILSEQ and exc.value.filename == 'f'


def test_an_abi_file_failing_after_start_up_blanks_no_guest(
        sim, start_guest, make_agent, caplog):
    start_guest('a', {'hw:paging': 'shadow'})
    start_guest('b', {'hw:paging': 'adaptive'})
    transport = Faulty(sim.model)
    agent = make_agent(transport=transport)
    agent.preflight()
    assert agent.reconcile()
    transport.faults[ABI] = OSError(errno.EIO, 'Input/output error', ABI)
    drift(sim, 'a', vocabulary.HAP)
    for _ in range(3):
        assert not agent.reconcile()
        agent.sample()
    assert agent.errors[health.HOST] == 3
    assert len([r for r in caplog.records if 'host interface failed'
                in r.getMessage()]) == 1
    assert policy_of(sim, 'a') == vocabulary.SHADOW
    fams = scrape(agent)
    assert len(guests_with(fams, metrics.GUEST_MODE)) == 2
    (info,) = fams[metrics.HOST_INFO.name].samples
    assert info.labels['switching'] == 'true'
    # At start-up the same fault is fatal: one line naming the file.
    with pytest.raises(exception.Error) as exc:
        make_agent(transport=transport).preflight()
    assert str(exc.value).startswith(ABI) and '\n' not in str(exc.value)


def test_a_guest_started_while_libvirt_was_away_is_right_at_reconnect(
        sim, start_guest, make_agent):
    """libvirt goes away (its close callback: the test driver has no
    daemon to lose, so the callback is called as libvirt would), the
    reconnects fail (the driver's file is gone) and follow the backoff;
    a shadow guest started meanwhile is in shadow mode within one
    interval of the reconnect, whatever reconcile_interval is."""
    start_guest('a', {'hw:paging': 'shadow'})
    agent = make_agent()
    agent.conf.set_override('interval', 1, 'agent')
    agent.conf.set_override('reconcile_interval', 3600, 'agent')
    agent.conf.set_override('libvirt_max_backoff', 60.0, 'agent')
    thread = threading.Thread(target=agent.run)
    thread.start()
    node = os.path.join(sim.root, 'libvirt', 'node.xml')
    try:
        deadline = time.monotonic() + 10
        while policy_of(sim, 'a') != vocabulary.SHADOW:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.rename(node, node + '.away')
        agent.domains._closed(agent.domains.conn, 0, None)
        deadline = time.monotonic() + 10
        while agent.errors[health.LIBVIRT] < 2:      # 1 s, then 2 s
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.rename(node + '.away', node)
        start_guest('b', {'hw:paging': 'shadow'})   # rewrites node.xml
        started = time.monotonic()
        while policy_of(sim, 'b') != vocabulary.SHADOW:
            # The next try is at most 4 s away (1, 2, 4 s).
            assert time.monotonic() - started < 4 + 1 + 1
            time.sleep(0.05)
        assert agent.domains.connects == 2
    finally:
        agent.stop()
        thread.join(10)
    assert not thread.is_alive()


ZEN3 = ('format_version: 1\ngeneration: amd-zen3\nthresholds: '
        '{tlb_upper: 7, tlb_lower: 0.2, pf_upper: 4000, pf_lower: '
        '90, pt_upper: 300, pt_lower: 120}\nhistory_samples: 2\n'
        'interval_s: 1\nprovenance: {method: manual, source: t, '
        'obtained: 2026-11-25, hosts: 1, samples: 1}\n')


def _zen3_profile(sim):
    path = os.path.join(sim.root, 'profiles', 'zen3.yaml')
    with open(path, 'w') as f:
        f.write(ZEN3)
    return path


def kernel_thresholds(sim):
    return spec.ThresholdSet.parse(sim.model.read(
        spec.param_path(spec.PARAM_THRESHOLDS)))


@pytest.mark.parametrize('damage', [
    'thresholds: {tlb_upper: [\n',      # corrupted: not YAML
    '',                                 # emptied
    ZEN3.replace('tlb_upper: 7', 'tlb_upper: -7'),   # out of range
], ids=['corrupted', 'emptied', 'invalid'])
def test_a_damaged_profile_keeps_its_last_good_version(
        sim, start_guest, make_agent, caplog, damage):
    path = _zen3_profile(sim)
    start_guest('a', {'hw:paging': 'shadow'})
    agent = make_agent()
    agent.reconcile()
    good = spec.ThresholdSet.from_profile(profiles.load(path))
    assert kernel_thresholds(sim) == good       # the file's, in force
    with open(path, 'w') as f:
        f.write(damage)
    os.utime(path, ns=(1, 1))           # a change even within one tick
    drift(sim, 'a', vocabulary.HAP)
    agent.reconcile()
    fams = scrape(agent)
    assert kernel_thresholds(sim) == good
    assert fams[metrics.PROFILE_MISSING.name].samples[0].value == 0
    errors = {s.labels['kind']: s.value
              for s in fams[metrics.ERRORS.name[:-len('_total')]].samples
              if s.name.endswith('_total')}
    assert errors[health.PROFILE] == 1
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == 'WARNING' and path in r.getMessage()]
    assert len(warned) == 1 and 'last good version' in warned[0]
    assert policy_of(sim, 'a') == vocabulary.SHADOW     # drift repaired
    assert guests_with(fams, metrics.GUEST_MODE) == {sim.vms['a'].spec.uuid}


def test_a_deleted_profile_is_a_warning_and_a_metric(
        sim, start_guest, make_agent, caplog):
    path = _zen3_profile(sim)
    agent = make_agent()
    agent.reconcile()
    missing = metrics.PROFILE_MISSING.name
    assert scrape(agent)[missing].samples[0].value == 0
    os.unlink(path)
    agent.reconcile()
    assert scrape(agent)[missing].samples[0].value == 1
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == 'WARNING' and 'zen3.yaml' in r.getMessage()]
    assert len(warned) == 1 and 'intel-nehalem' in warned[0]


def test_start_up_warns_of_what_would_be_ignored(tmp_path, sim, make_agent):
    config = tmp_path / 'agent.conf'
    # A directory this test knows is not there, whatever the machine has.
    missing = tmp_path / 'no-such-profiles'
    config.write_text('[agent]\nintervall = 3\n'
                      '[adaptive_paging]\ncpu_generation = intel-skylak\n'
                      'profile_dirs = %s\n' % missing)
    agent = make_agent()
    agent.conf.clear_override('profile_dirs', 'adaptive_paging')
    agent.conf([], default_config_files=[str(config)])
    lines = conf_check.warnings(agent.conf, 'intel-skylak')
    assert any('[agent] intervall' in line and 'did you mean interval'
               in line for line in lines)
    assert any('cpu_generation intel-skylak' in line
               and 'intel-nehalem' in line for line in lines)
    assert any('%s is not a directory' % missing in line for line in lines)


# -- /metrics under load: idle connections, concurrent scrapes, TLS ---------
@pytest.mark.parametrize('tls', [False, True], ids=['http', 'https'])
def test_idle_connections_neither_block_scrapes_nor_pile_up_threads(
        sim, start_guest, make_agent, tmp_path, tls):
    start_guest('a', {'hw:paging': 'shadow'})
    agent = make_agent()
    agent.reconcile()
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    config, ctx = None, None
    if tls:
        key, crt = self_signed(tmp_path)
        config = tmp_path / 'web.yml'
        config.write_text('tls_server_config:\n  cert_file: %s\n'
                          '  key_file: %s\n' % (crt, key))
        ctx = ssl.create_default_context(cafile=str(crt))
    cap, timeout = 64, 1.0
    server, _ = web.serve(registry, '127.0.0.1', 0,
                          str(config) if config else None,
                          timeout=timeout, max_connections=cap)
    url = '%s://127.0.0.1:%d/metrics' % ('https' if tls else 'http',
                                         server.server_port)

    def get():
        with urllib.request.urlopen(url, timeout=10, context=ctx) as r:
            return r.status, r.read().decode()
    threads_before = threading.active_count()
    idle = []
    try:
        # A few idle clients (no request, no handshake) stop nothing.
        idle = [socket.create_connection(('127.0.0.1', server.server_port))
                for _ in range(5)]
        status, body = get()
        assert status == 200 and 'nova_paging_guest_info{' in body
        # 50 concurrent scrapes all get the whole page.
        results = []

        def scrape_once():
            results.append(get())
        workers = [threading.Thread(target=scrape_once) for _ in range(50)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(30)
        assert len(results) == 50
        assert all(s == 200 and 'nova_paging_guest_info{' in b
                   for s, b in results)
        # 300 idle connections: at most the cap hold a thread, each for
        # the timeout; then scrapes are served again.
        idle += [socket.create_connection(('127.0.0.1', server.server_port))
                 for _ in range(300)]
        time.sleep(0.5)
        assert threading.active_count() - threads_before <= cap + 2
        deadline = time.monotonic() + 10 * timeout
        while True:
            try:
                if get()[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        for s in idle:
            s.close()
        server.shutdown()
        server.server_close()


def test_basic_auth_without_tls_is_refused_unless_allowed(tmp_path):
    config = tmp_path / 'web.yml'
    config.write_text('basic_auth_users:\n  prometheus: $2b$04$abcdefghij'
                      'klmnopqrstuu5f5ZlhZFDE5t2o5KXGKw8Gc9o1h8tIy\n')
    with pytest.raises(web.WebConfigError) as exc:
        web.load(str(config))
    assert 'basic_auth_users' in str(exc.value) and 'tls' in str(exc.value)
    _, users = web.load(str(config), basic_auth_without_tls=True)
    assert list(users) == ['prometheus']


# -- signals, against the command on a simulated host served over FUSE -------
@needs_fuse
def test_the_signal_handlers_take_no_lock(sim, start_guest, make_agent):
    """A signal runs its handler in the main thread between two bytecodes,
    also while the loop holds its wake-up Event's own (non-reentrant)
    lock: a handler that set that Event would wait for itself for ever
    (the agent then ignored SIGTERM, as a CI run showed once).  Here the
    handlers run while that lock is held, as such a signal would; then
    the loop ends within a poll of the stop request."""
    start_guest('a', {'hw:paging': 'shadow'})
    agent = make_agent()
    handled = threading.Event()

    def signal_inside_the_lock():
        with agent._wake._cond:        # where the loop may be interrupted
            agent.request_reload()
            agent.stop()
        handled.set()
    t = threading.Thread(target=signal_inside_the_lock, daemon=True)
    t.start()
    t.join(5)
    assert handled.is_set(), 'a handler waited for a lock its thread held'
    loop = threading.Thread(target=agent.run)
    started = time.monotonic()
    loop.start()
    loop.join(10)
    assert not loop.is_alive()
    assert time.monotonic() - started < 5


def test_sighup_reloads_sigterm_and_sigint_stop(tmp_path):
    """The real ``nova-paging-agent``: SIGHUP applies a changed
    default_policy (and a bad file changes nothing), SIGTERM and SIGINT
    end it cleanly (exit 0, a last log line)."""
    import signal
    import subprocess
    import sys
    from nova_adaptive_paging.simhost import host as simhost
    root = str(tmp_path / 'node')
    sim = subprocess.Popen(
        [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli', 'sim-host',
         '--root', root, '--vms', '2', '--speed', '1', '--duration', '300',
         '--paging', 'none', '--paging', 'none'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    debugfs = os.path.join(root, spec.DEBUGFS_DIR)
    (tmp_path / 'profiles').mkdir()
    config = tmp_path / 'agent.conf'
    conf = ('[adaptive_paging]\nhost_root = %s\nlibvirt_uri = test://%s\n'
            'default_policy = %%s\ncpu_generation = amd-zen3\n'
            'profile_dirs = %s\n[agent]\ninterval = %%s\n'
            'reconcile_interval = 1\nlisten_port = 0\n' % (
                root, os.path.join(root, simhost.NODE_XML),
                tmp_path / 'profiles'))

    def policies():
        out = []
        for name in os.listdir(debugfs):
            with open(os.path.join(debugfs, name, spec.FILE_POLICY)) as f:
                out.append(f.read().strip())
        return out

    def wait_for(policy, proc):
        deadline = time.monotonic() + 20
        while policies() != [policy, policy]:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, policies()
            time.sleep(0.1)

    def agent():
        log = open(tmp_path / 'agent.log', 'w+')
        return subprocess.Popen(
            [sys.executable, '-m', 'nova_adaptive_paging.cmd.agent',
             '--config-file', str(config)], stdout=log, stderr=log), log
    try:
        for _ in range(1200):
            if os.path.isdir(debugfs) and len(os.listdir(debugfs)) == 2:
                break
            assert sim.poll() is None, sim.communicate()
            time.sleep(0.05)
        config.write_text(conf % ('shadow', 1))
        proc, log = agent()
        wait_for(vocabulary.SHADOW, proc)
        config.write_text(conf % ('adaptive', 1))
        proc.send_signal(signal.SIGHUP)
        wait_for(vocabulary.ADAPTIVE, proc)
        config.write_text(conf % ('hap', 'soon'))
        proc.send_signal(signal.SIGHUP)
        time.sleep(3)
        assert proc.poll() is None
        assert policies() == [vocabulary.ADAPTIVE] * 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        log.seek(0)
        text = log.read()
        assert 'SIGHUP: configuration and profiles reloaded ' \
            '([adaptive_paging] default_policy)' in text
        assert 'SIGHUP: configuration not reloaded' in text and \
            'interval' in text
        assert text.rstrip().endswith('nova-paging-agent: stopped')
        assert 'Traceback' not in text
        config.write_text(conf % ('adaptive', 1))
        proc, log = agent()
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.communicate(timeout=20)


def test_a_scrape_filtered_by_name_gets_that_family(
        sim, start_guest, make_agent):
    """describe() comes from the metric table, so ``?name[]=`` (the
    registry's restricted view) finds the families it names."""
    start_guest('a', {'hw:paging': 'shadow'})
    agent = make_agent()
    agent.reconcile()
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    names = [metrics.GUEST_INFO.name, metrics.CPU_HZ.name]
    text = prometheus_client.generate_latest(
        registry.restricted_registry(names)).decode()
    fams = {f.name for f in parser.text_string_to_metric_families(text)}
    assert fams == set(names)
    described = {f.name for f in collector.Collector(agent).describe()}
    exposed = {f.name for f in registry.collect()}
    assert exposed <= described


def test_guest_churn_reaches_the_running_agent_by_lifecycle_events(tmp_path):
    """Guests started, rebooted, stopped and migrated while the agent
    runs, in libvirt's shared test driver: each new guest is in its mode
    within a second, long before the periodic pass (an hour here), and a
    guest gone leaves no series."""
    from nova_adaptive_paging.costmodel import hardware
    from nova_adaptive_paging.costmodel import traces
    from nova_adaptive_paging import profiles
    from nova_adaptive_paging.simhost import scraped_fleet as simfleet
    from nova_adaptive_paging.simhost import host as simhost
    from nova_adaptive_paging.agent import service
    sim = simhost.SimHost(str(tmp_path), hardware.resolve('nehalem'),
                          profiles.builtin(), clock=simfleet.Clock(),
                          shared_libvirt=True)
    os.makedirs(os.path.join(sim.root, 'profiles'))
    conf = simfleet.agent_conf_for(sim.root, sim.libvirt_uri)
    conf.set_override('interval', 1, 'agent')
    conf.set_override('reconcile_interval', 3600, 'agent')
    agent = service.Agent(conf, 'amd-zen3', transport=sim.model,
                          clock=sim.now_s)
    trace = traces.builtin()['gcc']
    thread = threading.Thread(target=agent.run)

    def within(seconds, check):
        deadline = time.monotonic() + seconds
        while not check():
            assert time.monotonic() < deadline
            time.sleep(0.02)
    try:
        thread.start()
        within(5, lambda: agent.last_good_reconcile is not None)
        for i, paging in enumerate(('shadow', 'adaptive', 'shadow')):
            name = 'churn-%d' % i
            sim.start_vm(simhost.VmSpec(name, trace, {'hw:paging': paging}))
            within(1.5, lambda: policy_of(sim, name) == paging)
        sim.reboot_vm('churn-0')
        sim.stop_vm('churn-1')
        sim.migrate_vm('churn-2')
        within(1.5, lambda: set(agent.guests) == {'churn-0'})
        fams = scrape(agent)
        assert guests_with(fams, metrics.GUEST_INFO) == {
            sim.vms['churn-0'].spec.uuid}
        assert policy_of(sim, 'churn-0') == vocabulary.SHADOW
    finally:
        agent.stop()
        thread.join(10)
        sim.close()
        agent.domains.close()
    assert not thread.is_alive()
