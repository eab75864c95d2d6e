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

"""Sampling the managed guests: what the agent reads every
``[agent] interval`` seconds.

On a patched host, each VM's ``paging_stats`` (the histograms of sampled
FTLB and FPF, by the mode the sample ran in) and, for an adaptive guest,
its own page-fault count fed to the kernel; under ``decision = agent``,
each adaptive guest's own decision instead (:mod:`.decider`).  On a host
without the patch, each guest's advisory sample (:mod:`.advisory`).

Its inputs are narrow: the host's interface (:mod:`.host_state`), the
guest table, libvirt's domains (balloon statistics), the agent's
health, the sums the samples go to and advisory mode's means.
"""

import bisect
import dataclasses
import logging

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import domains as domainslib
from nova_adaptive_paging.agent import faults as faultslib
from nova_adaptive_paging.agent import health
from nova_adaptive_paging.host import perf
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import dsp
from nova_adaptive_paging import vocabulary

LOG = logging.getLogger(__name__)


class Histogram:
    """Cumulative bucket counts of one sampled metric, per mode."""

    def __init__(self, bounds):
        self.bounds = tuple(bounds)
        self.counts = {m: [0] * (len(bounds) + 1) for m in vocabulary.MODES}
        self.sums = {m: 0.0 for m in vocabulary.MODES}

    def observe(self, mode, value):
        self.counts[mode][bisect.bisect_left(self.bounds, value)] += 1
        self.sums[mode] += value


class EventCounts:
    """Cumulative events of the guests' samples, per mode: what the
    kernel's overhead counters are divided by to get per-event costs."""

    def __init__(self):
        self.counts = {m: dict.fromkeys(metrics.EVENTS, 0)
                       for m in vocabulary.MODES}

    def add(self, mode, stats, samples):
        # Samples taken between two reads are counted as the last one
        # (the kernel keeps only the last sample's counts).
        counts = self.counts[mode]
        for event, key in zip(metrics.EVENTS, SAMPLE_KEYS):
            counts[event] += stats[key] * samples


class Sums:
    """What the guests' samples add up to on this host: the FTLB and
    FPF histograms and the events, by the mode each sample ran in."""

    def __init__(self):
        self.ftlb = Histogram(metrics.FTLB_BUCKETS)
        self.fpf = Histogram(metrics.FPF_BUCKETS)
        self.events = EventCounts()


# paging_stats keys of the last sample's counts, in metrics.EVENTS order.
SAMPLE_KEYS = ('last_instructions', 'last_tlb_misses', 'last_page_faults')


def has_data(stats):
    """Whether the last sample of ``stats`` had data, by dsp's rule: a
    counter without a PMU (``pmu`` 0) or faults without a source count as
    missing.  The kernel reports a sample without data as all zeros,
    which is not an FTLB or FPF of 0: a guest under ``hap`` whose faults
    nobody feeds would otherwise fill the lowest buckets of every hap
    sample."""
    pmu = bool(stats['pmu'])
    return dsp.Sample.from_counts(
        stats['last_instructions'] if pmu else None,
        stats['last_tlb_misses'] if pmu else None,
        None if stats['pf_source'] == spec.PF_SOURCE_NONE
        else stats['last_page_faults']).valid


def sample(host, guests, domains, health_, sums, advice):
    """Read every managed VM's paging_stats once; feed ``sums`` with
    the samples taken since the last read, and an adaptive guest's own
    page-fault count to the kernel."""
    for g in list(guests.values()):
        try:
            _sample(host, domains, health_, sums, advice, g)
        except Exception as exc:        # one guest's fault is its own
            health_.guest_failed(g.domain, g.instance.uuid, 'sample', exc)


def _sample(host, domains, health_, sums, advice, g):
    if g.advisor is not None:
        _advise(host, domains, health_, advice, g)
    if g.vm is None:
        return
    text = host.caps is None or host.caps.text_interface
    vm = vmfiles.Vm(host.transport, g.vm, text_interface=text)
    if g.decider is not None and not host.read_only:
        _decide(host, domains, health_, advice, g, vm)
    if not text:
        return          # the mechanism alone: no fault feed, no stats
    if g.target is not None and not host.read_only and \
            g.target.policy == vocabulary.ADAPTIVE:
        _feed_faults(domains, health_, advice, g, vm)
    try:
        stats = vm.stats()
    except vmfiles.Refused:
        return                  # gone: the next reconcile sees it
    if g.stats is not None and stats['samples'] > g.samples_seen:
        # The last sample ran in the mode of the last read.
        mode = g.stats['mode']
        if has_data(stats):
            sums.ftlb.observe(mode, stats['last_ftlb'] / 1000)
            sums.fpf.observe(mode, stats['last_fpf'] / 1000)
        sums.events.add(mode, stats, stats['samples'] - g.samples_seen)
    g.stats, g.samples_seen = stats, stats['samples']


