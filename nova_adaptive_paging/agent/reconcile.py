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

"""One reconcile pass: the host (thresholds, counting, capabilities,
traits), then every running guest brought to its policy.

A fault is confined to what it touches.  A guest whose handling raises
anything is counted (``errors_total{kind="guest"}``), logged once with
its instance's UUID, and the pass goes on with the next guest.  A host
interface that fails after start-up (its ABI file unreadable, say) is a
counted, logged condition: the capabilities last read stay in force and
no guest loses its series.

Its inputs are narrow (:mod:`.host_state`): the host's state, the guest
table, libvirt's domains, the agent's health, how policies are found,
what the operator asks of the host and advisory mode's means.
"""

import dataclasses
import logging
import time
import xml.etree.ElementTree as ET

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import capabilities
from nova_adaptive_paging.agent import advisory
from nova_adaptive_paging.agent import decider
from nova_adaptive_paging.agent import domains as domainslib
from nova_adaptive_paging.agent import guest as guestlib
from nova_adaptive_paging.agent import health
from nova_adaptive_paging.agent import thresholds as thresholdslib
from nova_adaptive_paging.agent import writer
from nova_adaptive_paging.host import probe
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging import pmu_events
from nova_adaptive_paging import vocabulary

LOG = logging.getLogger(__name__)
PMU_ALL = spec.param_path(spec.PARAM_PMU_ALL)
WALK_EVENTS = spec.param_path(spec.PARAM_WALK_EVENTS)


def reconcile(host, guests, domains, health_, policies, options, advice):
    """One pass over ``host`` and every running guest, kept in
    ``guests`` (domain name -> guest.Guest); the time of the pass
    (Unix, monotonic) when nothing of the agent's own failed, else None.
    """
    try:
        ok = _host(host, health_, options)
    except Exception as exc:            # the host as a whole: loud, counted
        ok = False
        health_.fail(health.HOST, 'host', 'the host interface failed '
                     '(%s: %s); the capabilities last read stay in force'
                     % (type(exc).__name__, exc))
        LOG.debug('host pass', exc_info=True)
    else:
        health_.ok('host')
    try:
        found = domains.running()
    except domainslib.LibvirtUnavailable as exc:
        health_.fail(health.LIBVIRT, 'libvirt', str(exc))
        return None
    health_.ok('libvirt')
    seen = set()
    for dom in found:
        seen.add(dom.name)
        try:
            _guest(host, guests, health_, policies, advice, options, dom)
        except Exception as exc:        # one guest's fault is its own
            health_.guest_failed(dom.name, dom.uuid, 'reconcile', exc)
        else:
            health_.ok(('guest', dom.name))
    for name in set(guests) - seen:
        LOG.info('%s: gone', name)
        _close_counters(guests.pop(name))
        health_.forget(name)
    return (time.time(), time.monotonic()) if ok else None


def _close_counters(g):
    if g.counters is not None:
        try:
            g.counters.close()
        except Exception:               # the daemon may be gone with it
            LOG.debug('closing counters of %s', g.domain, exc_info=True)
        g.counters = None


