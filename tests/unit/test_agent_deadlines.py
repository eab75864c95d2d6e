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

"""Every call that can block has a deadline: the agent's /metrics
clients, libvirt, the privsep daemon, the loop's own pass and SIGTERM.
Each test runs the real agent (the command, or its loop in a thread)
against the simulated host and real libvirt, sockets and privsep; the
faults are the ones doc/source/agent.rst's fault matrix lists.  Timing
bounds are generous multiples of the configured deadlines: what they
tell apart is "within a deadline" from "never"."""

import errno
import os
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.request

from oslo_config import cfg
import prometheus_client
from prometheus_client import parser
import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import health
from nova_adaptive_paging.agent import web
from nova_adaptive_paging.host import privileged
from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.telemetry import metrics
from tests.unit.agent_support import self_signed
from tests.unit.conftest import needs_fuse
from tests.unit.conftest import wait_for


def _sim_options(sim, extra=()):
    """A config of the agent for the plain-file simulated host ``sim``
    (no FUSE: the kernel's files are absent, so the agent only lists
    guests and serves /metrics)."""
    sim.write_layout()
    options = {('adaptive_paging', 'host_root'): sim.root,
               ('adaptive_paging', 'libvirt_uri'): sim.libvirt_uri,
               ('adaptive_paging', 'cpu_generation'): 'amd-zen3',
               ('adaptive_paging', 'profile_dirs'):
                   os.path.join(sim.root, 'profiles'),
               ('agent', 'interval'): 1,
               ('agent', 'reconcile_interval'): 1}
    options.update(dict(extra))
    return options


def _errors(fams):
    return {s.labels['kind']: s.value
            for s in fams['nova_paging_agent_errors'].samples
            if s.name.endswith('_total')}


# -- /metrics: connection_timeout for the whole request ---------------------
@pytest.mark.parametrize('tls', [False, True], ids=['http', 'https'])
def test_clients_that_trickle_their_request_are_closed_in_time(
        sim, start_guest, agent_process, tmp_path, tls):
    """12 clients send their request a byte every 0.2 s (over TLS, after
    a finished handshake) to an agent with connection_timeout 1 and
    max_connections 8: each is closed within a few timeouts, and a
    scrape is answered meanwhile.  With a timeout per read they held
    their slots as long as they trickled."""
    start_guest('a', {'hw:paging': 'shadow'})
    options = _sim_options(sim, {('agent', 'connection_timeout'): 1.0,
                                 ('agent', 'max_connections'): 8})
    ctx = None
    if tls:
        key, crt = self_signed(tmp_path)
        config = tmp_path / 'web.yml'
        config.write_text('tls_server_config:\n  cert_file: %s\n'
                          '  key_file: %s\n' % (crt, key))
        options[('agent', 'web_config_file')] = str(config)
        ctx = ssl.create_default_context(cafile=str(crt))
    agent = agent_process(options)
    url = '%s://127.0.0.1:%d/metrics' % ('https' if tls else 'http',
                                         agent.port)

    def scrape():
        try:
            with urllib.request.urlopen(url, timeout=5, context=ctx) as r:
                return r.status == 200
        except OSError:
            return False
    wait_for(scrape, 30, 'the agent serving /metrics', agent.proc)
    clients = []
    for _ in range(12):
        sock = socket.create_connection(('127.0.0.1', agent.port))
        if tls:
            try:
                sock = ctx.wrap_socket(sock, server_hostname='127.0.0.1')
            except OSError:     # over the cap: closed before a handshake
                sock = None
        clients.append(sock)
    request = b'GET /metrics HTTP/1.1\r\nHost: x\r\n' + b'X: y\r\n' * 100
    closed_at = {}
    started = time.monotonic()
    for i in range(len(request)):
        for n, sock in enumerate(clients):
            if n in closed_at:
                continue
            if sock is None:
                closed_at[n] = 0.0
                continue
            try:
                sock.send(request[i:i + 1])
                sock.settimeout(0.0)
                try:
                    if sock.recv(1) == b'':
                        closed_at[n] = time.monotonic() - started
                except (BlockingIOError, ssl.SSLWantReadError):
                    pass
                sock.settimeout(None)
            except OSError:
                closed_at[n] = time.monotonic() - started
        if len(closed_at) == len(clients) or \
                time.monotonic() - started > 10:
            break
        time.sleep(0.2)
    try:
        assert len(closed_at) == len(clients), closed_at
        assert max(closed_at.values()) < 6, closed_at
        assert scrape()
    finally:
        for sock in clients:
            if sock is not None:
                sock.close()
    assert agent.stop() == 0


