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

"""The simulated KVM host: the ABI, the timer, churn, libvirt's files."""

import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from nova_adaptive_paging.abi import conformance
from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import profiles
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.simhost import libvirt_xml
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import vocabulary
from nova_adaptive_paging.host import files
from nova_adaptive_paging.host import probe

NEHALEM = hardware.resolve('nehalem')
TRACES = traces.builtin()
NOVA = '{%s}' % libvirt_xml.NOVA_NS


class FakeClock:
    def __init__(self):
        self.ns = 0

    def __call__(self):
        return self.ns


@pytest.fixture
def sim(tmp_path):
    clock = FakeClock()
    host = simhost.SimHost(str(tmp_path), NEHALEM, profiles.builtin(),
                           clock=clock)
    host.clock = clock
    return host


def start(host, name, trace='phases-tlb-fault', **kw):
    return host.start_vm(simhost.VmSpec(name, TRACES[trace],
                                        {'hw:paging': 'adaptive'}, **kw))


def run(host, seconds, step=1.0):
    for _ in range(int(seconds / step)):
        host.clock.ns += int(step * 1e9)
        host.tick()


def test_conformance_suite_passes_on_the_model_it_serves(sim):
    start(sim, 'a')
    start(sim, 'b', can_shadow=False)
    results = conformance.run(sim.model)
    assert [r for r in results if r[1] is not None] == []
    assert len(results) == len(conformance.CHECKS)


def test_timer_drives_the_engine_and_charges_switches(sim):
    vm = start(sim, 'a', trace='mcf')
    vm.model.write(spec.FILE_POLICY, 'adaptive\n')
    run(sim, 60)
    stats = spec.parse_stats(vm.model.read(spec.FILE_STATS))
    assert stats['samples'] == 12
    assert stats['pf_source'] == 'user'
    assert vm.model.read(spec.FILE_MODE) == 'shadow\n'
    assert stats['switches_to_shadow'] == 1
    ws = TRACES['mcf'].working_set_mib[0]
    assert stats['time_switching_ns'] == int(
        NEHALEM.switch_s('shadow', ws) * 1e9)


def test_switch_stalls_the_vm(tmp_path):
    """The same VM makes less progress when it pays for a switch."""
    progress = []
    for switch in (False, True):
        clock = FakeClock()
        host = simhost.SimHost(str(tmp_path / str(switch)), NEHALEM,
                               profiles.builtin(), clock=clock)
        host.clock = clock
        vm = start(host, 'a', trace='quiet')
        if switch:
            vm.model.write(spec.FILE_POLICY, 'shadow\n')
        run(host, 10)
        progress.append(vm.counters()[0])
    stall = NEHALEM.switch_s('shadow', TRACES['quiet'].working_set_mib[0])
    rate = TRACES['quiet'].instructions[0] / TRACES['quiet'].interval_s[0]
    assert progress[1] < progress[0]
    assert progress[0] - progress[1] == pytest.approx(stall * rate,
                                                      rel=0.25)


def test_no_timer_samples_while_injection_is_on(sim):
    vm = start(sim, 'a')
    vm.model.write(spec.FILE_POLICY, 'adaptive\n')
    sim.model.write('%s/%s' % (spec.PARAMS_DIR, spec.PARAM_INJECT), 'Y\n')
    run(sim, 30)
    assert spec.parse_stats(vm.model.read(spec.FILE_STATS))['samples'] == 0
    sim.model.write('%s/%s' % (spec.PARAMS_DIR, spec.PARAM_INJECT), 'N\n')
    run(sim, 10)
    assert spec.parse_stats(vm.model.read(spec.FILE_STATS))['samples'] == 2


def samples(vm):
    return spec.parse_stats(vm.model.read(spec.FILE_STATS))['samples']


def test_only_a_vm_that_needs_it_is_sampled(sim):
    # The kernel's sampler idles for a VM kept at hap by its policy
    # (section 5), runs while the host profiles every VM, under the
    # shadow policy, and after shadow paging until what it allocated is
    # given back.
    vm = start(sim, 'a')
    run(sim, 30)
    assert samples(vm) == 0
    pmu_all = '%s/%s' % (spec.PARAMS_DIR, spec.PARAM_PMU_ALL)
    sim.model.write(pmu_all, 'Y\n')
    run(sim, 10)
    sim.model.write(pmu_all, 'N\n')
    profiled = samples(vm)
    assert profiled == 2
    run(sim, 10)
    assert samples(vm) == profiled
    vm.model.write(spec.FILE_POLICY, 'shadow\n')
    run(sim, 10)
    vm.model.write(spec.FILE_POLICY, 'hap\n')
    held = samples(vm)
    assert held == profiled + 2
    # What shadow paging took is given back once the VM has been at hap
    # for as long as its engine needs to decide (3 samples of 5 s), at
    # the third sample; then the sampler idles.
    run(sim, 30)
    assert samples(vm) == held + 3
    run(sim, 30)
    assert samples(vm) == held + 3


