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

"""Advisory mode: on a host without the switching patch, what adaptive
paging would do for each guest and gain (MODELED)."""

import os
import sys

import prometheus_client
from prometheus_client import parser
import pytest

from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging import dsp
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import vocabulary
from tests.unit.agent_support import Clock
from tests.unit.agent_support import GENERATION
from tests.unit.agent_support import TraceCounters
from tests.unit.agent_support import _value
from tests.unit.agent_support import agent_for
from tests.unit.agent_support import run
from tests.unit.agent_support import start
from tests.unit.agent_support import stock_kernel

if 'eventlet.patcher' in sys.modules and \
        sys.modules['eventlet.patcher'].is_monkey_patched('thread'):
    raise RuntimeError('%s needs real threads: run it in a pytest process '
                       'of its own, as tox.ini does' % __name__)


def test_advisory_mode_says_what_adaptive_would_do(sim):
    start(sim, 'tlb', {'hw:paging': 'adaptive'}, trace='phases-tlb-fault',
          guest_faults=False, balloon=True)
    agent = agent_for(sim, counters=lambda pid: TraceCounters(sim, pid))
    stock_kernel(agent)
    agent.reconcile()
    assert agent.caps.kvm and not agent.caps.switching
    # The same samples, fed to the DSP engine by the test, with the switch
    # guard on the agent's (simulated) clock: one interval a sample.
    profile = profiles.builtin()
    engine = dsp.Engine(profile.thresholds, profile.history_samples,
                        guard=profile.guard)
    prev, decided = None, []
    for _ in range(60):
        run(sim, profile.interval_s)
        agent.sample()
        insns, tlb, _ = sim.vms['tlb'].counters()
        faults = 0                      # the test driver's balloon count
        if prev is not None:
            engine.step(dsp.Sample.from_counts(insns - prev[0],
                                               tlb - prev[1], 0),
                        profile.interval_s * 10 ** 9)
        prev = (insns, tlb, faults)
        decided.append(str(engine.mode))
        assert agent.guests['tlb'].advisor.mode == decided[-1]
    assert agent.transport.writes == []          # it only advises
    assert 'shadow' in decided                   # TLB-bound phases
    assert agent.guests['tlb'].advisor.gain_s > 0
    # ... and says so on /metrics.
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    text = prometheus_client.generate_latest(registry).decode()
    uuid = sim.vms['tlb'].spec.uuid
    fams = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert _value(fams, metrics.ADVISED_MODE, uuid=uuid,
                  mode=decided[-1]) == 1
    assert _value(fams, metrics.GUEST_COUNTERS, uuid=uuid) == 1


def test_advisory_in_the_shadow_pool_models_what_hap_would_save(tmp_path):
    """A stock host with npt=0 runs every guest shadowed (the shadow
    pool): its agent models, from counts that mean the same in both
    modes, what hap would have saved each guest, and exports it with the
    host's pool for the fleet strategy."""
    clock = Clock()
    sim = simhost.SimHost(str(tmp_path), hardware.resolve('nehalem'),
                          profiles.builtin(), clock=clock, tdp=False)
    sim.clock = clock
    os.makedirs(os.path.join(sim.root, 'profiles'))
    start(sim, 'faults', {'hw:paging': 'adaptive'}, trace='gcc',
          guest_faults=False, balloon=True)
    start(sim, 'tlb', {'hw:paging': 'adaptive'}, trace='mcf',
          guest_faults=False, balloon=True)
    agent = agent_for(sim, counters=lambda pid: TraceCounters(sim, pid))
    agent.conf.set_override('pool', True, 'adaptive_paging')
    stock_kernel(agent)
    agent.domains = simfleet.SimBalloon(agent.domains, sim)
    agent.reconcile()
    assert agent.caps.host_mode == vocabulary.SHADOW
    assert {sim.model.vms[vm.dirname].mode for vm in sim.vms.values()} == {
        vocabulary.SHADOW}
    agent.sample()
    first = {n: sim.vms[n].counters() for n in sim.vms}
    for _ in range(24):
        run(sim, 5)
        agent.sample()
    # The oracle: the counts between the agent's first and last read,
    # priced with the generation's cost data (what shadow costs over hap).
    hw = hardware.for_generation(GENERATION)
    saved = {}
    for name, vm in sim.vms.items():
        counts = [b - a for a, b in zip(first[name], vm.counters())]
        saved[name] = sum(
            n * (hw.cost_s(vocabulary.SHADOW, event)
                 - hw.cost_s(vocabulary.HAP, event))
            for n, event in ((counts[1], vocabulary.EVENT_TLB_MISS),
                             (counts[2], vocabulary.EVENT_PAGE_FAULT)))
        advisor = agent.guests[name].advisor
        assert advisor.host_mode == vocabulary.SHADOW
        assert advisor.other_s == pytest.approx(saved[name], rel=1e-9)
        assert advisor.observed_s == pytest.approx(120)
    assert saved['faults'] > 0 > saved['tlb']    # gcc faults, mcf misses
    assert agent.transport.writes == []
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    text = prometheus_client.generate_latest(registry).decode()
    fams = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert _value(fams, metrics.HOST_PAGING_MODE, mode='shadow') == 1
    assert _value(fams, metrics.HOST_PAGING_MODE, mode='hap') == 0
    assert vocabulary.TRAIT_POOL in agent.caps.traits()
    # Outside the pools: no pool, no pool trait; the figures stay.
    agent.conf.set_override('pool', False, 'adaptive_paging')
    agent.reconcile()
    text = prometheus_client.generate_latest(registry).decode()
    assert metrics.HOST_PAGING_MODE.name not in text
    assert metrics.MODELED_OTHER_MODE_GAIN.name in text
    assert vocabulary.TRAIT_POOL not in agent.caps.traits()
    for name, vm in sim.vms.items():
        assert _value(fams, metrics.MODELED_OTHER_MODE_GAIN,
                      uuid=vm.spec.uuid) == pytest.approx(saved[name])
        assert _value(fams, metrics.ADVISED_SECONDS,
                      uuid=vm.spec.uuid) == pytest.approx(120)


def test_advisory_mode_without_counters_says_so_once(sim, caplog):
    start(sim, 'a', {'hw:paging': 'adaptive'})
    start(sim, 'b', {'hw:paging': 'adaptive'})
    agent = agent_for(sim)              # the real perf counters
    stock_kernel(agent)
    agent.reconcile()
    for _ in range(5):
        agent.sample()
    said = [r.getMessage() for r in caplog.records
            if 'guest-only counters' in r.getMessage()]
    assert len(said) == 1 and 'adaptive paging would do' in said[0]
    assert agent.guests['a'].counters_ok is False
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    text = prometheus_client.generate_latest(registry).decode()
    uuid = sim.vms['a'].spec.uuid
    assert 'nova_paging_guest_counters{uuid="%s"} 0.0' % uuid in text
    assert 'nova_paging_guest_modeled_mode{' not in text
