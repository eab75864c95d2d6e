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

"""The agent's own decision (``decision = agent``): on a host whose kernel
switches, the agent decides for adaptive guests and switches them
through the mechanism's control, KVM_SET_PAGING_MODE (the reference
model takes it as a kernel with the text interface does, as a write of
the mode to the VM's policy); the kernel's engine never runs for them.
The simulated host's kernel is the interface's reference model; the
guests' counters are their traces' (no machine here has a PMU)."""

import errno
import sys

import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import decider as deciderlib
from nova_adaptive_paging.agent import guest as guestlib
from nova_adaptive_paging import dsp
from nova_adaptive_paging.host import perf
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging import vocabulary
from tests.unit.agent_support import TraceCounters
from tests.unit.agent_support import agent_for
from tests.unit.agent_support import follow_the_engine
from tests.unit.agent_support import make_conf
from tests.unit.agent_support import policy_of
from tests.unit.agent_support import run
from tests.unit.agent_support import start
from tests.unit.agent_support import tlb_bound

if 'eventlet.patcher' in sys.modules and \
        sys.modules['eventlet.patcher'].is_monkey_patched('thread'):
    raise RuntimeError('%s needs real threads: run it in a pytest process '
                       'of its own, as tox.ini does' % __name__)


@pytest.fixture(autouse=True)
def no_override_outlives_its_test():
    """oslo.config's ConfigOpts copies a registered OptGroup shallowly:
    the module's group, and with it every override, is shared by the
    confs of one process.  Each test's overrides end with it."""
    yield
    conf = make_conf('/', 'test:///default')
    for name in ('decision', 'decision_samples_dir'):
        conf.clear_override(name, 'adaptive_paging')


def writes_to(agent, name, sim, what):
    rel = sim.vms[name].dirname
    return [text for path, text in agent.transport.writes
            if rel in path and path.endswith('/' + what)]


def policy_writes(agent, name, sim):
    """The modes the agent set for the guest: through the mechanism's
    control, and never through the text interface's policy file."""
    assert writes_to(agent, name, sim, spec.FILE_POLICY) == []
    return writes_to(agent, name, sim, vmfiles.SET_MODE)


def test_the_agent_decides_and_the_kernel_switches(sim):
    start(sim, 'tlb', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault',
          guest_faults=False, balloon=True)
    agent = agent_for(sim, counters=lambda pid: TraceCounters(sim, pid))
    agent.conf.set_override('decision', vocabulary.DECIDED_BY_AGENT,
                            'adaptive_paging')
    agent.domains = simfleet.SimBalloon(agent.domains, sim)
    agent.reconcile()
    assert agent.caps.switching
    vm = sim.vms['tlb']

    def each(mode):
        # The kernel runs the guest in the mode decided, under a fixed
        # policy: the agent's decision, not the kernel's engine.
        assert policy_of(sim, 'tlb') == mode
        assert sim.model.vms[vm.dirname].mode == mode
    decided = follow_the_engine(sim, agent, 'tlb', each)
    assert set(decided) == set(vocabulary.MODES)      # both phases
    writes = policy_writes(agent, 'tlb', sim)
    assert vocabulary.ADAPTIVE not in writes
    changes = sum(a != b for a, b in zip(['hap'] + decided, decided))
    stats = sim.model.vms[vm.dirname].stats
    # Each change the agent decided is one switch in the kernel's counts.
    assert stats['switches_to_shadow'] + stats['switches_to_hap'] == changes
    assert agent.guests['tlb'].decider.switches == changes


