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
through their paging_policy; the kernel's engine never runs for them.
The simulated host's kernel is the interface's reference model; the
guests' counters are their traces' (no machine here has a PMU)."""

import sys

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import dsp
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging import vocabulary
from tests.unit.agent_support import TraceCounters
from tests.unit.agent_support import agent_for
from tests.unit.agent_support import policy_of
from tests.unit.agent_support import run
from tests.unit.agent_support import start

if 'eventlet.patcher' in sys.modules and \
        sys.modules['eventlet.patcher'].is_monkey_patched('thread'):
    raise RuntimeError('%s needs real threads: run it in a pytest process '
                       'of its own, as tox.ini does' % __name__)


def policy_writes(agent, name, sim):
    rel = sim.vms[name].dirname
    return [text for path, text in agent.transport.writes
            if rel in path and path.endswith(spec.FILE_POLICY)]


def test_the_agent_decides_and_the_kernel_switches(sim):
    start(sim, 'tlb', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault',
          guest_faults=False, balloon=True)
    agent = agent_for(sim, counters=lambda pid: TraceCounters(sim, pid))
    agent.conf.set_override('decision', vocabulary.DECIDED_BY_AGENT,
                            'adaptive_paging')
    agent.domains = simfleet.SimBalloon(agent.domains, sim)
    agent.reconcile()
    assert agent.caps.switching
    # The decision, made by the test on the same counts: the DSP engine
    # and guard of the profile the agent uses, one interval a sample.
    profile = profiles.builtin()
    engine = dsp.Engine(profile.thresholds, profile.history_samples,
                        guard=profile.guard)
    vm = sim.vms['tlb']
    prev, decided = None, []
    agent.sample()
    prev = vm.counters()
    for _ in range(60):
        run(sim, profile.interval_s)
        agent.sample()
        now = vm.counters()
        engine.step(dsp.Sample.from_counts(
            *[b - a for a, b in zip(prev, now)]),
            profile.interval_s * 10 ** 9)
        prev = now
        decided.append(str(engine.mode))
        # The kernel runs the guest in the mode decided, under a fixed
        # policy: the agent's decision, not the kernel's engine.
        assert policy_of(sim, 'tlb') == decided[-1]
        assert sim.model.vms[vm.dirname].mode == decided[-1]
        if len(decided) % 7 == 0:
            agent.reconcile()           # and a pass keeps it there
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
    # No file yet, then one that does not hold three counts: said, no
    # write, the guest stays where it is.
    agent.sample()
    (tmp_path / 'g').write_text('12 x 3\n')
    agent.sample()
    assert 'expected three decimal counts' in caplog.text
    assert policy_of(sim, 'g') == vocabulary.HAP
    # Counts that make every rule of Figure 5 ask for shadow paging: many
    # TLB misses per instruction, no faults.  The guard lets the first
    # switch through once the window is full.
    profile = profiles.builtin()
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
