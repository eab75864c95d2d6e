"""One reconcile pass: the host (thresholds, counting, capabilities,
traits), then every running guest brought to its policy.

A fault is confined to what it touches.  A guest whose handling raises
anything is counted (``errors_total{kind="guest"}``), logged once with
its instance's UUID, and the pass goes on with the next guest.  A host
interface that fails after start-up (its ABI file unreadable, say) is a
counted, logged condition: the capabilities last read stay in force and
no guest loses its series.
"""

import logging
import time
import xml.etree.ElementTree as ET

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import capabilities
from nova_adaptive_paging.agent import advisory
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


def reconcile(agent):
    """One pass over the host and every running guest; True when nothing
    of the agent's own failed."""
    with agent.lock:
        try:
            ok = _host(agent)
        except Exception as exc:        # the host as a whole: loud, counted
            ok = False
            agent.fail(health.HOST, 'host', 'the host interface failed '
                       '(%s: %s); the capabilities last read stay in force'
                       % (type(exc).__name__, exc))
            LOG.debug('host pass', exc_info=True)
        else:
            agent.ok('host')
        try:
            found = agent.domains.running()
        except domainslib.LibvirtUnavailable as exc:
            agent.fail(health.LIBVIRT, 'libvirt', str(exc))
            return False
        agent.ok('libvirt')
        seen = set()
        for dom in found:
            seen.add(dom.name)
            try:
                _guest(agent, dom)
            except Exception as exc:    # one guest's fault is its own
                agent.guest_failed(dom.name, dom.uuid, 'reconcile', exc)
            else:
                agent.ok(('guest', dom.name))
        for name in set(agent.guests) - seen:
            LOG.info('%s: gone', name)
            gone = agent.guests.pop(name)
            if gone.counters is not None:
                try:
                    gone.counters.close()
                except Exception:       # the daemon may be gone with it
                    LOG.debug('closing counters of %s', name, exc_info=True)
            agent.forget(name)
        if ok:
            agent.last_good_reconcile = (time.time(), time.monotonic())
        return ok


def _host(agent):
    ok = True
    if agent.thresholds.refresh():
        for exc in agent.thresholds.errors:
            agent.fail(health.PROFILE, ('profile', exc.source),
                       exc.left_out(echo=False))
    if agent.thresholds.missing:
        agent.warn('profile-missing', agent.thresholds.missing)
    else:
        agent.ok('profile-missing')
    # strict: a file that reads garbage is a failed read (the host's
    # last capabilities stay), not a kernel without the patch.
    agent.abi_version = probe.abi_version(agent.transport, strict=True)
    if agent.abi_version and not agent.read_only:
        try:
            agent.thresholds.push(agent.transport)
            agent.ok('thresholds')
        except OSError as exc:
            ok = False
            agent.fail(health.THRESHOLDS, 'thresholds', '%s: writing the '
                       'thresholds of %s failed: %s' % (
                           thresholdslib.PARAM, agent.generation,
                           exc.strerror or exc))
    if agent.abi_version and not agent.read_only:
        ok &= _count_all_guests(agent)
        ok &= _walk_events(agent)
    agent.caps = probe.detect(agent.transport, agent.generation,
                              agent.thresholds.calibrated,
                              agent.conf.adaptive_paging.pool,
                              version=agent.abi_version)
    traits = agent.caps.traits()
    if (agent.publisher is not None and traits != agent.published
            and not agent.read_only):
        try:
            agent.publisher(agent.caps)
            agent.published = traits
            agent.ok('placement')
        except Exception as exc:     # any failure: retried next pass
            agent.fail(health.PLACEMENT, 'placement', 'publishing traits '
                       '%s: %s' % (', '.join(sorted(traits)), exc))
    return ok


def _bring_param(agent, rel, want, needed, parse, fmt, key, why):
    """Bring the kvm parameter ``rel`` to ``want`` (``fmt`` writes it,
    ``parse`` reads it back); False if that failed.  A kernel without the
    parameter is no failure when ``want`` is not ``needed``: there is
    nothing to turn on.  ``key`` names the condition for health, ``why``
    says in the log where ``want`` comes from."""
    text = fmt(want).strip()
    try:
        if parse(agent.transport.read(rel)) != want:
            agent.transport.write(rel, fmt(want))
            LOG.info('%s: %s written (%s)', rel, text, why)
    except (OSError, spec.AbiFormatError) as exc:
        if not needed and isinstance(exc, FileNotFoundError):
            return True         # no such parameter: nothing to turn on
        agent.fail(health.COUNTERS, key, '%s: cannot make it %s (%s): %s' % (
            rel, text, why, getattr(exc, 'strerror', None) or exc))
        return False
    agent.ok(key)
    return True