def test_decision_samples_are_a_test_hook_that_fails_loudly(
        sim, tmp_path, caplog):
    start(sim, 'g', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault',
          guest_faults=False, balloon=True)
    agent = agent_for(sim)
    agent.conf.set_override('decision', vocabulary.DECIDED_BY_AGENT,
                            'adaptive_paging')
    agent.conf.set_override('decision_samples_dir', str(tmp_path),
                            'adaptive_paging')
    agent.reconcile()
    assert policy_of(sim, 'g') == vocabulary.HAP
    # No file yet, then one that does not hold three counts: said (not
    # counted as an error each time), no switch, the guest at hap.
    profile = profiles.builtin()
    agent.sample()
    (tmp_path / 'g').write_text('12 x 3\n')
    run(sim, profile.interval_s)
    agent.sample()
    assert 'expected three decimal counts' in caplog.text
    assert policy_of(sim, 'g') == vocabulary.HAP
    assert agent.errors['counters'] == agent.errors['apply'] == 0
    # Counts that make every rule of Figure 5 ask for shadow paging: many
    # TLB misses per instruction, no faults.  The guard lets the first
    # switch through once the window is full.
    insns = tlb = 0
    for _ in range(profile.history_samples + 3):
        insns += 10 ** 9
        tlb += 10 ** 8
        (tmp_path / 'g').write_text('%d %d 0\n' % (insns, tlb))
        run(sim, profile.interval_s)
        agent.sample()
    assert policy_of(sim, 'g') == vocabulary.SHADOW
    # Back to kernel decision: the guest gets adaptive, the agent's
    # engine is gone.
    agent.conf.set_override('decision', vocabulary.DECIDED_BY_KERNEL,
                            'adaptive_paging')
    agent.reconcile()
    assert policy_of(sim, 'g') == vocabulary.ADAPTIVE
    assert agent.guests['g'].decider is None


def hook_agent(sim, tmp_path):
    agent = agent_for(sim)
    agent.conf.set_override('decision', vocabulary.DECIDED_BY_AGENT,
                            'adaptive_paging')
    agent.conf.set_override('decision_samples_dir', str(tmp_path),
                            'adaptive_paging')
    return agent


