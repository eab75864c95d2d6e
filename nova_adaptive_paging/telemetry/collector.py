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

"""The agent's /metrics: what the kernel reported at the agent's last
pass, served from a snapshot.

One prometheus_client collector with three parts, node_exporter style:
``guests`` (each managed VM's ``paging_stats``, so a guest that has left
has no series), ``host`` (what this host is and the profile in force)
and ``agent`` (its health).  Each part reports its own success and
duration; one that fails leaves the others' series in the snapshot.

The agent's loop builds the snapshot after each pass (:func:`build`) and
a scrape serves the last complete one with its age: a long pass, a hung
call or a thousand new guests never hold a scrape, and the scrape thread
never touches the kernel, libvirt or the agent's lock.  The error counts
and the ages are read at scrape time.  Names, kinds, labels and help
come from :mod:`nova_adaptive_paging.telemetry.metrics`.
"""

import calendar
import datetime
import logging
import time

from prometheus_client import exposition
from prometheus_client.core import CounterMetricFamily
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.core import HistogramMetricFamily
from prometheus_client import registry

from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging.telemetry import metrics as M
from nova_adaptive_paging import vocabulary

LOG = logging.getLogger(__name__)


def family(metric):
    """An empty family of ``metric`` (a telemetry.metrics.Metric)."""
    # prometheus_client appends _total to counters itself.
    if metric.kind == M.COUNTER:
        return CounterMetricFamily(metric.name[:-len('_total')],
                                   metric.help, labels=metric.labels)
    if metric.kind == M.HISTOGRAM:
        return HistogramMetricFamily(metric.name, metric.help,
                                     labels=metric.labels)
    return GaugeMetricFamily(metric.name, metric.help, labels=metric.labels)


def _timestamp(obtained):
    """Unix time of a profile's ``obtained`` date (``YYYY-MM-DD``, or
    ``YYYY-MM`` for its first day, as the paper's profile gives it); None
    when it names no such date (the profile format leaves it free)."""
    text = str(obtained)
    for form, length in (('%Y-%m-%d', 10), ('%Y-%m', 7)):
        try:
            day = datetime.datetime.strptime(text[:length], form)
        except ValueError:
            continue
        return float(calendar.timegm(day.timetuple()))
    return None


# What each part can report, from the metric table: describe() lists
# them so that a registry can filter (``?name[]=``) without a scrape.
GUEST_METRICS = (M.GUEST_INFO, M.GUEST_MODE, M.SWITCHES, M.SWITCHES_REFUSED,
                 M.MODE_SECONDS, M.SWITCHING_SECONDS,
                 M.SHADOW_MAINTENANCE_SECONDS, M.HAP_WALK_SECONDS,
                 M.SHADOW_WALK_SECONDS, M.SAMPLES,
                 M.LAST_FTLB, M.LAST_FPF, M.LAST_PT, M.LAST_RULE,
                 M.LAST_CR3_LOADS, M.GUEST_FAULT_STATS, M.GUEST_FAULTS_CLAMPED,
                 M.GUEST_POLICY_NOT_HONOURED,
                 M.GUEST_COUNTERS, M.ADVISED_MODE,
                 M.MODELED_GAIN_SECONDS, M.MODELED_OTHER_MODE_GAIN,
                 M.ADVISED_SECONDS)
HOST_METRICS = (M.HOST_INFO, M.HOST_PAGING_MODE, M.PROFILE_INFO,
                M.PROFILE_MISSING,
                M.PROFILE_THRESHOLD, M.PROFILE_OBTAINED, M.CPU_HZ,
                M.SAMPLED_EVENTS, M.SAMPLED_FTLB, M.SAMPLED_FPF)
AGENT_METRICS = (M.ERRORS, M.LAST_RECONCILE, M.LAST_RECONCILE_AGE,
                 M.SNAPSHOT_AGE)
SCRAPE_METRICS = (M.SCRAPE_SUCCESS, M.SCRAPE_DURATION)
PARTS = ('guests', 'host', 'agent')


class Snapshot:
    """The families of one build, each part's (name, success, seconds),
    when it was taken (monotonic seconds) and the families rendered in
    Prometheus' text format (by the loop: a scrape only sends them)."""

    __slots__ = ('families', 'results', 'taken', 'text')

    def __init__(self, families, results, taken, render=False):
        self.families, self.results, self.taken = families, results, taken
        self.text = (exposition.generate_latest(_Families(families))
                     if render else None)


class _Families:
    """Families as prometheus_client renders a registry's."""

    def __init__(self, families):
        self.families = families

    def collect(self):
        return self.families


