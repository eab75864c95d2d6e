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
import dataclasses
import logging
import threading
import time
import xml.etree.ElementTree as ET

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import advisory
from nova_adaptive_paging.agent import domains as domainslib
from nova_adaptive_paging.agent import guest as guestlib
from nova_adaptive_paging.agent import health
from nova_adaptive_paging.agent import perf
from nova_adaptive_paging.agent import sampler
from nova_adaptive_paging.agent import thresholds as thresholdslib
from nova_adaptive_paging.agent import writer
from nova_adaptive_paging import cpu
from nova_adaptive_paging.costmodel import hardware as costhw
from nova_adaptive_paging import host
from nova_adaptive_paging.host import files
from nova_adaptive_paging.host import probe
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging.telemetry import metrics

LOG = logging.getLogger(__name__)
PMU_ALL = spec.param_path(spec.PARAM_PMU_ALL)


def counters_for(root):
    """How guest-only counters are opened: through the privsep daemon on
    a real host, in process elsewhere."""
    if host.is_host_root(root):
        from nova_adaptive_paging.agent import privileged
        return privileged.Counters
    return perf.GuestCounters


def transport_for(root, conf=None):
    """The host interface under ``root``: through the privsep daemon on a
    real host (configured by ``conf``'s files), directly under any other
    root (a simulated host's files are the agent's own)."""
    if host.is_host_root(root):
        from nova_adaptive_paging.agent import privileged
        return privileged.Transport(conf)
    return files.FileTransport(root)


@dataclasses.dataclass
class Guest:
    """What the agent knows of one running domain."""

    domain: str
    instance: guestlib.Instance
    decision: guestlib.Decision
    vm: str = None                  # its <pid>-<fd> name
    target: writer.Target = None
    problem: str = None             # why it is not (yet) as it should be
    stats: dict = None              # the last paging_stats read
    samples_seen: int = 0
    pending: list = None            # read_only: the writes it would make
    advisor: object = None          # advisory hosts: advisory.Advisor
    counters: object = None         # ... and its guest-only counters
    counters_ok: bool = None
    fault_stats: bool = None        # adaptive: its balloon counts faults