def test_without_a_guest_counter_hap_samples_have_no_faults(sim):
    vm = start(sim, 'a', guest_faults=False)
    vm.model.write(spec.FILE_POLICY, 'adaptive\n')
    run(sim, 30)
    stats = spec.parse_stats(vm.model.read(spec.FILE_STATS))
    assert stats['pf_source'] == 'none'
    assert stats['last_rule'] == int(simhost.model.dsp.Rule.NO_DATA)


def domains(host):
    tree = ET.parse(os.path.join(host.root, simhost.NODE_XML))
    return {d.findtext('name'): d for d in tree.getroot()}


def test_churn_updates_debugfs_pid_files_and_libvirt(sim):
    a = start(sim, 'a')
    b = start(sim, 'b')
    run(sim, 5)
    pid_dir = os.path.join(sim.root, simhost.PID_DIR)
    assert sorted(os.listdir(pid_dir)) == ['a.pid', 'b.pid']
    with open(os.path.join(pid_dir, 'b.pid')) as f:
        assert '%d-%d' % (int(f.read()), simhost.VM_FD) == b.dirname
    sim.migrate_vm('a')
    assert sorted(sim.model.listdir(spec.DEBUGFS_DIR)) == [b.dirname]
    assert not sim.model.exists('%s/%s/%s' % (spec.DEBUGFS_DIR, a.dirname,
                                              spec.FILE_MODE))
    assert os.listdir(pid_dir) == ['b.pid']
    assert list(domains(sim)) == ['b']
    assert sim.status()['gone'] == {'a': 'migrated'}
    c = start(sim, 'a')                 # it comes back: a new QEMU process
    assert c.dirname != a.dirname
    sim.stop_vm('b')
    run(sim, 5)
    assert sorted(domains(sim)) == ['a']
    with pytest.raises(ValueError):
        start(sim, 'a')


def test_node_xml_carries_nova_metadata(sim):
    vm = start(sim, 'a', flavor='m1.paging', uuid='1' * 8 + '-' + '2' * 4
               + '-' + '3' * 4 + '-' + '4' * 4 + '-' + '5' * 12)
    dom = domains(sim)['a']
    assert dom.get('type') == 'test'
    assert dom.findtext('uuid') == vm.spec.uuid
    inst = dom.find('metadata/%sinstance' % NOVA)
    flavor = inst.find(NOVA + 'flavor')
    assert flavor.get('name') == 'm1.paging'
    specs = {e.get('name'): e.text
             for e in flavor.find(NOVA + 'extraSpecs')}
    assert specs == {'hw:paging': 'adaptive'}


def test_hand_written_domain_matches_novas():
    pytest.importorskip('nova.virt.libvirt.config')
    vm = simhost.VmSpec('x', TRACES['quiet'], {'hw:paging': 'shadow',
                                               'hw:paging_interval': '5'},
                        uuid='0b8a6a2e-2c3e-4f52-9b1e-4c6f2e1b9d01')
    for balloon in (False, True):
        vm.balloon = balloon
        by_nova = libvirt_xml.domain(vm, use_nova=True)
        by_hand = libvirt_xml.domain(vm, use_nova=False)
        assert ET.canonicalize(ET.tostring(by_nova), strip_text=True) == \
            ET.canonicalize(ET.tostring(by_hand), strip_text=True)
        assert (by_nova.find('devices/memballoon') is not None) == balloon


needs_virsh = pytest.mark.skipif(
    not shutil.which('virsh') and not os.environ.get('NAP_REQUIRE_LIBVIRT'),
    reason='needs virsh (Debian libvirt-clients; set NAP_REQUIRE_LIBVIRT=1 '
           'to make this a failure)')


