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

"""A kernel with the series' part 1 alone: the mechanism and its one
control, KVM_SET_PAGING_MODE, with no text interface (no
paging_switch_abi, no per-VM files) and no in-kernel engine.  The agent
finds the control with KVM_CHECK_EXTENSION, offers the host to placement
as one that switches, sets each guest's mode itself and decides for the
adaptive ones, whatever ``decision`` says.  The simulated host's kernel
is the interface's reference model with its text interface taken away
(``HostModel.text_interface``); the guests' counters are their traces'
(no machine here has a PMU)."""

import errno
import sys

import prometheus_client
import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.host import privileged
from nova_adaptive_paging.host import probe
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import vocabulary
from tests.unit.agent_support import TraceCounters
from tests.unit.agent_support import agent_for
from tests.unit.agent_support import follow_the_engine
from tests.unit.agent_support import run
from tests.unit.agent_support import start

if 'eventlet.patcher' in sys.modules and \
        sys.modules['eventlet.patcher'].is_monkey_patched('thread'):
    raise RuntimeError('%s needs real threads: run it in a pytest process '
                       'of its own, as tox.ini does' % __name__)


@pytest.fixture
def part1(sim):
    """The simulated host's kernel with the series' part 1 alone."""
    sim.model.text_interface = False
    return sim


def mode_of(sim, name):
    return sim.model.vms[sim.vms[name].dirname].mode


def test_the_host_is_found_by_its_control_and_offered_to_placement(part1):
    agent = agent_for(part1)
    agent.reconcile()
    caps = agent.caps
    assert (caps.abi_version, caps.mechanism) == (0, True)
    assert caps.switching and not caps.text_interface
    assert vocabulary.TRAIT_SWITCHING in caps.traits()
    assert caps.modes == set(vocabulary.Paging)
    # Nothing to push: no thresholds parameter, no fault-count files.
    assert agent.transport.writes == []
    assert agent.errors['host'] == 0


def test_a_stock_kernel_is_not_taken_for_one(sim):
    agent = agent_for(sim)
    agent.transport = simfleet.StockTransport(agent.transport)
    agent.reconcile()
    assert not agent.caps.mechanism and not agent.caps.switching


def test_this_machines_kvm_answers_for_itself():
    """The real KVM_CHECK_EXTENSION on this machine's /dev/kvm: no kernel
    here has the series (PVM's, or none at all), so the answer is no, and
    a missing /dev/kvm is no control either, not an error."""
    assert probe.mechanism('/') is False


def test_fixed_policies_are_set_with_the_ioctl_once(part1):
    start(part1, 'fixed', {'hw:paging': 'shadow'})
    start(part1, 'plain', {})
    agent = agent_for(part1)
    agent.reconcile()
    agent.reconcile()
    assert mode_of(part1, 'fixed') == vocabulary.SHADOW
    assert mode_of(part1, 'plain') == vocabulary.HAP
    # One KVM_SET_PAGING_MODE each, on the first pass; no file written.
    assert sorted(agent.transport.writes) == sorted([
        (spec.vm_path(part1.vms['fixed'].dirname, vmfiles.SET_MODE),
         vocabulary.SHADOW),
        (spec.vm_path(part1.vms['plain'].dirname, vmfiles.SET_MODE),
         vocabulary.HAP)])
    # Each guest's mode is exported as its VM's vCPU shows it.
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    for name, mode in (('fixed', vocabulary.SHADOW),
                       ('plain', vocabulary.HAP)):
        uuid = part1.vms[name].spec.uuid
        for m in vocabulary.MODES:
            assert registry.get_sample_value(
                metrics.GUEST_MODE.name, {'uuid': uuid, 'mode': m}) == \
                float(m == mode)


def test_adaptive_guests_are_the_agents_decision(part1):
    start(part1, 'tlb', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault',
          guest_faults=False, balloon=True)
    agent = agent_for(part1, counters=lambda pid: TraceCounters(part1, pid))
    agent.domains = simfleet.SimBalloon(agent.domains, part1)
    # decision stays at its default, kernel: there is no kernel engine.
    assert agent.conf.adaptive_paging.decision == \
        vocabulary.DECIDED_BY_KERNEL
    agent.reconcile()
    vm = part1.vms['tlb']

    def each(mode):
        assert mode_of(part1, 'tlb') == mode
    decided = follow_the_engine(part1, agent, 'tlb', each)
    assert set(decided) == set(vocabulary.MODES)      # both phases
    changes = sum(a != b for a, b in zip(['hap'] + decided, decided))
    stats = part1.model.vms[vm.dirname].stats
    assert stats['switches_to_shadow'] + stats['switches_to_hap'] == changes
    assert agent.guests['tlb'].decider.switches == changes
    # Every write was the ioctl: the first pass's hap, then each change.
    writes = agent.transport.writes
    assert {rel for rel, _ in writes} == {
        spec.vm_path(vm.dirname, vmfiles.SET_MODE)}
    assert len(writes) == changes + 1


def test_a_guest_ruled_out_of_shadow_runs_at_hap_and_is_asked_no_more(
        part1, tmp_path):
    start(part1, 'g', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault',
          can_shadow=False)
    agent = agent_for(part1)
    agent.conf.set_override('decision_samples_dir', str(tmp_path),
                            'adaptive_paging')
    try:
        agent.reconcile()
        profile = profiles.builtin()
        insns = tlb = 0
        for _ in range(2 * profile.history_samples + 6):
            insns += 10 ** 9
            tlb += 10 ** 8
            (tmp_path / 'g').write_text('%d %d 0\n' % (insns, tlb))
            run(part1, profile.interval_s)
            agent.sample()
            agent.reconcile()
    finally:
        agent.conf.clear_override('decision_samples_dir', 'adaptive_paging')
    assert mode_of(part1, 'g') == vocabulary.HAP
    shadow = [m for _, m in agent.transport.writes if m == vocabulary.SHADOW]
    assert len(shadow) == 1             # refused once, for the VM's life
    assert agent.guests['g'].decider.ruled_out
    assert agent.errors['apply'] == 1


def test_a_refusal_for_now_is_asked_again(part1, tmp_path):
    start(part1, 'g', {'hw:paging': 'shadow'})
    agent = agent_for(part1)
    set_mode = agent.transport.set_mode
    failures = [errno.ENOMEM]

    def failing(vm, mode):
        if failures:
            raise OSError(failures.pop(0), 'for now', vm)
        return set_mode(vm, mode)
    agent.transport.set_mode = failing
    agent.reconcile()
    assert mode_of(part1, 'g') == vocabulary.HAP
    agent.reconcile()
    assert mode_of(part1, 'g') == vocabulary.SHADOW
    assert agent.errors['apply'] == 1


def test_the_privsep_daemon_reads_the_vcpu_statistic_and_writes_it_not():
    rel = spec.vm_path('1234-12', spec.VCPU0_SHADOW)
    privileged.check_path(rel)
    with pytest.raises(PermissionError):
        privileged.check_path(rel, write=True)
    with pytest.raises(PermissionError):
        privileged.check_path(spec.vm_path('1234-12', 'vcpu1/anything'))
