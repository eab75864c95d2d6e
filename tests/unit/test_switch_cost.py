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

"""The switch-cost measurement against the reference host model.

The model stands in for a patched host (every figure it gives is
modeled); the workload is a real command that sleeps.
"""

import errno
import os
import time

from click.testing import CliRunner
import pytest

from nova_adaptive_paging.abi import model
from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.cmd import cli
from nova_adaptive_paging.cmd import switch_cost as switch_cost_cmd
from nova_adaptive_paging.host import switch_cost
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging.simhost import control
from nova_adaptive_paging import dsp
from nova_adaptive_paging import profiles
from nova_adaptive_paging import costmodel

NAME = '4242-11'
WORKLOAD = 'sleep 0.05'
OVERRIDE = ('tlb_upper=9000 tlb_lower=90 pf_upper=4000000 pf_lower=90000 '
            'pt_upper=190000 pt_lower=140000 history=5 interval_ms=2000 '
            'tlb_cost_ps=0 pf_cost_ps=0 switch_cost_ns=0 budget_ppm=5000 '
            'switch_ns_per_gib=0 cr3_cost_ps=0\n')


def make_host(**vm_kwargs):
    host = model.HostModel(
        spec.ThresholdSet.from_profile(profiles.builtin()),
        time.monotonic_ns)
    host.add_vm(NAME, **vm_kwargs)
    return host


class Wrapped:
    """A transport around the model that can hide, alter or break files."""

    def __init__(self, host, hide=(), values=None, on_write=None):
        self.host = host
        self.hide = hide
        self.values = values or {}
        self.on_write = on_write
        self.writes = []

    def read(self, rel):
        if rel in self.hide:
            raise OSError(errno.ENOENT, rel)
        if rel in self.values:
            return self.values[rel]
        return self.host.read(rel)

    def write(self, rel, text):
        self.writes.append((rel, text))
        if self.on_write:
            self.on_write(self, rel, text)
        return self.host.write(rel, text)

    def listdir(self, rel):
        return self.host.listdir(rel)

    def exists(self, rel):
        return rel not in self.hide and self.host.exists(rel)


class Paced(Wrapped):
    """The model with a log of the switch writes, and a workload that
    ends after ``trips`` round trips in a round-trip run and at once in a
    static one: how many round trips a run sees no longer depends on how
    fast this machine runs the sleeps."""

    def __init__(self, host, tmp_path, trips=2, **kw):
        super().__init__(host, **kw)
        self.log = tmp_path / 'switches'
        self.policy = tmp_path / 'policy'
        self.log.write_text('')
        self.policy.write_text('')
        # The policy file holds the last policy written and the number of
        # switch writes logged by then (the run's baseline): a round trip
        # made before the shell has started still counts.
        self.workload = (
            'set -- $(cat {policy}); '
            'if [ "$1" = adaptive ]; then '
            'while [ $(( $(wc -l < {log}) - $2 )) -lt {writes} ]; do '
            'sleep 0.002; done; fi'.format(log=self.log, policy=self.policy,
                                           writes=2 * trips))

    def write(self, rel, text):
        result = super().write(rel, text)
        if rel.endswith(spec.FILE_SWITCH):
            with open(self.log, 'a') as f:
                f.write(text)
        elif rel.endswith(spec.FILE_POLICY):
            logged = len(self.log.read_text().splitlines())
            self.policy.write_text('%s %d\n' % (text.strip(), logged))
        return result


def vm_state(host):
    vm = host.vms[NAME]
    return (vm.policy, vm.mode, vm.override and vm.override.format())


def stats(host):
    return spec.parse_stats(host.read('%s/%s/%s' % (
        spec.DEBUGFS_DIR, NAME, spec.FILE_STATS)))