def _counts(host, domains, health_, advice, g):
    """The guest's cumulative (instructions, TLB misses, faults) from its
    guest-only counters and balloon statistics, or None (said)."""
    if g.counters is None:
        try:
            g.counters = advice.counters(
                vmfiles.domain_pid(host.root, g.domain))
        except (perf.Unavailable, vmfiles.Refused, OSError) as exc:
            g.counters_ok = False
            reason = getattr(exc, 'reason', None) or getattr(
                exc, 'strerror', None) or str(exc)
            health_.fail(health.COUNTERS, 'counters', 'no guest-only '
                         'counters (%s): advisory mode cannot say what '
                         'adaptive paging would do here, nor can the '
                         'agent decide (decision = agent)' % reason)
            return
    try:
        insns, tlb = g.counters.read()
        faults = domains.guest_faults(g.domain)
    except (OSError, domainslib.LibvirtUnavailable) as exc:
        g.counters_ok = False
        health_.fail(health.COUNTERS, ('counters', g.domain),
                     '%s: reading its counters: %s' % (g.domain, exc))
        return
    g.counters_ok = True
    g.fault_stats = faults is not None
    return insns, tlb, faults


def _advise(host, domains, health_, advice, g):
    """One advisory sample of a guest on a host that cannot switch."""
    counts = _counts(host, domains, health_, advice, g)
    if counts is not None:
        g.advisor.step(*counts)


def _decide(host, domains, health_, advice, g, vm):
    """One step of the agent's own decision (:mod:`.decider`), once a
    nominal interval: a switch it decides is written to the VM's
    paging_policy now."""
    d = g.decider
    if d.ruled_out or not d.due():
        return
    counts, blind = _decision_counts(host, domains, health_, advice, g)
    if blind:
        d.blind = blind
        health_.warn(('decide', g.domain), '%s (instance %s): the agent '
                     'cannot decide for it (%s); it runs at hap until it '
                     'can' % (g.domain, g.instance.uuid, blind))
        d.intervals.read(None, None, None)      # the next counts: a base
    else:
        if d.blind:
            d.blind = None
            d.runs_in(vocabulary.HAP)
            health_.ok(('decide', g.domain))
        d.step(*counts, memory_mib=g.instance.memory_mib)
    _set_mode(health_, g, d, vm)


def _decision_counts(host, domains, health_, advice, g):
    """(counts, None), or (None, why the agent cannot count the guest):
    the test hook's file, else its counters and its balloon fault count,
    bounded as the kernel's feed is."""
    if advice.samples is not None:
        try:
            return advice.samples.read(g.domain), None
        except (OSError, ValueError) as exc:
            return None, str(exc)
    counts = _counts(host, domains, health_, advice, g)
    if counts is None:
        return None, 'no guest-only counters'
    if counts[2] is None:
        return None, ('no page-fault count in its balloon statistics (no '
                      'virtio-balloon, or mem_stats_period_seconds = 0)')
    return counts[:2] + (_bounded_faults(advice, g, counts[2]),), None


def _bounded_faults(advice, g, faults):
    """The guest's reported fault count, as the cumulative count its
    FaultFeed bounds (one feed for the VM's life)."""
    if g.fault_feed is None:
        g.fault_feed = faultslib.FaultFeed(g.instance.vcpus)
    return g.fault_feed.update(faults, advice.clock())


def _set_mode(health_, g, d, vm):
    if not vm.text_interface:
        current = g.set_here()      # only the agent sets it there
    else:
        try:
            current = vm.word(spec.FILE_POLICY)
        except vmfiles.Refused:
            return              # gone: the next reconcile sees it
    if current == d.policy:
        return
    try:
        vm.set_mode(d.policy)
    except vmfiles.Refused as exc:
        if not vm.exists():
            return              # gone meanwhile
        # For good (said once, asked no more) or for now (asked again).
        for_good = d.refused(exc, vm.mode() if vm.text_interface
                             else g.set_here())
        health_.fail(health.APPLY, ('decide', g.domain), '%s (instance '
                     '%s): %s; %s' % (
                         g.domain, g.instance.uuid, exc,
                         'the agent keeps it at hap' if for_good else
                         'the agent asks again when it decides again'))
        return
    g.target = dataclasses.replace(g.target, policy=d.policy)
    g.mode_set = (g.vm, d.policy)
    LOG.info('%s (instance %s): the agent\'s decision switched it to %s '
             '(rule %s) through %s', g.domain, g.instance.uuid, d.policy,
             d.engine.last_rule.name, vmfiles.SET_MODE)


def _feed_faults(domains, health_, advice, g, vm):
    """The kernel counts a guest's faults itself only in shadow mode;
    a guest's balloon statistics count them in both."""
    try:
        faults = domains.guest_faults(g.domain)
    except domainslib.LibvirtUnavailable:
        faults = None
    g.fault_stats = faults is not None
    if faults is None:
        health_.fail(health.FAULTS, ('faults', g.domain),
                     '%s (instance %s): no page-fault count in its balloon '
                     'statistics (no virtio-balloon, or '
                     'mem_stats_period_seconds = 0); in hap mode its '
                     'samples have no fault rate' % (g.domain,
                                                     g.instance.uuid))
        return
    health_.ok(('faults', g.domain))
    fed = _bounded_faults(advice, g, faults)
    try:
        vm.write(spec.FILE_GUEST_FAULTS, str(fed),
                 'the guest\'s cumulative page-fault count, bounded')
    except vmfiles.Refused as exc:
        health_.fail(health.APPLY, ('faults-write', g.domain), str(exc))