class Agent:
    def __init__(self, conf, generation, transport=None, domains=None,
                 lookup=None, publisher=None, read_only=False,
                 counters=None):
        ap = conf.adaptive_paging
        self.conf = conf
        self.root = ap.host_root
        self.transport = transport or transport_for(self.root, conf)
        self.default = ap.default_policy
        self.generation = generation
        self.thresholds = thresholdslib.HostThresholds(ap.profile_dirs,
                                                       generation)
        self.domains = domains or domainslib.Domains(
            ap.libvirt_uri, self.wake, conf.agent.libvirt_max_backoff)
        self.lookup = lookup
        self.publisher = publisher
        # read_only: look and report what would be written, write nothing
        # (``nova-paging host status``).
        self.read_only = read_only
        # Advisory mode: the cost model of this generation (MODELED) and
        # how a guest's counters are opened (from its QEMU pid).
        self.hw = costhw.for_generation(generation)
        self.counters = counters or counters_for(self.root)
        self.guests = {}                # domain name -> Guest
        self.errors = collections.Counter({k: 0 for k in health.KINDS})
        self.last_good_reconcile = None
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
        self._stop = threading.Event()
        self._said = {}                 # key -> message logged while true

    # -- logging a condition once while it lasts -------------------------
    def _fail(self, kind, key, message):
        self.errors[kind] += 1
        if self._said.get(key) != message:
            self._said[key] = message
            LOG.warning('%s', message)

    def _ok(self, key):
        if self._said.pop(key, None) is not None:
            LOG.info('%s: resolved', key)

    # -- the loop ----------------------------------------------------------
    def wake(self, reason):
        LOG.debug('woken: %s', reason)
        self._wake.set()

    def stop(self):
        self._stop.set()
        self._wake.set()

    def run(self):
        """Until :meth:`stop` (SIGTERM)."""
        interval = self.conf.agent.interval
        every = self.conf.agent.reconcile_interval
        due = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            try:
                if now >= due or self._wake.is_set():
                    self._wake.clear()
                    due = now + every
                    self.reconcile()
                self.sample()
            except Exception:
                # A bug, not a guest's or a service's doing: its traceback
                # goes to the log, and the next pass starts afresh.
                self.errors[health.INTERNAL] += 1
                LOG.exception('internal error; the agent carries on')
            self._wake.wait(max(0.0, min(interval, due - time.monotonic())))
        self.domains.close()

    # -- reconcile -------------------------------------------------------
    def reconcile(self):
        """One pass over the host and every running guest; returns True
        when nothing of the agent's own failed."""
        with self.lock:
            ok = self._host()
            try:
                found = self.domains.running()
            except domainslib.LibvirtUnavailable as exc:
                self._fail(health.LIBVIRT, 'libvirt', str(exc))
                return False
            self._ok('libvirt')
            seen = set()
            for dom in found:
                seen.add(dom.name)
                self._guest(dom)
            for name in set(self.guests) - seen:
                LOG.info('%s: gone', name)
                gone = self.guests.pop(name)
                if gone.counters is not None:
                    gone.counters.close()
                for key in [k for k in self._said if k[1:2] == (name,)]:
                    del self._said[key]
            if ok:
                self.last_good_reconcile = time.time()
            return ok

    def _host(self):
        ok = True
        if self.thresholds.refresh():
            for exc in self.thresholds.errors:
                self._fail(health.PROFILE, ('profile', exc.source), str(exc))
        self.abi_version = probe.abi_version(self.transport)
        if self.abi_version and not self.read_only:
            try:
                self.thresholds.push(self.transport)
                self._ok('thresholds')
            except OSError as exc:
                ok = False
                self._fail(health.THRESHOLDS, 'thresholds', '%s: writing the '
                           'thresholds of %s failed: %s' % (
                               thresholdslib.PARAM, self.generation,
                               exc.strerror or exc))
        if self.abi_version and not self.read_only:
            ok &= self._count_all_guests()
        self.caps = probe.detect(self.transport, self.generation,
                                 self.thresholds.calibrated)
        traits = self.caps.traits()
        if (self.publisher is not None and traits != self.published
                and not self.read_only):
            try:
                self.publisher(self.caps)
                self.published = traits
                self._ok('placement')
            except Exception as exc:     # any failure: retried next pass
                self._fail(health.PLACEMENT, 'placement', 'publishing traits '
                           '%s: %s' % (', '.join(sorted(traits)), exc))
        return ok

    def _count_all_guests(self):
        """Bring kvm's dsp_pmu_all to [adaptive_paging] count_all_guests;
        False if that failed."""
        want = self.conf.adaptive_paging.count_all_guests
        try:
            have = spec.parse_bool(self.transport.read(PMU_ALL))
            if have != want:
                self.transport.write(PMU_ALL, spec.format_bool(want))
                LOG.info('%s: %s written (count_all_guests)', PMU_ALL,
                         spec.format_bool(want).strip())
        except (OSError, spec.AbiFormatError) as exc:
            if not want and isinstance(exc, FileNotFoundError):
                return True         # no such parameter: nothing to unset
            self._fail(health.COUNTERS, 'count_all_guests',
                       '%s: cannot make it %s (count_all_guests): %s' % (
                           PMU_ALL, spec.format_bool(want).strip(),
                           getattr(exc, 'strerror', None) or exc))
            return False
        self._ok('count_all_guests')
        return True

    def _guest(self, dom):
        old = self.guests.get(dom.name)
        try:
            instance = guestlib.read_instance(dom.name, dom.uuid, dom.xml)
        except ET.ParseError as exc:
            self._fail(health.METADATA, ('metadata', dom.name),
                       '%s: domain XML not readable: %s' % (dom.name, exc))
            return
        decision = guestlib.decide(instance, self.default, self.lookup)
        g = Guest(dom.name, instance, decision,
                  stats=old.stats if old else None,
                  samples_seen=old.samples_seen if old else 0)
        self.guests[dom.name] = g
        if decision.policy is None:
            # The Nova API is down: one message for every guest waiting.
            g.problem = decision.problem
            self._fail(health.NOVA_API, 'nova-api', decision.problem)
        elif decision.problem:
            g.problem = decision.problem
            self._fail(health.POLICY, ('policy', dom.name), decision.problem)
        else:
            self._ok(('policy', dom.name))
        if decision.source == guestlib.FROM_NOVA_API and decision.policy:
            self._ok('nova-api')
        if self.caps.kvm and not self.caps.switching:
            if old is not None and old.advisor is not None:
                g.advisor, g.counters = old.advisor, old.counters
                g.counters_ok = old.counters_ok
            else:
                g.advisor = advisory.Advisor(self.thresholds.profile,
                                             self.hw)
            return                      # advisory: nothing to write
        if decision.policy is None or not self.caps.switching:
            return                      # nothing to apply (yet)
        try:
            g.vm = vmfiles.vm_for_domain(self.root, self.transport,
                                         dom.name)
        except (vmfiles.Refused, OSError) as exc:
            g.problem = str(exc)
            self._fail(health.VM, ('vm', dom.name), '%s: %s' % (dom.name, exc))
            return
        self._ok(('vm', dom.name))
        g.target = writer.target(decision.policy, self.thresholds.profiles,
                                 self.thresholds.profile)
        if g.target.problem:
            self._fail(health.POLICY, ('profile', dom.name), 'instance %s: %s'
                       % (instance.uuid, g.target.problem))
        vm = vmfiles.Vm(self.transport, g.vm)
        try:
            if self.read_only:
                g.pending = ['%s=%s' % w for w in writer.plan(vm, g.target)]
                return
            done = writer.apply(vm, g.target)
        except vmfiles.Refused as exc:
            g.problem = str(exc)
            self._fail(health.APPLY, ('apply', dom.name),
                       '%s (instance %s): %s' % (dom.name, instance.uuid, exc))
            return
        self._ok(('apply', dom.name))
        if done:
            LOG.info('%s (instance %s, policy %s from %s): %s', dom.name,
                     instance.uuid, g.target.policy, decision.source,
                     ', '.join(done))

    # -- sample ------------------------------------------------------------
    def sample(self):
        """One read of every managed guest (:mod:`.sampler`)."""
        sampler.sample(self)

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


def publisher_from_conf(conf):
    """Trait publication through ``[placement]``, or None when it has no
    credentials (a host whose traits another tool publishes)."""
    if not conf.placement.auth_type:
        return None
    import socket

    from nova_adaptive_paging.conf import placement as placement_conf
    from nova_adaptive_paging import placement

    names = ([conf.placement.compute_node_name]
             if conf.placement.compute_node_name
             else [socket.gethostname(), socket.getfqdn()])

    def publish(caps):
        placement.publish(placement_conf.adapter(conf), names, caps)
    return publish


def lookup_from_conf(conf):
    """Flavor extra specs through ``[nova]``, or None without
    credentials (guests with pre-32.0.0 metadata then get the default)."""
    if not conf.nova.auth_type:
        return None
    from nova_adaptive_paging.agent import nova_api
    from nova_adaptive_paging.conf import nova as nova_conf
    return nova_api.ServerFlavors(lambda: nova_conf.adapter(conf))


def from_conf(conf, generation):
    return Agent(conf, generation, lookup=lookup_from_conf(conf),
                 publisher=publisher_from_conf(conf))