def test_five_runs_count_round_trips_and_restore_policy(tmp_path):
    host = make_host()
    host.write('%s/%s/%s' % (spec.DEBUGFS_DIR, NAME, spec.FILE_POLICY),
               'shadow\n')
    before = vm_state(host)
    paced = Paced(host, tmp_path)
    cost = switch_cost.SwitchCost(paced, NAME, paced.workload, repeats=2,
                                  period=0.01)
    results = cost.run()
    assert vm_state(host) == before == ('shadow', 'shadow', None)
    for kind in ('hap', 'shadow'):
        assert [r.round_trips for r in results[kind]] == [0, 0]
    for kind in ('h-s-h', 's-h-s'):
        for r in results[kind]:
            # The workload ran until it had seen two round trips.
            assert r.round_trips >= 2
            assert r.to_hap == r.to_shadow == r.round_trips
            assert r.seconds >= 0.01
    # Every round trip went through paging_switch under policy adaptive.
    trips = sum(r.round_trips for kind in ('h-s-h', 's-h-s')
                for r in results[kind])
    s = stats(host)
    assert s['switches_to_hap'] >= trips
    lines = switch_cost.table(results)
    assert lines[0].split()[:3] == ['run', 'reps', 'median_s']
    assert [line.split()[0] for line in lines[1:5]] == list(
        switch_cost.RUNS)


def test_adaptive_vm_gets_mode_and_override_back():
    host = make_host()
    vm_dir = '%s/%s/' % (spec.DEBUGFS_DIR, NAME)
    host.write(vm_dir + spec.FILE_THRESHOLDS, OVERRIDE)
    host.write(vm_dir + spec.FILE_POLICY, 'shadow\n')
    host.write(vm_dir + spec.FILE_POLICY, 'adaptive\n')
    before = vm_state(host)
    switch_cost.SwitchCost(host, NAME, WORKLOAD, repeats=1,
                           period=0.01).run()
    assert vm_state(host) == before == ('adaptive', 'shadow', OVERRIDE)


def test_engine_cannot_decide_during_round_trip_runs():
    seen = []

    def spy(t, rel, text):
        if rel.endswith(spec.FILE_SWITCH):
            vm = t.host.vms[NAME]
            seen.append(vm.effective_thresholds())
    host = make_host()
    switch_cost.SwitchCost(Wrapped(host, on_write=spy), NAME, WORKLOAD,
                           repeats=1, period=0.01,
                           runs=('h-s-h',)).run()
    assert seen
    assert all(t.history == dsp.HISTORY_MAX
               and t.interval_ms == spec.INTERVAL_MS_RANGE[1] for t in seen)
    assert host.vms[NAME].override is None


def test_missing_abi_is_refused_naming_the_file():
    host = make_host()
    abi = '%s/%s' % (spec.PARAMS_DIR, spec.PARAM_ABI)
    t = Wrapped(host, hide=(abi,))
    with pytest.raises(vmfiles.Refused) as err:
        switch_cost.SwitchCost(t, NAME, WORKLOAD).run()
    assert abi in str(err.value) and 'missing' in str(err.value)
    assert 'ABI version %d' % spec.ABI_VERSION in str(err.value)
    assert t.writes == []


def test_other_abi_version_is_refused():
    host = make_host()
    abi = '%s/%s' % (spec.PARAMS_DIR, spec.PARAM_ABI)
    # Version 1 had no VM-fd path: an agent of version 2 cannot drive it.
    t = Wrapped(host, values={abi: '1\n'})
    with pytest.raises(vmfiles.Refused, match=r': 1; expected ABI'):
        switch_cost.SwitchCost(t, NAME, WORKLOAD).run()
    assert t.writes == []


def test_vm_that_cannot_shadow_is_refused_and_left_alone():
    host = make_host(can_shadow=False)
    with pytest.raises(vmfiles.Refused) as err:
        switch_cost.SwitchCost(host, NAME, WORKLOAD).run()
    msg = str(err.value)
    assert spec.FILE_POLICY in msg and "'adaptive'" in msg
    assert 'EOPNOTSUPP' in msg and 'hap and in shadow' in msg
    assert vm_state(host) == ('hap', 'hap', None)
    assert stats(host)['switches_to_shadow'] == 0


def test_missing_vm_is_refused():
    host = make_host()
    with pytest.raises(vmfiles.Refused, match='1-2/paging_policy'):
        switch_cost.SwitchCost(host, '1-2', WORKLOAD).run()


def test_interrupt_restores_policy():
    def interrupt(t, rel, text):
        if rel.endswith(spec.FILE_SWITCH) and text == 'shadow\n':
            raise KeyboardInterrupt()
    host = make_host()
    with pytest.raises(KeyboardInterrupt):
        switch_cost.SwitchCost(Wrapped(host, on_write=interrupt), NAME,
                               'sleep 5', period=0.01,
                               runs=('h-s-h',)).run()
    assert vm_state(host) == ('hap', 'hap', None)