# -- libvirt: a daemon that accepts and never answers ----------------------
class SilentLibvirtd:
    """A UNIX socket that accepts libvirt clients and never answers."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(16)
        self.accepted = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self):
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_a_libvirtd_that_never_answers_holds_neither_metrics_nor_stop(
        sim, agent_process, tmp_path):
    """The connection hangs in libvirt's client (it waits for its
    daemon for ever): the call is given up after libvirt_timeout,
    logged and counted; /metrics answers; SIGTERM ends the agent with a
    clean exit.  Before, one call hung for minutes with no log line and
    SIGTERM needed SIGKILL."""
    silent = SilentLibvirtd(str(tmp_path / 'libvirt-sock'))
    try:
        agent = agent_process(_sim_options(sim, {
            ('adaptive_paging', 'libvirt_uri'):
                'qemu+unix:///system?socket=%s' % (tmp_path / 'libvirt-sock'),
            ('agent', 'libvirt_timeout'): 1.0,
            ('agent', 'stop_timeout'): 5.0}))
        wait_for(lambda: 'did not answer within 1 s' in agent.text(), 30,
                 'the hung call given up', agent.proc)
        assert silent.accepted
        fams = agent.scrape(timeout=5)
        assert _errors(fams)[health.LIBVIRT] >= 1
        started = time.monotonic()
        assert agent.stop() == 0
        assert time.monotonic() - started < 5 + 5
        text = agent.text()
        assert 'Traceback' not in text
        assert text.rstrip().endswith('nova-paging-agent: stopped')
    finally:
        silent.close()


# -- the loop: a scrape never waits on a pass -------------------------------
class HeldWrites:
    """The simulated kernel, with every write held until ``release``:
    a pass that takes as long as the test wants."""

    def __init__(self, model):
        self.model = model
        self.hold = threading.Event()
        self.held = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name):
        return getattr(self.model, name)

    def write(self, rel, text):
        if self.hold.is_set():
            self.held.set()
            self.release.wait(30)
        return self.model.write(rel, text)

    def set_mode(self, vm, mode):
        # The mechanism's control, held as a write is.
        if self.hold.is_set():
            self.held.set()
            self.release.wait(30)
        return self.model.set_mode(vm, mode)


def test_a_scrape_serves_the_last_snapshot_while_a_pass_is_held(
        sim, start_guest, make_agent):
    """A pass held in a kernel write (as a pass over 1,000 new guests,
    or a hung call, holds it): scrapes are answered at once from the
    last complete snapshot, whose age they export.  Before, a scrape
    waited on the pass's lock."""
    start_guest('a', {'hw:paging': 'shadow'})
    transport = HeldWrites(sim.model)
    agent = make_agent(transport=transport)
    agent.conf.set_override('interval', 1, 'agent')
    agent.conf.set_override('reconcile_interval', 3600, 'agent')
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    server, _ = web.serve(registry, '127.0.0.1', 0, timeout=5.0)
    url = 'http://127.0.0.1:%d/metrics' % server.server_port

    def scrape():
        with urllib.request.urlopen(url, timeout=5) as r:
            return {f.name: f for f in parser.text_string_to_metric_families(
                r.read().decode())}
    loop = threading.Thread(target=agent.run)
    loop.start()
    try:
        wait_for(lambda: agent.last_good_reconcile is not None, 10,
                 'the first pass')
        uuid = sim.vms['a'].spec.uuid
        transport.hold.set()
        start_guest('b', {'hw:paging': 'shadow'})
        agent.domains.close()           # the next pass sees b: it writes
        agent.wake('test')
        assert transport.held.wait(10)
        first = scrape()
        time.sleep(0.3)
        second = scrape()
        ages = [f[metrics.SNAPSHOT_AGE.name].samples[0].value
                for f in (first, second)]
        assert ages[1] > ages[0] >= 0
        assert {s.labels['uuid'] for s in
                second[metrics.GUEST_INFO.name].samples} == {uuid}
        assert agent.doing == 'a reconcile pass'
    finally:
        transport.release.set()
        agent.stop()
        loop.join(10)
        server.shutdown()
        server.server_close()
        agent.domains.close()
    assert not loop.is_alive()


def test_health_age_follows_the_monotonic_clock_not_the_wall_clock(
        sim, start_guest, make_agent, monkeypatch):
    """The wall clock set back an hour after a pass: the exported age
    stays that of a healthy agent (the shipped alert keys on it; its
    promtool test is dashboards/tests/alerts_test.yml).  Setting this
    machine's clock would disturb everything else on it, so the agent's
    wall clock alone is set back: a stand-in for the one thing that
    cannot be done here."""
    from nova_adaptive_paging.agent import reconcile
    start_guest('a', {'hw:paging': 'shadow'})
    agent = make_agent()
    assert agent.reconcile()
    real = time.time
    monkeypatch.setattr(reconcile.time, 'time', lambda: real() - 3600)
    assert agent.reconcile()
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    fams = {f.name: f for f in parser.text_string_to_metric_families(
        prometheus_client.generate_latest(registry).decode())}
    stamp = fams[metrics.LAST_RECONCILE.name].samples[0].value
    age = fams[metrics.LAST_RECONCILE_AGE.name].samples[0].value
    assert stamp < real() - 3000            # the wall clock went back
    assert 0 <= age < 60                    # the age did not


