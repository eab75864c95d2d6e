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

"""The agent's loop: reconcile every guest, sample what the kernel
reports, push the host's thresholds and whether every guest is counted.

A *reconcile* (every ``[agent] reconcile_interval`` seconds, and at once
on a libvirt lifecycle event) lists the running domains, reads each
guest's policy from its Nova metadata, and brings its VM's files to it,
writing only what differs.  A *sample* (every ``[agent] interval``
seconds) reads each managed VM's ``paging_stats`` for the histograms of
sampled FTLB and FPF.  Nothing a guest, libvirt, Nova or a profile file
does can stop the loop: each failure is counted by kind, logged once
while it lasts, and the guest or file keeps its last good state.
"""

import logging
import threading
import time

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import clients
from nova_adaptive_paging.agent import decider
from nova_adaptive_paging.agent import domains as domainslib
from nova_adaptive_paging.agent import health
from nova_adaptive_paging.agent import host_state
from nova_adaptive_paging.agent import reconcile as reconcilelib
from nova_adaptive_paging.agent import sampler
from nova_adaptive_paging.agent import thresholds as thresholdslib
from nova_adaptive_paging.conf import check as conf_check
from nova_adaptive_paging import cpu
from nova_adaptive_paging.costmodel import hardware as costhw
from nova_adaptive_paging import exception
from nova_adaptive_paging.host import probe
from nova_adaptive_paging.host import transport as host_transport
from nova_adaptive_paging.telemetry import collector

LOG = logging.getLogger(__name__)
# How soon the loop sees a signal's flag (see Agent._stop).
SIGNAL_POLL_S = 0.25


def _proxy(part, name, doc):
    """An attribute of the agent that is ``name`` of its ``part`` (the
    narrow pieces a pass takes: :mod:`.host_state`, health, sums)."""
    return property(lambda self: getattr(getattr(self, part), name),
                    lambda self, value: setattr(getattr(self, part), name,
                                                value), doc=doc)


