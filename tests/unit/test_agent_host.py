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

"""What the agent writes to the host as a whole: the profile of its
generation to dsp_thresholds, which guests the kernel counts, the
walk-cycle events; the traits it publishes to placement."""

import os
import socket
import sys

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import health
from nova_adaptive_paging import placement
from nova_adaptive_paging import profiles
from nova_adaptive_paging import vocabulary
from tests.unit.agent_support import ZEN3
from tests.unit.agent_support import agent_for
from tests.unit.agent_support import policy_of
from tests.unit.agent_support import run
from tests.unit.agent_support import start

if 'eventlet.patcher' in sys.modules and \
        sys.modules['eventlet.patcher'].is_monkey_patched('thread'):
    raise RuntimeError('%s needs real threads: run it in a pytest process '
                       'of its own, as tox.ini does' % __name__)


def test_a_profile_dropped_in_reaches_dsp_thresholds(sim):
    agent = agent_for(sim)
    agent.reconcile()
    fallback = spec.ThresholdSet.from_profile(profiles.builtin())
    assert sim.model.thresholds == fallback
    assert not agent.caps.calibrated
    path = os.path.join(sim.root, 'profiles', 'amd-zen3.yaml')
    with open(path, 'w') as f:
        f.write(ZEN3)
    agent.reconcile()
    zen3 = spec.ThresholdSet.from_profile(profiles.loads(ZEN3))
    assert sim.model.thresholds == zen3
    assert agent.caps.calibrated
    assert vocabulary.TRAIT_CALIBRATED in agent.caps.traits()
    # A truncated file: reported, and the last good profile stays.
    with open(path, 'w') as f:
        f.write(ZEN3[:60])
    os.utime(path, ns=(1, 1))
    agent.reconcile()
    assert sim.model.thresholds == zen3
    assert agent.errors[health.PROFILE] == 1
    # Garbage in another file of the same generation changes nothing.
    with open(os.path.join(sim.root, 'profiles', 'junk.yaml'), 'wb') as f:
        f.write(b'\xff\xfe\x00garbage')
    agent.reconcile()
    assert sim.model.thresholds == zen3


def test_only_adaptive_guests_are_counted_unless_the_host_profiles(sim):
    """The kernel opens a guest's perf events (hardware counters its own
    PMU then lacks) only under adaptive, or for every guest while
    dsp_pmu_all is set: [adaptive_paging] count_all_guests, which the
    agent writes, and writes back when the configuration changes."""
    start(sim, 'h', {'hw:paging': 'hap'})
    start(sim, 's', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.reconcile()
    param = '%s/%s' % (spec.PARAMS_DIR, spec.PARAM_PMU_ALL)
    assert sim.model.read(param) == 'N\n'
    assert [w for w in agent.transport.writes if w[0] == param] == []
    for _ in range(30):
        run(sim, 1)
        agent.sample()
    assert agent.events.counts['hap']['tlb_miss'] == 0
    assert agent.events.counts['shadow']['tlb_miss'] == 0
    assert sum(agent.ftlb.counts['hap']) == sum(agent.ftlb.counts[
        'shadow']) == 0

    agent.conf.set_override('count_all_guests', True, 'adaptive_paging')
    agent.reconcile()
    agent.reconcile()                   # written once, then left alone
    assert [w for w in agent.transport.writes if w[0] == param] == [
        (param, 'Y')]
    for _ in range(30):
        run(sim, 1)
        agent.sample()
    assert agent.events.counts['hap']['tlb_miss'] > 0
    assert agent.events.counts['shadow']['tlb_miss'] > 0

    agent.conf.set_override('count_all_guests', False, 'adaptive_paging')
    agent.reconcile()
    assert sim.model.read(param) == 'N\n'
    assert agent.errors[health.COUNTERS] == 0


def test_a_kernel_that_cannot_count_every_guest_is_reported_once(
        sim, caplog):
    """count_all_guests on a kernel without dsp_pmu_all: one warning
    naming the parameter, an error counted per pass, the rest of the
    pass done."""
    start(sim, 'a', {'hw:paging': 'adaptive'})
    agent = agent_for(sim, count_all=True)
    param = '%s/%s' % (spec.PARAMS_DIR, spec.PARAM_PMU_ALL)
    real_read = sim.model.read

    def read(rel):
        if rel == param:
            raise FileNotFoundError(2, 'No such file or directory', rel)
        return real_read(rel)
    agent.transport.read = read
    assert not agent.reconcile()
    assert not agent.reconcile()
    assert agent.errors[health.COUNTERS] == 2
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == 'WARNING' and param in r.getMessage()]
    assert warned == ['%s: cannot make it Y (count_all_guests): No such '
                      'file or directory' % param]
    assert policy_of(sim, 'a') == 'adaptive'


def test_the_walk_cycle_events_follow_the_generation_and_the_config(
        sim, caplog):
    """The agent names the walk-cycle events of its CPU generation in
    dsp_walk_events, none where the generation has none or
    count_walk_cycles is off; a kernel without the parameter is an error
    only when there is something to count, and the pass goes on."""
    start(sim, 'a', {'hw:paging': 'adaptive'})
    param = spec.param_path(spec.PARAM_WALK_EVENTS)
    zen3 = agent_for(sim)                       # counts walks, not cycles
    assert zen3.reconcile()
    assert sim.model.read(param) == 'load=0 store=0\n'
    assert [w for w in zen3.transport.writes if w[0] == param] == []

    agent = agent_for(sim, generation='intel-icelake-server')
    assert agent.reconcile() and agent.reconcile()
    assert [w for w in agent.transport.writes if w[0] == param] == [
        (param, 'load=4104 store=4169')]
    agent.conf.set_override('count_walk_cycles', False, 'adaptive_paging')
    assert agent.reconcile()
    assert sim.model.read(param) == 'load=0 store=0\n'
    agent.conf.clear_override('count_walk_cycles', 'adaptive_paging')

    real_read = sim.model.read

    def read(rel):
        if rel == param:
            raise FileNotFoundError(2, 'No such file or directory', rel)
        return real_read(rel)
    zen3.transport.read = agent.transport.read = read
    assert zen3.reconcile()                     # nothing to count
    assert not agent.reconcile()
    assert agent.errors[health.COUNTERS] == 1
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == 'WARNING' and param in r.getMessage()]
    assert len(warned) == 1 and 'WALK_PENDING' in warned[0], warned
    assert policy_of(sim, 'a') == 'adaptive'


def test_an_unreachable_placement_is_retried_and_blocks_nothing(
        sim, caplog):
    start(sim, 'a', {'hw:paging': 'shadow'})
    with socket.socket() as closed:
        closed.bind(('127.0.0.1', 0))
        port = closed.getsockname()[1]
    adapter = ks_adapter.Adapter(ks_session.Session(
        auth=token_endpoint.Token('http://127.0.0.1:%d' % port, 't')),
        raise_exc=False)
    agent = agent_for(sim, publisher=lambda caps: placement.publish(
        adapter, ['compute1'], caps, retries=0))
    agent.reconcile()
    agent.reconcile()
    assert policy_of(sim, 'a') == 'shadow'
    assert agent.errors[health.PLACEMENT] == 2       # tried each pass
    assert agent.published is None
    assert len([r for r in caplog.records
                if 'publishing traits' in r.getMessage()]) == 1