@needs_virsh
def test_libvirt_test_driver_reads_the_node(sim):
    """libvirt itself, not a hand-written expectation, reads the node XML:
    the domains run, and Nova's metadata (what the agent reads) survives
    libvirt's parsing."""
    start(sim, 'a', flavor='m1.paging')
    start(sim, 'b')
    uri = sim.libvirt_uri

    def virsh(*args):
        return subprocess.run(['virsh', '-c', uri] + list(args), check=True,
                              capture_output=True, text=True).stdout
    assert uri.startswith('test:///')
    assert sorted(virsh('list', '--name').split()) == ['a', 'b']
    meta = ET.fromstring(virsh('metadata', 'a', libvirt_xml.NOVA_NS))
    assert meta.find('flavor').get('name') == 'm1.paging'
    assert {e.get('name'): e.text for e in meta.iter('extraSpec')} == {
        'hw:paging': 'adaptive'}


# -- the real thing: FUSE and the command line --------------------------------
def _fuse_usable():
    return (os.path.exists('/dev/fuse') and os.geteuid() == 0
            and (shutil.which('fusermount3') or shutil.which('fusermount')))


needs_fuse = pytest.mark.skipif(
    not _fuse_usable() and not os.environ.get('NAP_REQUIRE_FUSE'),
    reason='needs /dev/fuse, root and fusermount (set NAP_REQUIRE_FUSE=1 '
           'to make this a failure)')


def _cli(*args, **kw):
    return subprocess.run(
        [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli'] + list(args),
        capture_output=True, text=True, **kw)


@needs_fuse
def test_sim_host_over_fuse_passes_conformance_and_churns(tmp_path):
    root = str(tmp_path / 'node')
    proc = subprocess.Popen(
        [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli', 'sim-host',
         '--root', root, '--vms', '2', '--speed', '20', '--duration', '600'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mount = os.path.join(root, 'sys')
    try:
        # Generous: on a loaded machine importing Nova alone takes seconds.
        for _ in range(1200):
            if os.path.ismount(mount) and os.path.isdir(
                    os.path.join(root, spec.DEBUGFS_DIR)):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        results = conformance.run(files.FileTransport(root))
        assert [r for r in results if r[1] is not None] == []
        # What the agent publishes for this host: a patched host with NPT.
        assert probe.detect(root, 'amd-zen3', False).modes == set(
            vocabulary.Paging)
        done = _cli('abi', 'conformance', '--root', root)
        passed = '%d passed, 0 failed' % len(conformance.CHECKS)
        assert done.returncode == 0 and passed in done.stdout
        transport = files.FileTransport(root)
        with pytest.raises(OSError) as err:
            transport.write('%s/%s' % (spec.PARAMS_DIR,
                                       spec.PARAM_THRESHOLDS), 'bogus\n')
        assert err.value.errno == spec.EINVAL
        before = set(transport.listdir(spec.DEBUGFS_DIR))
        assert _cli('sim-vm', 'start', '--root', root, 'c', '--trace', 'mcf',
                    '--extra-spec', 'hw:paging=adaptive').returncode == 0
        assert _cli('sim-vm', 'migrate', '--root', root,
                    'instance-00000001').returncode == 0
        failed = _cli('sim-vm', 'stop', '--root', root, 'nope')
        assert failed.returncode == 2 and 'nope' in failed.stderr
        after = set(transport.listdir(spec.DEBUGFS_DIR))
        assert len(after) == 2 and after != before
        assert sorted(os.listdir(os.path.join(root, simhost.PID_DIR))) == [
            'c.pid', 'instance-00000002.pid']
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    assert not os.path.ismount(mount)


def test_time_in_a_mode_does_not_depend_on_when_the_timer_is_handled(
        tmp_path):
    """The sampling timer fires every 5 s of simulated time; a host that
    handles it 2 s late (ticks every 7 s) must charge the same time to
    each mode and make the same progress as one that ticks every second:
    the switch happens when the timer fired."""
    seen = []
    for step in (1.0, 7.0):
        clock = FakeClock()
        host = simhost.SimHost(str(tmp_path / str(step)), NEHALEM,
                               profiles.builtin(), clock=clock)
        host.clock = clock
        vm = start(host, 'a', trace='phases-tlb-fault')
        vm.model.write(spec.FILE_POLICY, 'adaptive\n')
        run(host, 700, step)
        stats = spec.parse_stats(vm.model.read(spec.FILE_STATS))
        seen.append((stats['switches_to_shadow'], stats['switches_to_hap'],
                     stats['time_hap_ns'], stats['time_shadow_ns'],
                     vm.counters()))
    on_time, late = seen
    assert on_time[0] > 0 and on_time[1] > 0       # it did switch
    assert late[:2] == on_time[:2]
    for got, want in zip(late[2:4], on_time[2:4]):
        assert got == pytest.approx(want, abs=1000)
    assert late[4] == pytest.approx(on_time[4], rel=1e-9)