def build(agent, render=False):
    """A :class:`Snapshot` of ``agent`` now: called by the agent's loop
    after each pass, never by a scrape; ``render``: in the text format
    too (when /metrics is served)."""
    parts = Collector(agent)
    out, results = [], []
    for name, part in zip(PARTS, (parts._guests, parts._host,
                                  parts._agent)):
        t0 = time.perf_counter()
        try:
            fams = list(part())
            ok = 1.0
        except Exception as exc:        # a part's failure is its metric
            LOG.error('collector %s failed: %s', name, exc)
            fams, ok = [], 0.0
        out += fams
        results.append((name, ok, time.perf_counter() - t0))
    return Snapshot(tuple(out), tuple(results), time.monotonic(), render)


class Collector(registry.Collector):
    def __init__(self, agent):
        self.agent = agent

    def describe(self):
        return [family(m) for m in (GUEST_METRICS + (M.GUESTS,)
                                    + HOST_METRICS + AGENT_METRICS
                                    + SCRAPE_METRICS)]

    def collect(self):
        """The last snapshot (none before the agent's first pass: every
        part then reports failure), its age, and the error counts and
        the last good reconcile's age as they are now.  Takes no lock."""
        snap = self.agent.snapshot
        return (list(snap.families) if snap is not None else []) + \
            self._live(snap)

    def render(self):
        """What :meth:`collect` gives, in the text format: the
        snapshot's text as the loop rendered it, and the few families
        read now (a scrape of 1,000 guests renders none of theirs)."""
        snap = self.agent.snapshot
        if snap is None:
            text = b''
        elif snap.text is None:         # the loop renders none (no server)
            text = exposition.generate_latest(_Families(snap.families))
        else:
            text = snap.text
        return text + exposition.generate_latest(
            _Families(self._live(snap)))

    def _live(self, snap):
        agent = self.agent
        now = time.monotonic()
        success = family(M.SCRAPE_SUCCESS)
        duration = family(M.SCRAPE_DURATION)
        results = (snap.results if snap is not None
                   else [(name, 0.0, 0.0) for name in PARTS])
        for name, ok, seconds in results:
            success.add_metric([name], ok)
            duration.add_metric([name], seconds)
        out = []
        errors = family(M.ERRORS)
        for kind, n in sorted(dict(agent.errors).items()):
            errors.add_metric([kind], n)
        out.append(errors)
        if snap is not None:
            age = family(M.SNAPSHOT_AGE)
            age.add_metric([], now - snap.taken)
            out.append(age)
        last = agent.last_good_reconcile
        if last is not None:
            wall, mono = last
            stamp = family(M.LAST_RECONCILE)
            stamp.add_metric([], wall)
            since = family(M.LAST_RECONCILE_AGE)
            since.add_metric([], now - mono)
            out += [stamp, since]
        return out + [success, duration]

    # -- per guest ---------------------------------------------------------
    def _guests(self):
        agent = self.agent
        with agent.lock:
            guests = [(g.domain, g.instance, g.decision, g.vm,
                       (g.fault_stats, g.fault_feed and g.fault_feed.clamped),
                       g.counters_ok,
                       (g.advisor.mode, g.advisor.gain_s,
                        g.advisor.other_s, g.advisor.observed_s)
                       if g.advisor is not None and g.counters_ok else None,
                       g.honoured_here(agent.caps), g.set_here())
                      for g in agent.guests.values()]
            text = agent.caps is None or agent.caps.text_interface
        fams = {m.name: family(m) for m in GUEST_METRICS}
        hz = agent.cpu_hz
        policies = dict.fromkeys(vocabulary.POLICIES, 0)
        for (domain, inst, decision, vm, (fault_stats, clamped),
             counters_ok, advice, honoured, mode_set) in guests:
            uuid = inst.uuid
            policy = (decision.policy.paging.value if decision.policy
                      else '')
            if policy:
                policies[policy] += 1
            fams[M.GUEST_INFO.name].add_metric(
                [uuid, domain, inst.flavor, inst.project, policy,
                 decision.source, inst.project_id, inst.image], 1)
            if honoured is not None:
                fams[M.GUEST_POLICY_NOT_HONOURED.name].add_metric(
                    [uuid, policy], float(not honoured))
            if fault_stats is not None:
                fams[M.GUEST_FAULT_STATS.name].add_metric(
                    [uuid], float(fault_stats))
                fams[M.GUEST_FAULTS_CLAMPED.name].add_metric(
                    [uuid], float(clamped or 0))
            if counters_ok is not None:
                fams[M.GUEST_COUNTERS.name].add_metric(
                    [uuid], float(counters_ok))
            if advice is not None:
                for mode in vocabulary.MODES:
                    fams[M.ADVISED_MODE.name].add_metric(
                        [uuid, mode], float(advice[0] == mode))
                fams[M.MODELED_GAIN_SECONDS.name].add_metric([uuid],
                                                             advice[1])
                fams[M.MODELED_OTHER_MODE_GAIN.name].add_metric([uuid],
                                                                advice[2])
                fams[M.ADVISED_SECONDS.name].add_metric([uuid], advice[3])
            if vm is None:
                continue
            if not text:
                # The mechanism alone: no paging_stats, only the mode the
                # agent set, else as the vCPUs' statistics show it.
                try:
                    mode = mode_set or vmfiles.Vm(
                        agent.transport, vm, text_interface=False).mode()
                except Exception as exc:    # one guest's: the others stay
                    with agent.lock:
                        agent.guest_failed(domain, uuid, 'scrape', exc)
                    continue
                for m in vocabulary.MODES if mode else ():
                    fams[M.GUEST_MODE.name].add_metric([uuid, m],
                                                       float(mode == m))
                continue
            try:
                stats = vmfiles.Vm(agent.transport, vm).stats()
            except vmfiles.Refused:
                continue                # left between listing and reading
            except Exception as exc:    # one guest's: the others stay
                with agent.lock:
                    agent.guest_failed(domain, uuid, 'scrape', exc)
                continue
            for metric in (M.GUEST_MODE, M.SWITCHES, M.SWITCHES_REFUSED,
                           M.MODE_SECONDS, M.SWITCHING_SECONDS,
                           M.SHADOW_MAINTENANCE_SECONDS, M.SAMPLES,
                           M.LAST_FTLB, M.LAST_FPF, M.LAST_PT,
                           M.LAST_RULE, M.LAST_CR3_LOADS):
                fam = fams[metric.name]
                if metric is M.GUEST_MODE:
                    for mode in vocabulary.MODES:
                        fam.add_metric([uuid, mode],
                                       float(stats['mode'] == mode))
                elif isinstance(metric.source, dict):
                    for value, key in metric.source.items():
                        fam.add_metric([uuid, value],
                                       stats[key] * metric.scale)
                else:
                    fam.add_metric([uuid],
                                   stats[metric.source] * metric.scale)
            if hz:
                for metric in (M.HAP_WALK_SECONDS, M.SHADOW_WALK_SECONDS):
                    fams[metric.name].add_metric(
                        [uuid], stats[metric.source] / hz)
        count = family(M.GUESTS)
        for policy, n in policies.items():
            count.add_metric([policy], n)
        return list(fams.values()) + [count]

    # -- per host ----------------------------------------------------------
    def _host(self):
        agent = self.agent
        with agent.lock:
            caps = agent.caps
            profile = agent.thresholds.profile
            source = agent.thresholds.source
            hists = [(M.SAMPLED_FTLB, agent.ftlb), (M.SAMPLED_FPF,
                                                    agent.fpf)]
            events = {m: dict(c) for m, c in agent.events.counts.items()}
            hist_data = [(metric, h.bounds,
                          {m: list(c) for m, c in h.counts.items()},
                          dict(h.sums)) for metric, h in hists]
        info = family(M.HOST_INFO)
        info.add_metric([agent.generation, str(agent.abi_version),
                         str(bool(caps and caps.switching)).lower()], 1)
        prof = family(M.PROFILE_INFO)
        prof.add_metric([profile.generation, profile.provenance.method,
                         str(profile.provenance.obtained), source,
                         str(profile.history_samples),
                         str(profile.interval_s)], 1)
        missing = family(M.PROFILE_MISSING)
        missing.add_metric([], float(bool(agent.thresholds.missing)))
        out = [info, prof, missing]
        if (caps is not None and caps.kvm and not caps.switching
                and caps.pool):
            pool = family(M.HOST_PAGING_MODE)
            for mode in vocabulary.MODES:
                pool.add_metric([mode], float(mode == caps.host_mode))
            out.append(pool)
        limits = family(M.PROFILE_THRESHOLD)
        for name, value in profile.to_dict()['thresholds'].items():
            limits.add_metric([name], float(value))
        out.append(limits)
        obtained = _timestamp(profile.provenance.obtained)
        if obtained is not None:
            stamp = family(M.PROFILE_OBTAINED)
            stamp.add_metric([], obtained)
            out.append(stamp)
        if agent.cpu_hz:
            hz = family(M.CPU_HZ)
            hz.add_metric([], agent.cpu_hz)
            out.append(hz)
        ev = family(M.SAMPLED_EVENTS)
        for mode in vocabulary.MODES:
            for event in M.EVENTS:
                ev.add_metric([mode, event], events[mode][event])
        out.append(ev)
        for metric, bounds, counts, sums in hist_data:
            fam = family(metric)
            for mode in vocabulary.MODES:
                running, buckets = 0, []
                for bound, n in zip(bounds + (float('inf'),), counts[mode]):
                    running += n
                    buckets.append(('+Inf' if bound == float('inf')
                                    else repr(float(bound)), running))
                fam.add_metric([mode], buckets, sums[mode])
            out.append(fam)
        return out

    # -- the agent ---------------------------------------------------------
    def _agent(self):
        """Nothing yet: the agent's error counts and ages are read at
        scrape time (:meth:`collect`); a part of its own keeps its
        success and duration series."""
        return []