# -- the privsep daemon ------------------------------------------------------
def test_a_privsep_helper_that_never_connects_is_one_line_and_exit_1(
        agent_process, tmp_path):
    """The helper sudo would run never connects to its socket (a sudo
    waiting for a password, a helper that hangs): the agent exits 1
    within privsep_timeout with one line, and ends the helper.  Before,
    it stayed "starting" for ever with no /metrics."""
    pidfile = tmp_path / 'helper.pid'
    agent = agent_process({
        ('adaptive_paging', 'host_root'): '/',
        ('adaptive_paging', 'cpu_generation'): 'amd-zen3',
        ('adaptive_paging', 'profile_dirs'): str(tmp_path),
        ('agent', 'privsep_timeout'): 1.0,
        ('agent', 'lock_file'): str(tmp_path / 'agent.lock'),
        ('nova_adaptive_paging_privileged', 'helper_command'):
            # oslo.config reads $$ as $.
            "sh -c 'echo $$$$ > %s; exec sleep 120'" % pidfile})
    assert agent.proc.wait(30) == 1
    errors = [line for line in agent.text().splitlines()
              if line.startswith('error: ')]
    assert len(errors) == 1
    assert 'did not start within 1 s' in errors[0]
    assert 'Traceback' not in agent.text()
    assert 'CRITICAL' not in agent.text()
    helper = int(pidfile.read_text())
    wait_for(lambda: not os.path.exists('/proc/%d' % helper)
             or open('/proc/%d/stat' % helper).read().split(
                 ') ')[1][0] == 'Z', 10, 'the helper ended')


