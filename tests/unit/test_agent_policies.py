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

"""What the agent writes to each guest's VM: the policy its flavor asks
(from Nova's metadata or the Nova API), a per-VM threshold override,
its bounded page-fault count; what it leaves alone (a VM that refuses,
one gone, an interface it does not know); the loop that survives a bug.
Real libvirt (the test:/// driver over the simulated host's node XML,
written with Nova's own metadata classes) and the simulated host's
interface (the reference model, which refuses every value the spec
forbids, as the conformance suite uses it)."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import libvirt
import prometheus_client
from prometheus_client import parser

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.agent import health
from nova_adaptive_paging.agent import nova_api
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import vocabulary
from tests.unit.conftest import needs_fuse
from tests.unit.agent_support import ZEN3
from tests.unit.agent_support import agent_for
from tests.unit.agent_support import policy_of
from tests.unit.agent_support import run
from tests.unit.agent_support import start

if 'eventlet.patcher' in sys.modules and \
        sys.modules['eventlet.patcher'].is_monkey_patched('thread'):
    raise RuntimeError('%s needs real threads: run it in a pytest process '
                       'of its own, as tox.ini does' % __name__)


def test_each_guest_ends_in_the_policy_its_flavor_asks(sim, caplog):
    start(sim, 'adaptive', {'hw:paging': 'adaptive'})
    start(sim, 'hap', {'hw:paging': 'hap'})
    start(sim, 'shadow', {'hw:paging': 'shadow'})
    start(sim, 'missing', {'hw:cpu_policy': 'dedicated'})
    start(sim, 'invalid', {'hw:paging': 'ept'})
    agent = agent_for(sim, default=vocabulary.SHADOW)
    assert agent.reconcile()
    assert {name: policy_of(sim, name) for name in sim.vms} == {
        'adaptive': 'adaptive', 'hap': 'hap', 'shadow': 'shadow',
        'missing': 'shadow', 'invalid': 'shadow'}
    # One warning for the invalid value, naming instance, key and value.
    uuid = sim.vms['invalid'].spec.uuid
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == 'WARNING' and 'hw:paging' in r.getMessage()]
    assert len(warned) == 1
    assert uuid in warned[0] and "hw:paging='ept'" in warned[0]
    assert agent.errors[health.POLICY] == 1
    # The report names each guest's source of policy.
    lines = dict(line.split(' ', 1) for line in agent.report())
    assert 'policy=shadow(default)' in lines['missing']
    assert 'policy=adaptive(flavor)' in lines['adaptive']
    # Idempotent: a second pass writes nothing and warns no more.
    before = len(agent.transport.writes)
    assert agent.reconcile()
    assert agent.transport.writes[before:] == []
    assert len([r for r in caplog.records if r.levelname == 'WARNING'
                and 'hw:paging' in r.getMessage()]) == 1


def test_a_guest_that_cannot_run_shadow_keeps_its_mode(sim):
    start(sim, 'noshadow', {'hw:paging': 'shadow'}, can_shadow=False)
    start(sim, 'fine', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.reconcile()
    vm = sim.model.vms[sim.vms['noshadow'].dirname]
    assert (vm.policy, vm.mode) == ('hap', 'hap')
    assert policy_of(sim, 'fine') == 'shadow'
    assert agent.errors[health.APPLY] == 1
    assert 'EOPNOTSUPP' in agent.guests['noshadow'].problem


def test_flavor_profile_and_interval_give_a_per_vm_override(sim):
    with open(os.path.join(sim.root, 'profiles', 'amd-zen3.yaml'),
              'w') as f:
        f.write(ZEN3)
    start(sim, 'tuned', {'hw:paging': 'adaptive',
                         'hw:paging_profile': 'intel-nehalem',
                         'hw:paging_interval': '7'})
    start(sim, 'plain', {'hw:paging': 'adaptive'})
    start(sim, 'unknown', {'hw:paging': 'adaptive',
                           'hw:paging_profile': 'intel-nowhere'})
    agent = agent_for(sim)
    agent.reconcile()
    tuned = sim.model.vms[sim.vms['tuned'].dirname]
    nehalem = profiles.builtin()
    assert tuned.override == spec.ThresholdSet(
        nehalem.thresholds, nehalem.history_samples, 7000)
    assert sim.model.vms[sim.vms['plain'].dirname].override is None
    # An unknown profile: the host's thresholds, and a warning.
    assert sim.model.vms[sim.vms['unknown'].dirname].override is None
    assert 'intel-nowhere' in agent.guests['unknown'].target.problem
    # The flavor no longer asks for an override: it goes.
    sim.stop_vm('tuned')
    start(sim, 'tuned', {'hw:paging': 'adaptive'})
    agent.domains.close()               # the test driver rereads the node
    agent.reconcile()
    assert sim.model.vms[sim.vms['tuned'].dirname].override is None


def test_an_adaptive_guests_balloon_fault_count_reaches_the_kernel(sim):
    """libvirt's test driver reports balloon statistics (a fault count
    of 0): the agent writes the guest's count, the kernel's samples then
    take their faults from user space in both modes."""
    start(sim, 'a', {'hw:paging': 'adaptive'}, guest_faults=False,
          balloon=True)
    start(sim, 'p', {'hw:paging': 'hap'}, guest_faults=False, balloon=True)
    start(sim, 'n', {'hw:paging': 'adaptive'}, guest_faults=False)
    agent = agent_for(sim)
    agent.reconcile()
    agent.sample()
    written = [w for w in agent.transport.writes
               if w[0].endswith(spec.FILE_GUEST_FAULTS)]
    a = sim.vms['a'].dirname
    assert written == [('%s/%s/%s' % (spec.DEBUGFS_DIR, a,
                                      spec.FILE_GUEST_FAULTS), '0')]
    run(sim, 10)
    stats = spec.parse_stats(sim.model.vms[a].read(spec.FILE_STATS))
    assert stats['pf_source'] == 'user'
    assert agent.guests['a'].fault_stats is True
    assert agent.guests['p'].fault_stats is None     # not adaptive
    # Without a balloon there is no count: reported once, not hidden.
    assert agent.guests['n'].fault_stats is False
    agent.sample()
    assert agent.errors[health.FAULTS] == 2
    assert len([m for m in agent._said.values() if 'balloon' in m]) == 1


def test_a_guest_that_forges_its_fault_count_is_bounded(sim):
    """A guest reports whatever its balloon says; libvirt's test driver
    reports a constant, so the lying guest is stood in for by the values
    it reports (the one modeled part).  What reaches the kernel rises no
    faster than one fault per 100 ns per vCPU, never goes backwards, and
    each bounded report is counted."""
    start(sim, 'a', {'hw:paging': 'adaptive'}, guest_faults=False,
          balloon=True, vcpus=2)
    agent = agent_for(sim)
    agent.reconcile()
    reports = iter([1000, 1000 + 2 ** 63, 5, 5 + 3000, 2 ** 64 - 1])
    agent.domains.guest_faults = lambda name: next(reports)
    fed = []
    for _ in range(5):
        agent.sample()
        fed.append(int([w for w in agent.transport.writes if w[0].endswith(
            spec.FILE_GUEST_FAULTS)][-1][1]))
        run(sim, 5)
    # 2 vCPUs for 5 s at most 10^7 faults a second each: 10^8 a report.
    assert fed == [0, 10 ** 8, 10 ** 8, 10 ** 8 + 3000, 2 * 10 ** 8 + 3000]
    assert agent.guests['a'].fault_feed.clamped == 3
    clamped = metrics.GUEST_FAULTS_CLAMPED
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    fams = {f.name: f for f in parser.text_string_to_metric_families(
        prometheus_client.generate_latest(registry).decode())}
    [sample] = [s for s in fams[clamped.name[:-len('_total')]].samples
                if s.name == clamped.name]
    assert sample.value == 3


def test_a_guest_destroyed_between_discovery_and_write(sim):
    start(sim, 'a', {'hw:paging': 'shadow'})
    start(sim, 'b', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.domains.connect()             # libvirt still lists 'a' after...
    sim.stop_vm('a')                    # ...its QEMU is gone
    assert agent.reconcile()
    assert policy_of(sim, 'b') == 'shadow'
    assert agent.errors[health.VM] == 1
    assert agent.guests['a'].vm is None


def test_an_unwritable_vm_directory_leaves_its_guest_as_it_was(sim):
    """A VM whose files refuse writes (EACCES: a stand-in, as root passes
    any mode bits here): its guest keeps the mode it had, the others get
    their policy, the refusal is counted, and the next pass after the
    directory is writable again applies it."""
    a = start(sim, 'a', {'hw:paging': 'shadow'})
    start(sim, 'b', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    real = agent.transport.write

    def write(rel, text):
        if a.dirname in rel:
            raise PermissionError(13, 'Permission denied', rel)
        return real(rel, text)
    agent.transport.write = write
    agent.reconcile()
    assert policy_of(sim, 'a') == 'hap'
    assert sim.model.vms[a.dirname].mode == 'hap'
    assert policy_of(sim, 'b') == 'shadow'
    assert agent.errors[health.APPLY] == 1
    assert 'EACCES' in agent.guests['a'].problem
    agent.transport.write = real
    agent.reconcile()
    assert policy_of(sim, 'a') == 'shadow'
    assert agent.guests['a'].problem is None


def test_an_unknown_interface_version_is_never_written(sim):
    start(sim, 'a', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    real = agent.transport.model.read

    def read(rel):
        if rel.endswith(spec.PARAM_ABI):
            return '%d\n' % (spec.ABI_VERSION + 1)
        return real(rel)
    agent.transport.read = read
    agent.reconcile()
    assert agent.transport.writes == []
    assert policy_of(sim, 'a') == 'hap'
    assert not agent.caps.switching


def test_metadata_without_extra_specs_waits_for_the_nova_api(
        sim, tmp_path, caplog):
    """Guests started before Nova 32.0.0, with the Nova API down (a closed
    loopback port): they are left as they are, the outage is logged once
    and asked about once per retry period, not once per guest.  The API
    answering is tests/functional/test_agent_nova_api.py's."""
    start(sim, 'old1', {'hw:paging': 'shadow'}, flavor='m1.old')
    start(sim, 'old2', {'hw:paging': 'shadow'}, flavor='m1.old')
    start(sim, 'new', {'hw:paging': 'shadow'})
    node = open(os.path.join(sim.root, simhost.NODE_XML)).read()
    stripped = tmp_path / 'old-node.xml'
    cut = node.split('  <domain')
    for i, part in enumerate(cut):
        if 'm1.old' in part:
            a = part.index('<nova:extraSpecs')
            b = part.index('</nova:extraSpecs>') + len('</nova:extraSpecs>')
            cut[i] = part[:a] + part[b:]
    stripped.write_text('  <domain'.join(cut))
    with socket.socket() as closed:
        closed.bind(('127.0.0.1', 0))
        port = closed.getsockname()[1]
    now = [0.0]
    lookup = nova_api.ServerFlavors(
        lambda: ks_adapter.Adapter(ks_session.Session(
            auth=token_endpoint.Token('http://127.0.0.1:%d' % port, 't'))),
        retry_s=60, timeout_s=2, clock=lambda: now[0])
    agent = agent_for(sim, lookup=lookup)
    agent.domains.uri = 'test://%s' % stripped
    agent.reconcile()
    agent.reconcile()
    assert agent.guests['old1'].decision.policy is None
    assert (policy_of(sim, 'old1'), policy_of(sim, 'old2')) == ('hap', 'hap')
    assert policy_of(sim, 'new') == 'shadow'
    assert lookup.requests == 1
    assert len([r for r in caplog.records if 'Nova API' in
                r.getMessage()]) == 1
    assert 'Nova API' in agent.guests['old2'].problem
    now[0] += 61
    agent.reconcile()
    assert lookup.requests == 2


