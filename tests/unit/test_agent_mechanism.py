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
import os
import sys

import prometheus_client
import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.host import files
from nova_adaptive_paging.host import privileged
from nova_adaptive_paging.host import probe
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging.host import vmfd
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import vocabulary
from tests.unit.agent_support import TraceCounters
from tests.unit.agent_support import agent_for
from tests.unit.agent_support import follow_the_engine
from tests.unit.agent_support import start
from tests.unit.agent_support import tlb_bound

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
    a missing /dev/kvm is no control either, not an error.  A /dev/kvm
    this user may not open is an error (the agent's caller decides)."""
    try:
        assert probe.mechanism('/') is False
    except PermissionError:
        assert not os.access('/dev/kvm', os.R_OK | os.W_OK)


def test_a_vm_with_a_vcpu_whose_guest_has_paging_off_is_read_as_shadow(
        part1):
    """An AP never started (or a vCPU kept after a hot-unplug) runs at
    TDP whatever the VM's mode: a restarted agent still takes the VM for
    one in shadow mode, and does not send it to hap."""
    start(part1, 'g', {'hw:paging': 'adaptive'})
    vm = part1.model.vms[part1.vms['g'].dirname]
    vm.vcpus, vm.vcpus_paging_off = 4, 1
    part1.model.set_mode(part1.vms['g'].dirname, vocabulary.SHADOW)
    agent = agent_for(part1)
    agent.reconcile()
    assert agent.guests['g'].decider.policy == vocabulary.SHADOW
    assert mode_of(part1, 'g') == vocabulary.SHADOW
    assert [m for _, m in agent.transport.writes] == [vocabulary.SHADOW]


def test_a_vm_the_kernel_took_back_to_tdp_is_asked_again_and_said(part1):
    """The kernel takes a VM in shadow mode back to TDP for good when it
    becomes one that cannot run there (a vCPU with PKU, nested guests):
    the vCPUs say hap where the agent set shadow, so it sets shadow
    again, and the refusal is said and counted."""
    start(part1, 'g', {'hw:paging': 'shadow'})
    agent = agent_for(part1)
    agent.reconcile()
    assert mode_of(part1, 'g') == vocabulary.SHADOW
    part1.model.vms[part1.vms['g'].dirname].forbid_shadow()
    agent.reconcile()
    assert mode_of(part1, 'g') == vocabulary.HAP
    assert agent.errors['apply'] == 1
    assert agent.guests['g'].problem


def test_a_stock_host_whose_dev_kvm_cannot_be_asked_still_advises(sim):
    agent = agent_for(sim)
    agent.transport = simfleet.StockTransport(agent.transport)

    def denied():
        raise PermissionError(errno.EACCES, 'Permission denied', 'dev/kvm')
    agent.transport.paging_mode_cap = denied
    agent.reconcile()
    assert agent.caps is not None and agent.caps.kvm
    assert not agent.caps.mechanism and not agent.caps.switching
    assert agent.errors['host'] == 0


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
        tlb_bound(tmp_path, 'g', part1, agent,
                  2 * profiles.builtin().history_samples + 6, reconcile=True)
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


def test_the_privsep_daemon_reads_only_the_statistics_of_a_guests_vm(
        tmp_path):
    """The daemon's vcpus_in_shadow takes a VM name of a libvirt guest's
    QEMU only (no pid file names 1234 under this root)."""
    for name in ('1234-12', '../1234-12', 'vcpu0'):
        with pytest.raises(PermissionError):
            privileged.check_vm(name, root=str(tmp_path))


def test_an_agent_started_anew_keeps_a_guest_where_its_vcpus_run(
        part1, tmp_path):
    """A restarted agent has no record: it takes an adaptive guest's mode
    from its vCPUs' statistics and does not send it back to hap."""
    start(part1, 'g', {'hw:paging': 'adaptive'})
    part1.model.set_mode(part1.vms['g'].dirname, vocabulary.SHADOW)
    agent = agent_for(part1)
    agent.reconcile()
    assert agent.guests['g'].decider.policy == vocabulary.SHADOW
    assert mode_of(part1, 'g') == vocabulary.SHADOW
    assert agent.transport.writes == [
        (spec.vm_path(part1.vms['g'].dirname, vmfiles.SET_MODE),
         vocabulary.SHADOW)]


def test_a_new_vm_under_the_same_name_is_set_anew(part1, monkeypatch):
    """The record of what the agent set is the VM's, not the domain's: a
    domain restarted while a pass could not see its VM is set again."""
    start(part1, 'g', {'hw:paging': 'shadow'})
    agent = agent_for(part1)
    agent.reconcile()
    assert mode_of(part1, 'g') == vocabulary.SHADOW
    # A pass that finds no VM for the domain (its pid file unreadable).
    real = vmfiles.vm_for_domain

    def missing(*args, **kw):
        raise vmfiles.Refused('run/libvirt/qemu/g.pid', 'missing', 'a pid')
    monkeypatch.setattr(vmfiles, 'vm_for_domain', missing)
    agent.reconcile()
    assert agent.guests['g'].vm is None
    part1.stop_vm('g')
    start(part1, 'g', {'hw:paging': 'shadow'})
    monkeypatch.setattr(vmfiles, 'vm_for_domain', real)
    agent.reconcile()
    assert mode_of(part1, 'g') == vocabulary.SHADOW


def test_what_was_counted_of_a_vm_goes_with_it_across_a_blind_pass(
        part1, monkeypatch):
    """A domain restarted while a pass could not find its VM gets a new
    decision: the old one's engine, counted on threads that are gone,
    does not carry over to the new VM."""
    start(part1, 'g', {'hw:paging': 'adaptive'})
    agent = agent_for(part1)
    agent.reconcile()
    old = agent.guests['g'].decider
    assert old is not None
    real = vmfiles.vm_for_domain

    def missing(*args, **kw):
        raise vmfiles.Refused('run/libvirt/qemu/g.pid', 'missing', 'a pid')
    monkeypatch.setattr(vmfiles, 'vm_for_domain', missing)
    agent.reconcile()
    part1.stop_vm('g')
    start(part1, 'g', {'hw:paging': 'adaptive'})
    monkeypatch.setattr(vmfiles, 'vm_for_domain', real)
    agent.reconcile()
    assert agent.guests['g'].decider is not old


def test_status_reads_where_the_vcpus_run_and_writes_nothing(part1):
    start(part1, 'there', {'hw:paging': 'shadow'})
    start(part1, 'not-yet', {'hw:paging': 'shadow'})
    part1.model.set_mode(part1.vms['there'].dirname, vocabulary.SHADOW)
    agent = agent_for(part1, read_only=True)
    agent.reconcile()
    assert agent.transport.writes == []
    assert not agent.guests['there'].pending
    assert agent.guests['not-yet'].pending == [
        '%s=%s' % (vmfiles.SET_MODE, vocabulary.SHADOW)]
    assert mode_of(part1, 'not-yet') == vocabulary.HAP


def test_a_refusal_is_said_even_where_a_vm_cannot_be_looked_at(
        part1, tmp_path):
    """An unprivileged agent sees no VM directory of its own (debugfs is
    root's): whether a VM that refused is still there comes from the
    daemon's listing, so the refusal is said and the VM ruled out."""
    start(part1, 'g', {'hw:paging': 'adaptive'}, can_shadow=False)
    agent = agent_for(part1)
    agent.transport.exists = lambda rel: False
    agent.conf.set_override('decision_samples_dir', str(tmp_path),
                            'adaptive_paging')
    try:
        agent.reconcile()
        tlb_bound(tmp_path, 'g', part1, agent,
                  profiles.builtin().history_samples + 4)
    finally:
        agent.conf.clear_override('decision_samples_dir', 'adaptive_paging')
    assert agent.guests['g'].decider.ruled_out
    assert agent.errors['apply'] == 1


def test_a_text_interface_of_another_version_is_driven_in_no_way(part1):
    """A kernel whose text interface this package does not know may have
    changed its part 1 too: the agent drives neither."""
    part1.model.text_interface = True
    start(part1, 'g', {'hw:paging': 'shadow'})
    agent = agent_for(part1)
    real = agent.transport.model.read
    agent.transport.read = lambda rel: (
        '%d\n' % (spec.ABI_VERSION + 1) if rel.endswith(spec.PARAM_ABI)
        else real(rel))
    agent.reconcile()
    assert not agent.caps.mechanism and not agent.caps.switching
    assert agent.transport.writes == []


def test_a_passing_failure_of_dev_kvm_keeps_the_last_capabilities(part1):
    agent = agent_for(part1)
    agent.reconcile()
    assert agent.caps.switching

    def busy():
        raise OSError(errno.EMFILE, 'Too many open files', 'dev/kvm')
    agent.transport.paging_mode_cap = busy
    agent.reconcile()
    assert agent.caps.switching
    assert agent.errors['host'] == 1


@pytest.mark.parametrize('shadow,mode', [('0', vocabulary.HAP),
                                         ('3', vocabulary.SHADOW),
                                         ('2', vocabulary.SHADOW)])
def test_the_vcpus_mode_is_read_as_kvms_debugfs_shows_it(
        tmp_path, shadow, mode):
    """KVM's debugfs, laid out here as KVM lays it out: a vCPU statistic
    in the VM's directory is the sum over its vCPUs, one vcpu<N>
    directory each.  The host's own transport reads it as a file, not
    through the VM descriptor's ioctl (which has no such file), since
    KVM answers a vCPU's own ioctls only to the VM's process.  Any vCPU
    in shadow mode makes it the VM's: one whose guest has paging off
    runs at TDP whatever the VM's mode."""
    vm = tmp_path / spec.DEBUGFS_DIR / '4242-11'
    for n in range(3):
        (vm / ('vcpu%d' % n)).mkdir(parents=True)
    (vm / spec.VCPU_STAT_SHADOW).write_text(shadow + '\n')
    (vm / 'pid').write_text('4242\n')
    for transport in (files.FileTransport(str(tmp_path)),
                      vmfd.VmFdTransport(str(tmp_path))):
        assert transport.vcpus_in_shadow('4242-11') == (int(shadow), 3)
        assert vmfiles.Vm(transport, '4242-11',
                          text_interface=False).mode() == mode