def test_a_vm_ruled_out_of_shadow_stays_at_hap_and_is_asked_no_more(
        sim, tmp_path):
    start(sim, 'g', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault')
    agent = hook_agent(sim, tmp_path)
    agent.reconcile()
    # The kernel rules the VM out (it may run nested guests, say).
    sim.model.vms[sim.vms['g'].dirname].forbid_shadow()
    tlb_bound(tmp_path, 'g', sim, agent, 12)
    agent.reconcile()
    tlb_bound(tmp_path, 'g', sim, agent, 12)
    assert policy_of(sim, 'g') == vocabulary.HAP
    refused = [t for t in policy_writes(agent, 'g', sim)
               if t == vocabulary.SHADOW]
    # One refused write, said and counted once; no engine asking again.
    assert len(refused) == 1
    assert agent.errors['apply'] == 1
    assert agent.guests['g'].decider.ruled_out


def test_a_refusal_for_now_is_asked_again_not_taken_for_good(
        sim, tmp_path):
    """Only EOPNOTSUPP rules a VM out of shadow paging for its life; no
    memory for the rmaps (ENOMEM) or a privsep daemon that did not
    answer (ETIMEDOUT) is for now, and the agent asks again."""
    start(sim, 'g', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault')
    agent = hook_agent(sim, tmp_path)
    agent.reconcile()
    set_mode = agent.transport.set_mode
    failures = [errno.ENOMEM, errno.ETIMEDOUT]

    def failing(vm, mode):
        if failures and mode == vocabulary.SHADOW:
            raise OSError(failures.pop(0), 'for now', vm)
        return set_mode(vm, mode)
    agent.transport.set_mode = failing
    tlb_bound(tmp_path, 'g', sim, agent, 18)
    assert failures == []
    assert agent.guests['g'].decider.ruled_out is None
    assert policy_of(sim, 'g') == vocabulary.SHADOW
    assert sim.model.vms[sim.vms['g'].dirname].mode == vocabulary.SHADOW
    assert agent.errors['apply'] == 2


def test_a_restarted_guest_is_decided_afresh(sim, tmp_path):
    start(sim, 'g', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault')
    agent = hook_agent(sim, tmp_path)
    agent.reconcile()
    tlb_bound(tmp_path, 'g', sim, agent, 6)
    assert policy_of(sim, 'g') == vocabulary.SHADOW
    old = agent.guests['g'].decider
    # Destroyed and started again under its name: a new QEMU, a new VM,
    # at hap as every new VM; nothing of the old VM's decision carries.
    sim.stop_vm('g')
    start(sim, 'g', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault')
    agent.reconcile()
    assert agent.guests['g'].decider is not old
    assert policy_of(sim, 'g') == vocabulary.HAP
    assert agent.errors['guest'] == 0


def test_a_guest_without_counters_runs_at_hap_said_once(sim, caplog):
    start(sim, 'g', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault')

    def no_pmu(pid):
        raise perf.Unavailable('no PMU', 'no PMU (a stand-in)')

    agent = agent_for(sim, counters=no_pmu)
    agent.conf.set_override('decision', vocabulary.DECIDED_BY_AGENT,
                            'adaptive_paging')
    agent.reconcile()
    # Put in shadow mode by an earlier decision: the agent, unable to
    # count it, must not leave it there.
    sim.model.vms[sim.vms['g'].dirname].switch(vocabulary.SHADOW)
    sim.model.vms[sim.vms['g'].dirname].policy = vocabulary.SHADOW
    for _ in range(5):
        run(sim, profiles.builtin().interval_s)
        agent.sample()
    assert policy_of(sim, 'g') == vocabulary.HAP
    assert policy_writes(agent, 'g', sim)[-1] == vocabulary.HAP
    assert caplog.text.count('the agent cannot decide for it') == 1


def test_a_reconcile_pass_keeps_the_fault_count_it_feeds(sim):
    """The kernel's decision: the count the agent writes to an adaptive
    guest's paging_guest_faults is cumulative across reconcile passes.
    (It restarted at each pass, which the kernel reads as a count that
    went back: that interval's faults were "no data".)"""
    start(sim, 'g', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault',
          guest_faults=False, balloon=True)
    agent = agent_for(sim)
    agent.domains = simfleet.SimBalloon(agent.domains, sim)
    fed = []
    for _ in range(6):
        agent.reconcile()
        for _ in range(3):
            run(sim, profiles.builtin().interval_s)
            agent.sample()
    rel = sim.vms['g'].dirname
    fed = [int(text) for path, text in agent.transport.writes
           if rel in path and path.endswith(spec.FILE_GUEST_FAULTS)]
    assert len(fed) == 18 and fed[-1] > 0
    assert fed == sorted(fed)
    assert sim.model.vms[rel].stats['guest_faults_clamped'] == 0


def test_the_agents_decision_prices_a_switch_into_shadow_by_the_memory():
    """The domain's <memory> (KiB, as libvirt writes it) reaches the
    decision: a switch into shadow mode of a 64 GiB guest is priced at
    the profile's price a GiB times 64 (intel-nehalem: 27.648 ms), not at
    the switch of its 1 GiB reference guest."""
    xml = ("<domain type='kvm'><name>g</name><memory unit='KiB'>%d"
           "</memory><vcpu>2</vcpu></domain>" % (64 * 1024 * 1024))
    inst = guestlib.read_instance('g', 'u', xml)
    assert inst.memory_mib == 64 * 1024 and inst.vcpus == 2
    assert guestlib.read_instance(
        'g', 'u', '<domain><memory unit="GiB">2</memory></domain>'
    ).memory_mib == 2048
    assert guestlib.read_instance('g', 'u', '<domain/>').memory_mib == 0
    now = [0.0]
    ruleset = spec.ThresholdSet.from_profile(profiles.builtin())
    d = deciderlib.Decider(ruleset, lambda: now[0], vocabulary.HAP)
    for _ in range(2):
        d.step(int(now[0] * 10 ** 9), 0, 0, memory_mib=inst.memory_mib)
        now[0] += ruleset.interval_ms / 1000
    assert d.engine.price(dsp.Mode.HAP) == 28648000
    assert d.engine.price(dsp.Mode.SHADOW) == 64 * 27648000