def test_the_loop_survives_a_bug_and_stop_ends_it(sim):
    start(sim, 'a', {'hw:paging': 'shadow'})
    agent = agent_for(sim)
    agent.conf.set_override('interval', 1, 'agent')
    real, calls = agent.sample, []

    def sample():
        calls.append(1)
        if len(calls) == 1:
            raise KeyError('a bug')
        real()
    agent.sample = sample
    thread = threading.Thread(target=agent.run)
    thread.start()
    deadline = time.monotonic() + 10
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    agent.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert len(calls) >= 2 and agent.errors[health.INTERNAL] == 1
    assert policy_of(sim, 'a') == 'shadow'
    assert libvirt.getVersion() > 0


@needs_fuse
def test_agent_once_brings_a_served_host_to_the_flavors(tmp_path):
    """``nova-paging-agent --once``: real files (FUSE), real libvirt (the
    test driver), the real command line and config file."""
    root = str(tmp_path / 'node')
    sim = subprocess.Popen(
        [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli', 'sim-host',
         '--root', root, '--vms', '4', '--speed', '1', '--duration', '300',
         '--paging', 'shadow', '--paging', 'adaptive', '--paging', 'none',
         '--paging', 'hap'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    debugfs = os.path.join(root, spec.DEBUGFS_DIR)
    try:
        for _ in range(1200):
            if os.path.isdir(debugfs) and len(os.listdir(debugfs)) == 4:
                break
            assert sim.poll() is None, sim.communicate()
            time.sleep(0.05)
        (tmp_path / 'profiles').mkdir()
        (tmp_path / 'profiles' / 'amd-zen3.yaml').write_text(ZEN3)
        config = tmp_path / 'agent.conf'
        config.write_text(
            '[adaptive_paging]\nhost_root = %s\nlibvirt_uri = test://%s\n'
            'default_policy = shadow\ncpu_generation = amd-zen3\n'
            'profile_dirs = %s\n' % (root, os.path.join(
                root, simhost.NODE_XML), tmp_path / 'profiles'))

        def status():
            out = subprocess.run(
                [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli',
                 '--config-file', str(config), 'host', 'status'],
                capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            return out.stdout.splitlines()

        # What the agent would do, before it runs: it reads only.
        before = status()
        assert before[0].startswith('host: generation amd-zen3, switching')
        pending = [line for line in before[1:] if 'would write' in line]
        assert len(pending) == 3        # shadow, adaptive, default shadow
        assert all(open(os.path.join(debugfs, name, spec.FILE_POLICY))
                   .read().strip() == 'hap' for name in os.listdir(debugfs))
        done = subprocess.run(
            [sys.executable, '-m', 'nova_adaptive_paging.cmd.agent',
             '--config-file', str(config), '--once'],
            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert [line for line in status() if 'would write' in line] == []
        lines = dict(line.split(' ', 1)
                     for line in done.stdout.splitlines())
        assert sorted(lines) == ['instance-%08x' % i for i in (1, 2, 3, 4)]
        assert 'policy=shadow(flavor)' in lines['instance-00000001']
        assert 'policy=shadow(default)' in lines['instance-00000003']
        files = {}
        for name in os.listdir(debugfs):
            with open(os.path.join(debugfs, name, spec.FILE_POLICY)) as f:
                files[name] = f.read().strip()
        assert sorted(files.values()) == ['adaptive', 'hap', 'shadow',
                                          'shadow']
        with open(os.path.join(root, spec.PARAMS_DIR,
                               spec.PARAM_THRESHOLDS)) as f:
            assert spec.ThresholdSet.parse(f.read()) == \
                spec.ThresholdSet.from_profile(profiles.loads(ZEN3))
        # A bad configuration: one line, exit 2, nothing written.
        config.write_text('[agent]\ninterval = soon\n')
        bad = subprocess.run(
            [sys.executable, '-m', 'nova_adaptive_paging.cmd.agent',
             '--config-file', str(config), '--once'],
            capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2
        assert bad.stderr.count('\n') == 1 and 'interval' in bad.stderr
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.communicate(timeout=20)