def _host(host, health_, options):
    ok = True
    thresholds = host.thresholds
    if thresholds.refresh():
        for exc in thresholds.errors:
            health_.fail(health.PROFILE, ('profile', exc.source),
                         exc.left_out(echo=False))
    if thresholds.missing:
        health_.warn('profile-missing', thresholds.missing)
    else:
        health_.ok('profile-missing')
    # strict: a file that reads garbage is a failed read (the host's
    # last capabilities stay), not a kernel without the patch.
    host.abi_version = probe.abi_version(host.transport, strict=True)
    if host.abi_version and not host.read_only:
        try:
            thresholds.push(host.transport)
            health_.ok('thresholds')
        except OSError as exc:
            ok = False
            health_.fail(health.THRESHOLDS, 'thresholds', '%s: writing the '
                         'thresholds of %s failed: %s' % (
                             thresholdslib.PARAM, host.generation,
                             exc.strerror or exc))
        ok &= _count_all_guests(host, health_, options)
        ok &= _walk_events(host, health_, options)

    failed = []

    def no_answer(exc):
        # A host that had the control keeps its capabilities (raised:
        # the pass fails and says so); one that had not stays without.
        if host.caps is not None and host.caps.mechanism:
            raise exc
        failed.append(exc)
        health_.warn('mechanism', 'asking %s for KVM_SET_PAGING_MODE '
                     '(KVM_CHECK_EXTENSION) failed: %s; taken as a kernel '
                     'without it' % (spec.KVM_DEV, exc))
    host.caps = probe.detect(host.transport, host.generation,
                             thresholds.calibrated, options.pool,
                             version=host.abi_version, on_error=no_answer)
    if not failed:
        health_.ok('mechanism')
    traits = host.caps.traits()
    if (options.publisher is not None and traits != host.published
            and not host.read_only):
        try:
            options.publisher(host.caps)
            host.published = traits
            health_.ok('placement')
        except Exception as exc:     # any failure: retried next pass
            health_.fail(health.PLACEMENT, 'placement', 'publishing traits '
                         '%s: %s' % (', '.join(sorted(traits)), exc))
    return ok


def _bring_param(host, health_, rel, want, needed, parse, fmt, key, why):
    """Bring the kvm parameter ``rel`` to ``want`` (``fmt`` writes it,
    ``parse`` reads it back); False if that failed.  A kernel without the
    parameter is no failure when ``want`` is not ``needed``: there is
    nothing to turn on.  ``key`` names the condition for health, ``why``
    says in the log where ``want`` comes from."""
    text = fmt(want).strip()
    try:
        if parse(host.transport.read(rel)) != want:
            host.transport.write(rel, fmt(want))
            LOG.info('%s: %s written (%s)', rel, text, why)
    except (OSError, spec.AbiFormatError) as exc:
        if not needed and isinstance(exc, FileNotFoundError):
            return True         # no such parameter: nothing to turn on
        health_.fail(health.COUNTERS, key, '%s: cannot make it %s (%s): %s'
                     % (rel, text, why,
                        getattr(exc, 'strerror', None) or exc))
        return False
    health_.ok(key)
    return True


def _count_all_guests(host, health_, options):
    """kvm's dsp_pmu_all from [adaptive_paging] count_all_guests."""
    want = options.count_all_guests
    return _bring_param(host, health_, PMU_ALL, want, want,
                        spec.parse_bool, spec.format_bool,
                        'count_all_guests', 'count_all_guests')


def _walk_events(host, health_, options):
    """kvm's dsp_walk_events: this generation's walk-cycle events (none
    where it has none, or count_walk_cycles is off)."""
    events = pmu_events.walk_events(host.generation)
    want = events.configs()
    if not options.count_walk_cycles:
        want = dict.fromkeys(want, 0)
    return _bring_param(host, health_, WALK_EVENTS, want,
                        any(want.values()), spec.parse_walk_events,
                        spec.format_walk_events, 'walk_events',
                        events.describe())


# -- one guest: its policy, then advice or the writes ---------------------
def _guest(host, guests, health_, policies, advice, options, dom):
    old = guests.get(dom.name)
    g = _decide(guests, health_, policies, dom, old)
    caps = host.caps
    if g is None or caps is None:
        return                          # unreadable, or the host never read
    _say_if_not_honoured(health_, g, caps)
    if caps.kvm and not caps.switching:
        _advise(host, advice, g, old, caps)
        return                          # advisory: nothing to write
    if g.decision.policy is None or not caps.switching:
        g.vm = g.target = None
        return                          # nothing to apply (yet)
    _apply(host, health_, advice, options, g)