def _count_all_guests(agent):
    """kvm's dsp_pmu_all from [adaptive_paging] count_all_guests."""
    want = agent.conf.adaptive_paging.count_all_guests
    return _bring_param(agent, PMU_ALL, want, want, spec.parse_bool,
                        spec.format_bool, 'count_all_guests',
                        'count_all_guests')


def _walk_events(agent):
    """kvm's dsp_walk_events: this generation's walk-cycle events (none
    where it has none, or count_walk_cycles is off)."""
    events = pmu_events.walk_events(agent.generation)
    want = events.configs()
    if not agent.conf.adaptive_paging.count_walk_cycles:
        want = dict.fromkeys(want, 0)
    return _bring_param(agent, WALK_EVENTS, want, any(want.values()),
                        spec.parse_walk_events, spec.format_walk_events,
                        'walk_events', events.describe())


def _guest(agent, dom):
    old = agent.guests.get(dom.name)
    try:
        instance = guestlib.read_instance(dom.name, dom.uuid, dom.xml)
    except ET.ParseError as exc:
        agent.fail(health.METADATA, ('metadata', dom.name),
                   '%s: domain XML not readable: %s' % (dom.name, exc))
        return
    decision = guestlib.decide(instance, agent.default, agent.lookup)
    g = guestlib.Guest(dom.name, instance, decision,
                       stats=old.stats if old else None,
                       samples_seen=old.samples_seen if old else 0)
    if old is not None:
        g.vm, g.target = old.vm, old.target   # until this pass says else
    agent.guests[dom.name] = g
    if decision.policy is None:
        # The Nova API is down: one message for every guest waiting.
        g.problem = decision.problem
        agent.fail(health.NOVA_API, 'nova-api', decision.problem)
    elif decision.problem:
        g.problem = decision.problem
        agent.fail(health.POLICY, ('policy', dom.name), decision.problem)
    else:
        agent.ok(('policy', dom.name))
    if decision.source == guestlib.FROM_NOVA_API and decision.policy:
        agent.ok('nova-api')
    caps = agent.caps
    if caps is None:
        return                          # the host was never read
    if guestlib.honoured_here(decision, caps) is False:
        # Past the scheduler (a forced move): said, exported
        # (guest_policy_not_honoured), and the guest gets what this
        # host gives, as below.
        agent.warn(('not-honoured', dom.name), '%s (instance %s): its '
                   'flavor asks %s=%s, which this host cannot give (it '
                   'lacks %s): it came past the scheduler (a forced live '
                   'migration or evacuation?)' % (
                       dom.name, instance.uuid, vocabulary.KEY_POLICY,
                       decision.policy.paging, ' and '.join(sorted(
                           capabilities.accepted_traits(
                               decision.policy.paging)))))
    else:
        agent.ok(('not-honoured', dom.name))
    if caps.kvm and not caps.switching:
        g.vm = g.target = None
        if (old is not None and old.advisor is not None
                and old.advisor.host_mode == caps.host_mode):
            g.advisor, g.counters = old.advisor, old.counters
            g.counters_ok = old.counters_ok
        else:
            g.advisor = advisory.Advisor(agent.thresholds.profile,
                                         agent.hw, agent.monotonic,
                                         caps.host_mode)
        return                          # advisory: nothing to write
    if decision.policy is None or not caps.switching:
        g.vm = g.target = None
        return                          # nothing to apply (yet)
    try:
        g.vm = vmfiles.vm_for_domain(agent.root, agent.transport, dom.name)
    except (vmfiles.Refused, OSError) as exc:
        g.vm = g.target = None
        g.problem = str(exc)
        agent.fail(health.VM, ('vm', dom.name), '%s: %s' % (dom.name, exc))
        return
    agent.ok(('vm', dom.name))
    g.target = writer.target(decision.policy, agent.thresholds.profiles,
                             agent.thresholds.profile)
    if g.target.problem:
        agent.fail(health.POLICY, ('profile', dom.name), 'instance %s: %s'
                   % (instance.uuid, g.target.problem))
    vm = vmfiles.Vm(agent.transport, g.vm)
    try:
        if agent.read_only:
            g.pending = ['%s=%s' % w for w in writer.plan(vm, g.target)]
            return
        done = writer.apply(vm, g.target)
    except vmfiles.Refused as exc:
        g.problem = str(exc)
        agent.fail(health.APPLY, ('apply', dom.name),
                   '%s (instance %s): %s' % (dom.name, instance.uuid, exc))
        return
    agent.ok(('apply', dom.name))
    if done:
        LOG.info('%s (instance %s, policy %s from %s): %s', dom.name,
                 instance.uuid, g.target.policy, decision.source,
                 ', '.join(done))