def test_failing_workload_is_an_error_and_restores_policy():
    host = make_host()
    with pytest.raises(switch_cost.MeasurementError, match='status 3'):
        switch_cost.SwitchCost(host, NAME, 'exit 3', runs=('shadow',)).run()
    assert vm_state(host) == ('hap', 'hap', None)


def test_foreign_switch_invalidates_the_run():
    def meddle(t, rel, text):
        # Someone else switches the VM during the run.
        if rel.endswith(spec.FILE_SWITCH) and text == 'hap\n':
            t.host.vms[NAME].switch('hap')
            t.host.vms[NAME].switch('shadow')
    host = make_host()
    with pytest.raises(switch_cost.MeasurementError,
                       match='something else switched'):
        switch_cost.SwitchCost(Wrapped(host, on_write=meddle), NAME,
                               WORKLOAD, period=0.01, runs=('s-h-s',)).run()
    assert vm_state(host) == ('hap', 'hap', None)


def test_at_fractions_need_the_static_run_first(tmp_path):
    host = make_host()
    paced = Paced(host, tmp_path, trips=2)
    cost = switch_cost.SwitchCost(paced, NAME, paced.workload, repeats=1,
                                  at=[0.3, 0.6], runs=('hap', 'h-s-h'))
    results = cost.run()
    # Two fractions, two round trips: no more are scheduled, and the
    # workload waits for both.
    assert [r.round_trips for r in results['h-s-h']] == [2]
    with pytest.raises(switch_cost.MeasurementError, match='needs the'):
        switch_cost.SwitchCost(host, NAME, WORKLOAD, at=[0.5],
                               runs=('s-h-s',)).run()
    assert vm_state(host) == ('hap', 'hap', None)


def test_domain_maps_to_its_vm_directory(tmp_path):
    host = make_host()
    pid_dir = tmp_path / 'run/libvirt/qemu'
    pid_dir.mkdir(parents=True)
    (pid_dir / 'instance-1.pid').write_text('4242\n')
    (pid_dir / 'instance-2.pid').write_text('77\n')
    assert vmfiles.vm_for_domain(str(tmp_path), host,
                                 'instance-1') == NAME
    with pytest.raises(vmfiles.Refused, match='0 VM directories'):
        vmfiles.vm_for_domain(str(tmp_path), host, 'instance-2')
    with pytest.raises(vmfiles.Refused, match='pid file'):
        vmfiles.vm_for_domain(str(tmp_path), host, 'instance-3')


def test_cli_labels_simulated_host_as_modeled(tmp_path, monkeypatch):
    host = make_host()
    os.makedirs(tmp_path / control.CONTROL_DIR)
    monkeypatch.setattr(switch_cost_cmd.host_transport, 'for_root',
                        lambda root: host)
    result = CliRunner().invoke(cli.main, [
        'abi', 'switch-cost', '--root', str(tmp_path), '--vm', NAME,
        '--workload', WORKLOAD, '--repeats', '1', '--period', '0.01'])
    assert result.exit_code == 0, result.output
    assert costmodel.MODELED_NOTE in result.output
    assert 'h-s-h' in result.output and 'per_trip_ms' in result.output
    assert vm_state(host) == ('hap', 'hap', None)


def test_cli_refuses_host_without_the_patch(tmp_path):
    result = CliRunner().invoke(cli.main, [
        'abi', 'switch-cost', '--root', str(tmp_path), '--vm', NAME,
        '--workload', WORKLOAD])
    assert result.exit_code == 2
    assert 'paging_switch_abi: missing; expected ABI version %d' % \
        spec.ABI_VERSION in \
        result.output


def test_failed_restore_says_what_the_vm_was():
    def refuse_default(t, rel, text):
        if rel.endswith(spec.FILE_THRESHOLDS) and text == 'default\n':
            raise OSError(errno.EPERM, rel)
    host = make_host()
    with pytest.raises(switch_cost.MeasurementError,
                       match='could not be put back to policy hap, mode '
                             'hap, thresholds host default'):
        switch_cost.SwitchCost(Wrapped(host, on_write=refuse_default),
                               NAME, WORKLOAD, repeats=1, period=0.01,
                               runs=('h-s-h',)).run()