def _decide(guests, health_, policies, dom, old):
    """The guest's entry in ``guests`` with its policy decided (None
    when its metadata cannot be read: it keeps its last entry)."""
    try:
        instance = guestlib.read_instance(dom.name, dom.uuid, dom.xml)
    except ET.ParseError as exc:
        health_.fail(health.METADATA, ('metadata', dom.name),
                     '%s: domain XML not readable: %s' % (dom.name, exc))
        return None
    decision = guestlib.decide(instance, policies.default, policies.lookup)
    g = guestlib.Guest(dom.name, instance, decision,
                       stats=old.stats if old else None,
                       samples_seen=old.samples_seen if old else 0)
    if old is not None:
        g.vm, g.target = old.vm, old.target   # until this pass says else
        # What was counted of the guest's VM: dropped in _apply if the
        # domain now runs another VM (a restart, a migration back).
        g.decider, g.fault_feed = old.decider, old.fault_feed
        g.counters, g.counters_ok = old.counters, old.counters_ok
        g.mode_set, g.last_vm = old.mode_set, old.last_vm
    guests[dom.name] = g
    if decision.policy is None:
        # The Nova API is down: one message for every guest waiting.
        g.problem = decision.problem
        health_.fail(health.NOVA_API, 'nova-api', decision.problem)
    elif decision.problem:
        g.problem = decision.problem
        health_.fail(health.POLICY, ('policy', dom.name), decision.problem)
    else:
        health_.ok(('policy', dom.name))
    if decision.source == guestlib.FROM_NOVA_API and decision.policy:
        health_.ok('nova-api')
    return g


def _say_if_not_honoured(health_, g, caps):
    if guestlib.honoured_here(g.decision, caps) is False:
        # Past the scheduler (a forced move): said, exported
        # (guest_policy_not_honoured), and the guest gets what this
        # host gives.
        health_.warn(('not-honoured', g.domain), '%s (instance %s): its '
                     'flavor asks %s=%s, which this host cannot give (it '
                     'lacks %s): it came past the scheduler (a forced live '
                     'migration or evacuation?)' % (
                         g.domain, g.instance.uuid, vocabulary.KEY_POLICY,
                         g.decision.policy.paging, ' and '.join(sorted(
                             capabilities.accepted_traits(
                                 g.decision.policy.paging)))))
    else:
        health_.ok(('not-honoured', g.domain))


def _advise(host, advice, g, old, caps):
    """Advisory mode: the guest's advisor, kept while the host's mode
    is."""
    g.vm = g.target = None
    if (old is not None and old.advisor is not None
            and old.advisor.host_mode == caps.host_mode):
        g.advisor, g.counters = old.advisor, old.counters
        g.counters_ok = old.counters_ok
    else:
        g.advisor = advisory.Advisor(host.thresholds.profile, advice.hw,
                                     advice.clock, caps.host_mode)


def _find_vm(host, health_, g):
    """The guest's VM, its target and what was counted of it: False
    (said) when its VM cannot be found."""
    name = g.domain
    # The VM found last, also across passes that found none: what was
    # counted of it is reset only when another VM is found.
    was = g.last_vm
    try:
        g.vm = vmfiles.vm_for_domain(host.root, host.transport, name,
                                     host.caps.text_interface)
    except (vmfiles.Refused, OSError) as exc:
        g.vm = g.target = None
        g.problem = str(exc)
        health_.fail(health.VM, ('vm', name), '%s: %s' % (name, exc))
        return False
    health_.ok(('vm', name))
    g.last_vm = g.vm
    if was is not None and g.vm != was:
        # Another VM under the same name: nothing counted of the last
        # one holds (its counters were on threads that are gone), nor is
        # its mode known.
        g.decider = g.fault_feed = None
        _close_counters(g)
    g.target = writer.target(g.decision.policy, host.thresholds.profiles,
                             host.thresholds.profile)
    if g.target.problem:
        health_.fail(health.POLICY, ('profile', name), 'instance %s: %s'
                     % (g.instance.uuid, g.target.problem))
    return True