def _helper():
    """privsep-helper, with this tree's code (what the agent's package
    installs beside it on a compute node)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    return 'env PYTHONPATH=%s %s' % (root, os.path.join(
        os.path.dirname(sys.executable), 'privsep-helper'))


@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get(
    'NAP_REQUIRE_SUDO'), reason='the privsep daemon runs as root')
def test_a_privsep_call_that_never_returns_times_out(tmp_path):
    """The real privsep daemon, stopped (SIGSTOP) after it started: a
    call gives up after the transport's timeout instead of blocking the
    agent's pass for ever, as an OSError (ETIMEDOUT) the pass counts, and
    the calls right after it fail at once rather than each waiting as
    long again."""
    section = privileged.host_admin.cfg_section
    cfg.CONF.set_override('helper_command', _helper(), group=section)
    transport = privileged.Transport(timeout=1.0)
    pid = None
    try:
        pid = transport.start(30.0)
        assert privileged.ping() == pid
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(OSError) as exc:
            transport.listdir(spec.DEBUGFS_DIR)
        assert exc.value.errno == errno.ETIMEDOUT
        assert 'within 1 s' in str(exc.value)
        assert time.monotonic() - started < 1.0 + 5
        started = time.monotonic()
        for _ in range(5):
            with pytest.raises(OSError) as exc:
                transport.write(spec.param_path(spec.PARAM_THRESHOLDS), 'x')
            assert exc.value.errno == errno.ETIMEDOUT
        assert time.monotonic() - started < 2.5      # not 5 timeouts
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            os.kill(pid, signal.SIGCONT)
        try:
            privileged.host_admin.stop()
        except Exception:
            pass
        privileged.host_admin.channel = None
        privileged.host_admin.timeout = None
        cfg.CONF.clear_override('helper_command', group=section)


@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get(
    'NAP_REQUIRE_SUDO'), reason='the privsep daemon runs as root')
def test_a_privsep_daemon_that_ended_is_started_again_under_the_deadline(
        tmp_path):
    """The real privsep daemon ends (killed, as the OOM killer of the
    unit's cgroup would, while a request it never read was pending: its
    connection is reset, and oslo.privsep took it for running on), and
    the helper that should start it again
    exits without ever connecting.  oslo.privsep starts it again inside
    the next call and waits for its connection without end: the pass
    hung there for ever.  Now the call fails within the deadline as an
    OSError the pass counts, the calls right after it at once, and a
    helper that works again brings the daemon back."""
    section = privileged.host_admin.cfg_section
    cfg.CONF.set_override('helper_command', _helper(), group=section)
    transport = privileged.Transport(timeout=1.0)
    pids = []
    try:
        pids.append(transport.start(30.0))
        os.kill(pids[0], signal.SIGSTOP)
        with pytest.raises(OSError):
            transport.listdir(spec.DEBUGFS_DIR)     # unread: timed out
        os.kill(pids[0], signal.SIGKILL)
        os.kill(pids[0], signal.SIGCONT)
        channel = privileged.host_admin.channel
        wait_for(lambda: not channel.reader_thread.is_alive(), 10,
                 'the channel\'s reader ended')
        time.sleep(1.1)                             # the quiet period
        cfg.CONF.set_override('helper_command', 'true', group=section)
        outcome = []

        def call():
            try:
                transport.listdir(spec.DEBUGFS_DIR)
            except OSError as exc:
                outcome.append(exc)
        thread = threading.Thread(target=call, daemon=True)
        started = time.monotonic()
        thread.start()
        thread.join(1.0 + 10)
        assert not thread.is_alive(), 'the call hung'
        assert outcome and outcome[0].errno == errno.ETIMEDOUT
        assert 'did not start within 1 s' in str(outcome[0])
        started = time.monotonic()
        for _ in range(5):
            with pytest.raises(OSError):
                transport.write(spec.param_path(spec.PARAM_THRESHOLDS), 'x')
        assert time.monotonic() - started < 2.5      # not 5 timeouts
        cfg.CONF.set_override('helper_command', _helper(), group=section)
        wait_for(lambda: _pings(transport, pids), 30,
                 'the daemon started again')
        assert pids[-1] != pids[0]
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        privileged.host_admin.channel = None
        privileged.host_admin.timeout = None
        cfg.CONF.clear_override('helper_command', group=section)


def _pings(transport, pids):
    try:
        pids.append(transport.ping())
    except OSError:
        return False
    return True


# -- start-up, signals, one agent per host -----------------------------------
def test_sighup_at_start_up_two_agents_and_a_clean_stop(
        sim, start_guest, agent_process):
    """SIGHUP as soon as the agent can take it (while it starts): it
    runs on and reloads once its loop runs (before: status 129, no
    line).  A second agent on the same host exits 1 naming the first
    (before: both ran and wrote).  SIGTERM: exit 0."""
    start_guest('a', {'hw:paging': 'shadow'})
    options = _sim_options(sim)
    first = agent_process(options)
    wait_for(lambda: first.handles(signal.SIGHUP), 30,
             'the SIGHUP handler', first.proc)
    first.proc.send_signal(signal.SIGHUP)
    wait_for(first.serving, 30, 'the agent serving /metrics', first.proc)
    wait_for(lambda: 'SIGHUP: configuration and profiles reloaded'
             in first.text(), 10, 'the reload', first.proc)
    second = agent_process(options, name='second')
    assert second.proc.wait(30) == 1
    lines = second.text().strip().splitlines()
    assert lines[-1].startswith('error: another nova-paging-agent (pid %d)'
                                % first.proc.pid)
    assert first.proc.poll() is None
    assert first.stop() == 0
    assert 'Traceback' not in first.text()


@needs_fuse
def test_sigterm_ends_the_agent_within_stop_timeout_whatever_hangs(
        served_host, agent_process, tmp_path):
    """The kernel's files stop answering (the simulated host's server
    is stopped: every read of them hangs, as a wedged kernel interface
    would): /metrics is still answered from the last snapshot, whose age
    grows, and SIGTERM ends the agent after stop_timeout, exit 1, with a
    line saying what its loop was doing."""
    agent = agent_process({
        ('adaptive_paging', 'host_root'): served_host.root,
        ('adaptive_paging', 'libvirt_uri'): served_host.libvirt_uri,
        ('adaptive_paging', 'cpu_generation'): 'amd-zen3',
        ('adaptive_paging', 'profile_dirs'): str(tmp_path),
        ('agent', 'lock_file'): str(tmp_path / 'agent.lock'),
        ('agent', 'interval'): 1,
        ('agent', 'reconcile_interval'): 1,
        ('agent', 'stop_timeout'): 2})

    def age():
        return agent.snapshot_age(agent.scrape(timeout=5))
    wait_for(agent.serving, 30, '/metrics', agent.proc)
    wait_for(lambda: age() is not None, 30, 'a snapshot', agent.proc)
    served_host.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: age() > 3, 30, 'the loop held', agent.proc)
        started = time.monotonic()
        assert agent.stop(seconds=30) == 1
        assert time.monotonic() - started < 2 + 5
    finally:
        served_host.proc.send_signal(signal.SIGCONT)
    last = agent.text().strip().splitlines()[-1]
    assert 'did not end within [agent] stop_timeout (2 s)' in last
    assert 'pass' in last
