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

import collections
import logging
import threading
import time

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import clients
from nova_adaptive_paging.agent import domains as domainslib
from nova_adaptive_paging.agent import health
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
from nova_adaptive_paging.telemetry import metrics

LOG = logging.getLogger(__name__)
# How soon the loop sees a signal's flag (see Agent._stop).
SIGNAL_POLL_S = 0.25


class Agent:
    def __init__(self, conf, generation, transport=None, domains=None,
                 lookup=None, publisher=None, read_only=False,
                 counters=None, clock=time.monotonic):
        ap = conf.adaptive_paging
        self.conf = conf
        self.root = ap.host_root
        self.transport = transport or host_transport.for_root(
            self.root, conf, privsep=True)
        self.default = ap.default_policy
        self.generation = generation
        self.thresholds = thresholdslib.HostThresholds(ap.profile_dirs,
                                                       generation)
        self.domains = domains or domainslib.Domains(
            ap.libvirt_uri, self.wake, conf.agent.libvirt_max_backoff,
            timeout=conf.agent.libvirt_timeout,
            keepalive_s=conf.agent.libvirt_keepalive_interval)
        self.lookup = lookup
        self.publisher = publisher
        # read_only: look and report what would be written, write nothing
        # (``nova-paging host status``).
        self.read_only = read_only
        # Advisory mode: the cost model of this generation (MODELED) and
        # how a guest's counters are opened (from its QEMU pid).
        self.hw = costhw.for_generation(generation)
        self.counters = counters or host_transport.counters_for(self.root)
        # Seconds, for the bound on guest-reported faults (a simulated
        # host's agent runs on the host's modeled time).
        self.monotonic = clock
        self.guests = {}                # domain name -> guest.Guest
        self.errors = collections.Counter({k: 0 for k in health.KINDS})
        # (Unix time, monotonic time): the first for people, the second
        # for the age health is judged by.
        self.last_good_reconcile = None
        # What /metrics serves (collector.build, after each pass).
        self.snapshot = None
        # What the loop is doing, for the line of a stop that times out.
        self.doing = 'starting'
        self.abi_version = 0
        self.caps = None
        self.published = None          # traits last published
        self.ftlb = sampler.Histogram(metrics.FTLB_BUCKETS)
        self.fpf = sampler.Histogram(metrics.FPF_BUCKETS)
        self.events = sampler.EventCounts()
        # Converts the kernel's page-walk cycles into seconds.
        self.cpu_hz = cpu.clock_hz(self.root)
        self.lock = threading.RLock()
        self._wake = threading.Event()
        # Set by signal handlers, which must take no lock: one that
        # interrupts the loop inside an Event's own lock would deadlock
        # on it.  The loop looks at them every SIGNAL_POLL_S.
        self._stop = False
        self._reload = False
        # Whether the loop runs (a SIGTERM before it ends the start-up).
        self.running = False
        self._said = {}                 # key -> message logged while true

    # -- logging a condition once while it lasts -------------------------
    def fail(self, kind, key, message):
        """Count one error of ``kind``; log ``message`` once while it
        lasts."""
        self.errors[kind] += 1
        self.warn(key, message)

    def warn(self, key, message):
        """Log ``message`` once while it lasts (a state, not an event:
        nothing is counted)."""
        if self._said.get(key) != message:
            self._said[key] = message
            LOG.warning('%s', message)

    def ok(self, key):
        if self._said.pop(key, None) is not None:
            LOG.info('%s: resolved', key)

    def forget(self, domain):
        """Drop what was said of a guest that has gone."""
        for key in [k for k in self._said
                    if isinstance(k, tuple) and k[1:2] == (domain,)]:
            del self._said[key]

    def guest_failed(self, domain, uuid, stage, exc):
        """Anything a guest's handling raised: counted, logged once with
        its instance's UUID; the pass goes on with the next guest."""
        self.fail(health.GUEST, ('guest', domain), '%s (instance %s): %s '
                  'failed: %s: %s; the other guests are not affected' % (
                      domain, uuid, stage, type(exc).__name__, exc))
        LOG.debug('%s of %s', stage, domain, exc_info=True)

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
        ok = reconcilelib.reconcile(self)
        self.publish()
        return ok

    # -- sample ------------------------------------------------------------
    def sample(self):
        """One read of every managed guest (:mod:`.sampler`), then a
        snapshot for /metrics."""
        sampler.sample(self)
        self.publish()

    def publish(self):
        """What /metrics serves from now on (a scrape never waits for a
        pass: it serves the last snapshot, with its age)."""
        self.snapshot = collector.build(self)

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
                        policy, g.decision.source, s.get('mode', '-'),
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