def _apply_mechanism(host, health_, advice, g):
    """A kernel with the series' part 1 alone: the guest's mode is set
    with KVM_SET_PAGING_MODE, the one control there is, and an adaptive
    guest's is its :class:`~.decider.Decider`'s, whatever ``decision``
    says: there is no engine in that kernel to hand it to.  The agent
    sets a VM's mode when it first sees the VM (the ioctl does nothing
    to a VM already in that mode) and when the mode changes; a VM's
    threshold override (``hw:paging_profile``, ``hw:paging_interval``) is
    its decider's set.  The record of what it set is per VM: a domain
    that runs a new VM (restarted, or back from a migration) is set
    anew."""
    name, uuid = g.domain, g.instance.uuid
    vm = vmfiles.Vm(host.transport, g.vm, text_interface=False)
    known = g.set_here()
    if g.target.policy == vocabulary.ADAPTIVE:
        ruleset = decider.settings(g.target, host.thresholds.profile)
        if g.decider is None:
            # Where the VM runs now, as its vCPUs' statistics say.
            g.decider = decider.Decider(ruleset, advice.clock,
                                        known or vm.mode()
                                        or vocabulary.HAP)
        else:
            g.decider.retune(ruleset)
        g.target = dataclasses.replace(g.target, policy=g.decider.policy)
    elif g.decider is not None:
        g.decider = None
        _close_counters(g)
    mode = g.target.policy
    if known == mode and vm.mode() in (None, mode):
        return              # set, and the vCPUs do not say otherwise
    if host.read_only:
        # A status read: what the vCPUs run in, not a record it has not.
        if vm.mode() != mode:
            g.pending = ['%s=%s' % (vmfiles.SET_MODE, mode)]
        return
    try:
        vm.set_mode(mode)
    except vmfiles.Refused as exc:
        g.problem = str(exc)
        health_.fail(health.APPLY, ('apply', name),
                     '%s (instance %s): %s' % (name, uuid, exc))
        if g.decider is not None:
            g.decider.refused(exc, known)
        return
    health_.ok(('apply', name))
    g.mode_set = (g.vm, mode)
    if known != mode:
        # Not again for a VM whose vCPUs all have paging off (a reboot),
        # which run at TDP while it is in shadow mode.
        LOG.info('%s (instance %s, policy %s from %s): %s=%s', name, uuid,
                 g.decision.policy.paging.value, g.decision.source,
                 vmfiles.SET_MODE, mode)


def _apply(host, health_, advice, options, g):
    """Bring the guest's VM to its policy (or, read-only, say what that
    would write).  An adaptive guest whose decision is the agent's gets
    the mode its :class:`~.decider.Decider` chose."""
    if not _find_vm(host, health_, g):
        return
    if not host.caps.text_interface:
        _apply_mechanism(host, health_, advice, g)
        return
    name, uuid = g.domain, g.instance.uuid
    vm = vmfiles.Vm(host.transport, g.vm)
    if (options.decision == vocabulary.DECIDED_BY_AGENT
            and g.target.policy == vocabulary.ADAPTIVE):
        ruleset = decider.settings(g.target, host.thresholds.profile)
        try:
            if g.decider is None:
                g.decider = decider.Decider(ruleset, advice.clock,
                                            vm.word(spec.FILE_MODE))
            else:
                g.decider.retune(ruleset)
        except vmfiles.Refused as exc:
            g.problem = str(exc)
            health_.fail(health.VM, ('vm', name), '%s: %s' % (name, exc))
            return
        g.target = dataclasses.replace(g.target, policy=g.decider.policy)
    elif g.decider is not None:
        g.decider = None
        _close_counters(g)
    try:
        if host.read_only:
            g.pending = ['%s=%s' % w for w in writer.plan(
                vm, g.target, by_mode=g.decider is not None)]
            return
        done = writer.apply(vm, g.target, by_mode=g.decider is not None)
    except vmfiles.Refused as exc:
        g.problem = str(exc)
        health_.fail(health.APPLY, ('apply', name),
                     '%s (instance %s): %s' % (name, uuid, exc))
        if g.decider is not None:
            g.decider.refused(exc, vm.mode())
        return
    health_.ok(('apply', name))
    if done:
        LOG.info('%s (instance %s, policy %s from %s): %s', name, uuid,
                 g.target.policy, g.decision.source, ', '.join(done))