class Agent:
    """The loop around the passes, and what they share: the host's
    state, the guest table, libvirt's domains, the agent's health and
    the samples' sums, each handed to a pass on its own."""

    def __init__(self, conf, generation, transport=None, domains=None,
                 lookup=None, publisher=None, read_only=False,
                 counters=None, clock=time.monotonic):
        ap = conf.adaptive_paging
        self.conf = conf
        root = ap.host_root
        self.host = host_state.HostState(
            root, transport or host_transport.for_root(root, conf,
                                                       privsep=True),
            generation, thresholdslib.HostThresholds(ap.profile_dirs,
                                                     generation),
            # read_only: look and report what would be written, write
            # nothing (``nova-paging host status``).
            read_only=read_only)
        self.default = ap.default_policy
        self.domains = domains or domainslib.Domains(
            ap.libvirt_uri, self.wake, conf.agent.libvirt_max_backoff,
            timeout=conf.agent.libvirt_timeout,
            keepalive_s=conf.agent.libvirt_keepalive_interval)
        self.lookup = lookup
        self.publisher = publisher
        # Advisory mode: the cost model of this generation (MODELED) and
        # how a guest's counters are opened (from its QEMU pid).
        self.hw = costhw.for_generation(generation)
        self.counters = counters or host_transport.counters_for(root)
        # Seconds, for the bound on guest-reported faults (a simulated
        # host's agent runs on the host's modeled time).
        self.monotonic = clock
        self.guests = {}                # domain name -> guest.Guest
        self.health = health.Health(LOG)
        self.sums = sampler.Sums()
        # (Unix time, monotonic time): the first for people, the second
        # for the age health is judged by.
        self.last_good_reconcile = None
        # What /metrics serves (collector.build, after each pass), and
        # whether the loop renders it (when /metrics is served).
        self.snapshot = None
        self.render_metrics = False
        # What the loop is doing, for the line of a stop that times out.
        self.doing = 'starting'
        # Converts the kernel's page-walk cycles into seconds.
        self.cpu_hz = cpu.clock_hz(root)
        self.lock = threading.RLock()
        self._wake = threading.Event()
        # Set by signal handlers, which must take no lock: one that
        # interrupts the loop inside an Event's own lock would deadlock
        # on it.  The loop looks at them every SIGNAL_POLL_S.
        self._stop = False
        self._reload = False
        # Whether the loop runs (a SIGTERM before it ends the start-up).
        self.running = False

    root = _proxy('host', 'root', 'The host\'s root directory.')
    transport = _proxy('host', 'transport', 'The host interface.')
    generation = _proxy('host', 'generation', 'The CPU generation.')
    thresholds = _proxy('host', 'thresholds', 'The host\'s profiles.')
    read_only = _proxy('host', 'read_only', 'Whether it writes nothing.')
    abi_version = _proxy('host', 'abi_version', 'The interface version.')
    caps = _proxy('host', 'caps', 'The capabilities last read.')
    published = _proxy('host', 'published', 'The traits last published.')
    errors = _proxy('health', 'errors', 'Errors by kind.')
    _said = _proxy('health', 'said', 'What is logged while it lasts.')
    ftlb = _proxy('sums', 'ftlb', 'The sampled FTLB histogram.')
    fpf = _proxy('sums', 'fpf', 'The sampled FPF histogram.')
    events = _proxy('sums', 'events', 'The sampled events.')

    # -- logging a condition once while it lasts -------------------------
    def fail(self, kind, key, message):
        self.health.fail(kind, key, message)

    def warn(self, key, message):
        self.health.warn(key, message)

    def ok(self, key):
        self.health.ok(key)

    def guest_failed(self, domain, uuid, stage, exc):
        self.health.guest_failed(domain, uuid, stage, exc)

    # -- start-up ----------------------------------------------------------
    def preflight(self):
        """What must hold before the loop starts, else one
        :class:`exception.Error` (the command exits non-zero and systemd
        restarts it): the privsep daemon starts, and a host interface
        that is there can be read.  Warns of a configuration that works
        but is probably not what was meant."""
        for message in conf_check.warnings(self.conf, self.generation):
            LOG.warning('%s', message)
        start = getattr(self.transport, 'start', None)
        if start is not None:
            start(self.conf.agent.privsep_timeout)
        rel = spec.param_path(spec.PARAM_ABI)
        if self.transport.exists(rel):
            try:
                probe.abi_version(self.transport, strict=True)
            except Exception as exc:
                raise exception.Error(
                    '%s: cannot be read (%s: %s); expected the paging-'
                    'switch patch\'s interface version' % (
                        rel, type(exc).__name__, exc))

    # -- the loop ----------------------------------------------------------
    def wake(self, reason):
        LOG.debug('woken: %s', reason)
        self._wake.set()

    def stop(self):
        """SIGTERM, SIGINT (and any thread): end :meth:`run`."""
        self._stop = True

    def request_reload(self):
        """SIGHUP: reload the configuration and profiles at the next
        turn of the loop (a signal handler must not take a lock)."""
        self._reload = True

    def _pause(self, seconds):
        """Wait ``seconds``, or less: until a :meth:`wake` or a signal's
        flag."""
        end = time.monotonic() + seconds
        while not (self._stop or self._reload):
            left = end - time.monotonic()
            if left <= 0 or self._wake.wait(min(left, SIGNAL_POLL_S)):
                return

    def reload(self):
        """Re-read the configuration files (oslo.config's mutable
        options change; the others need a restart, as oslo.config
        warns) and the profile directories; a file that does not parse
        or holds a bad value changes nothing."""
        self._reload = False
        try:
            conf_check.reloadable(self.conf)
        except exception.Error as exc:
            LOG.error('SIGHUP: configuration not reloaded, the last good '
                      'one stays in force: %s', exc)
            return
        changed = self.conf.mutate_config_files()
        for message in conf_check.warnings(self.conf, self.generation):
            LOG.warning('SIGHUP: %s', message)
        with self.lock:
            ap = self.conf.adaptive_paging
            self.default = ap.default_policy
            # The same profiles: a file damaged meanwhile keeps its
            # last good version, as it does between two passes.
            self.thresholds.reconfigure(ap.profile_dirs)
        LOG.info('SIGHUP: configuration and profiles reloaded (%s)',
                 ', '.join('[%s] %s' % (g or 'DEFAULT', o)
                           for g, o in sorted(changed, key=str))
                 or 'no option changed')

    def run(self):
        """Until :meth:`stop` (SIGTERM, SIGINT)."""
        due = 0.0
        while not self._stop:
            interval = self.conf.agent.interval
            now = time.monotonic()
            try:
                if self._reload:
                    self.doing = 'reloading'
                    self.reload()
                    due = 0.0
                if now >= due or self._wake.is_set() or \
                        self.domains.retry_due():
                    self._wake.clear()
                    due = now + self.conf.agent.reconcile_interval
                    self.doing = 'a reconcile pass'
                    self.reconcile()
                if self._stop:
                    break
                self.doing = 'a sample pass'
                self.sample()
            except Exception:
                # A bug, not a guest's or a service's doing: its traceback
                # goes to the log, and the next pass starts afresh.
                self.errors[health.INTERNAL] += 1
                LOG.exception('internal error; the agent carries on')
            wait = min(interval, due - time.monotonic())
            retry = self.domains.retry_in()
            if retry is not None:
                wait = min(wait, retry)
            self.doing = 'waiting'
            self._pause(max(0.0, wait))
        self.doing = 'closing libvirt'
        self.domains.close()

    # -- reconcile -------------------------------------------------------
    def reconcile(self):
        """One pass over the host and every running guest
        (:mod:`.reconcile`); True when nothing of the agent's own
        failed.  Then a snapshot for /metrics."""
        with self.lock:
            done = reconcilelib.reconcile(
                self.host, self.guests, self.domains, self.health,
                host_state.Policies(self.default, self.lookup),
                host_state.HostOptions.from_conf(
                    self.conf.adaptive_paging, self.publisher),
                self._advice())
            if done is not None:
                self.last_good_reconcile = done
        self.publish()
        return done is not None

    # -- sample ------------------------------------------------------------
    def sample(self):
        """One read of every managed guest (:mod:`.sampler`), then a
        snapshot for /metrics."""
        with self.lock:
            sampler.sample(self.host, self.guests, self.domains,
                           self.health, self.sums, self._advice())
        self.publish()

    def _advice(self):
        samples = self.conf.adaptive_paging.decision_samples_dir
        return host_state.Advice(
            self.hw, self.monotonic, self.counters,
            decider.SampleFiles(samples) if samples else None)

    def publish(self):
        """What /metrics serves from now on (a scrape never waits for a
        pass: it serves the last snapshot, with its age)."""
        self.snapshot = collector.build(self, self.render_metrics)

    # -- what an operator sees -------------------------------------------
    def report(self):
        """One line per guest, for ``--once`` and ``host status``."""
        lines = []
        with self.lock:
            for name in sorted(self.guests):
                g = self.guests[name]
                s = g.stats or {}
                policy = (g.decision.policy.paging.value
                          if g.decision.policy else '?')
                lines.append(
                    '%s instance=%s flavor=%s policy=%s(%s) mode=%s '
                    'switches=%s last_ftlb=%s last_fpf=%s%s' % (
                        name, g.instance.uuid, g.instance.flavor or '-',
                        policy, g.decision.source,
                        s.get('mode', g.set_here() or '-'),
                        (s['switches_to_hap'] + s['switches_to_shadow'])
                        if s else '-',
                        s.get('last_ftlb', '-'), s.get('last_fpf', '-'),
                        (' would write: %s' % ', '.join(g.pending)
                         if g.pending else '')
                        + (' problem: %s' % g.problem if g.problem
                           else '')))
        return lines


def from_conf(conf, generation):
    return Agent(conf, generation, lookup=clients.lookup_from_conf(conf),
                 publisher=clients.publisher_from_conf(conf))
