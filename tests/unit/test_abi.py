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

"""The interface's formats, its reference model, and the conformance suite
(which must pass on the model and catch implementations that deviate)."""

import errno
import itertools

import pytest

from nova_adaptive_paging.abi import conformance
from nova_adaptive_paging.abi import model
from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import dsp
from nova_adaptive_paging import profiles
from nova_adaptive_paging.host import files

from tests.unit import paper_rules

VM = 'sys/kernel/debug/kvm/4242-11/'
THR = 'sys/module/kvm/parameters/dsp_thresholds'


def make_host(**vm_kwargs):
    clock = itertools.count(0, 10 ** 6)
    host = model.HostModel(
        spec.ThresholdSet.from_profile(profiles.builtin()),
        lambda: next(clock))
    host.add_vm('4242-11', **vm_kwargs)
    return host


def errno_of(call, *args):
    with pytest.raises(OSError) as err:
        call(*args)
    return err.value.errno


def test_threshold_line_round_trip():
    line = ('tlb_upper=10000 tlb_lower=100 pf_upper=5000000 '
            'pf_lower=100000 pt_upper=200000 pt_lower=150000 history=3 '
            'interval_ms=5000 tlb_cost_ps=4000 pf_cost_ps=10000000 '
            'switch_cost_ns=28648000 budget_ppm=5000 '
            'switch_ns_per_gib=27648000 cr3_cost_ps=2000000\n')
    assert spec.ThresholdSet.from_profile(profiles.builtin()).format() == \
        line
    assert spec.ThresholdSet.parse(line).format() == line


def test_a_version_2_line_keeps_its_meaning():
    """A set without the guard's keys (as version 2 wrote it) is taken,
    with no per-event costs (the guard then only caps the rate), the
    default budget, no price per GiB (version 3 wrote none) and no price
    of a CR3 load (version 5 wrote none); read back, it names every
    key."""
    v2 = ('tlb_upper=10000 tlb_lower=100 pf_upper=5000000 '
          'pf_lower=100000 pt_upper=200000 pt_lower=150000 history=3 '
          'interval_ms=5000')
    got = spec.ThresholdSet.parse(v2)
    assert got.guard == dsp.Guard() and not got.guard.priced
    assert got.format() == (v2 + ' tlb_cost_ps=0 pf_cost_ps=0 '
                            'switch_cost_ns=0 budget_ppm=5000 '
                            'switch_ns_per_gib=0 cr3_cost_ps=0\n')
    for bad in (' budget_ppm=1000001', ' tlb_cost_ps=281474976710656',
                ' budget_ppm=5 budget_ppm=5', ' switch_cost_ns=-1',
                ' switch_ns_per_gib=281474976710656',
                ' cr3_cost_ps=281474976710656',
                ' cr3_cost_ps=1 cr3_cost_ps=1'):
        with pytest.raises(spec.AbiFormatError):
            spec.ThresholdSet.parse(v2 + bad)


def test_stats_round_trip():
    host = make_host()
    stats = spec.parse_stats(host.read(VM + 'paging_stats'))
    assert stats['abi_version'] == spec.ABI_VERSION
    assert stats['mode'] == 'hap' and stats['pf_source'] == 'none'
    assert spec.parse_stats(spec.format_stats(stats)) == stats


def test_a_key_added_at_the_end_is_read_past_and_nowhere_else():
    """The interface adds paging_stats keys at the end within a version:
    a reader skips what follows the keys it knows, but a key it does not
    know among them is a kernel it does not understand."""
    text = make_host().read(VM + 'paging_stats')
    later = spec.parse_stats(text + 'walk_ns 42\nother_thing 7\n')
    assert later == spec.parse_stats(text)
    lines = text.splitlines(True)
    with pytest.raises(spec.AbiFormatError, match="line 3: unknown key"):
        spec.parse_stats(''.join(lines[:2] + ['walk_ns 42\n'] + lines[2:]))


def test_policy_writes_switch_and_account_time():
    host = make_host()
    host.write(VM + 'paging_policy', 'shadow\n')
    host.write(VM + 'paging_policy', 'hap\n')
    stats = spec.parse_stats(host.read(VM + 'paging_stats'))
    assert stats['switches_to_shadow'] == stats['switches_to_hap'] == 1
    assert stats['time_hap_ns'] > 0 and stats['time_shadow_ns'] > 0


def test_vm_that_needs_tdp_refuses_shadow():
    host = make_host(can_shadow=False)
    assert errno_of(host.write, VM + 'paging_policy',
                    'shadow') == errno.EOPNOTSUPP
    assert errno_of(host.write, VM + 'paging_policy',
                    'adaptive') == errno.EOPNOTSUPP
    assert host.read(VM + 'paging_mode') == 'hap\n'
    stats = spec.parse_stats(host.read(VM + 'paging_stats'))
    assert stats['switches_refused'] == 2


@pytest.mark.parametrize('policy,to_hap', [('shadow', 1), ('adaptive', 0)])
def test_a_vm_ruled_out_after_its_policy_goes_back_to_hap(policy, to_hap):
    # What paging_switch_abi_test's "after the fact" checks see on the
    # patched kernel (section 8 of the interface document).
    host = make_host()
    host.write(VM + 'paging_policy', policy)
    host.vms['4242-11'].forbid_shadow()
    assert host.read(VM + 'paging_policy') == 'hap\n'
    assert host.read(VM + 'paging_mode') == 'hap\n'
    stats = spec.parse_stats(host.read(VM + 'paging_stats'))
    assert (stats['switches_refused'], stats['switches_to_hap']) == \
        (1, to_hap)
    assert errno_of(host.write, VM + 'paging_policy',
                    'shadow') == errno.EOPNOTSUPP


def test_guest_fault_source_precedence():
    vm = make_host().vms['4242-11']
    second = 10 ** 9
    assert vm.guest_faults(7, second) == (None, 'none')    # HAP
    vm.switch('shadow')
    # The interval the switch fell in was partly HAP: its count is partial.
    vm.timer_sample(None, None, intercepted=7)
    assert vm.stats['pf_source'] == 'none'
    assert vm.guest_faults(7, second) == (7, 'intercept')
    vm.write('paging_guest_faults', '100')      # baseline only
    vm.write('paging_guest_faults', '130')
    assert vm.guest_faults(7, second) == (30, 'user')
    assert vm.stats['guest_faults_clamped'] == 0


def test_a_fed_count_that_goes_back_or_beyond_the_vcpus_is_bounded():
    """A guest page fault takes a vCPU at least 100 ns: in one second two
    vCPUs cannot fault more than 2 * 10^7 times, whatever the guest
    reports; a total that went back (a reboot, or a lie) is no data, not
    a made-up count; the sum never wraps; each case is counted."""
    vm = make_host().vms['4242-11']
    vm.vcpus = 2
    second = 10 ** 9
    vm.write('paging_guest_faults', '100')
    vm.write('paging_guest_faults', '12')       # went back
    assert vm.guest_faults(7, second) == (None, 'none')
    vm.write('paging_guest_faults', str(dsp.U64_MAX))
    vm.write('paging_guest_faults', '0')
    vm.write('paging_guest_faults', str(dsp.U64_MAX))
    assert vm.guest_faults(7, second) == (None, 'none')
    vm.write('paging_guest_faults', str(dsp.U64_MAX))   # no increase
    assert vm.guest_faults(7, second) == (0, 'user')
    vm.write('paging_guest_faults', '0')
    vm.write('paging_guest_faults', str(2 * 10 ** 7 + 1))
    assert vm.guest_faults(7, second) == (None, 'none')
    vm.write('paging_guest_faults', str(4 * 10 ** 7 + 2))
    assert vm.guest_faults(7, second) == (2 * 10 ** 7, 'user')
    assert vm.stats['guest_faults_clamped'] == 4


def test_intercepted_faults_drive_the_engine_and_a_forced_switch_voids_them():
    host = make_host()
    vm = host.vms['4242-11']
    vm.write('paging_policy', 'shadow')
    vm.timer_sample(None, None, intercepted=3)        # partial interval
    vm.timer_sample(10 ** 9, 10, intercepted=3)
    assert vm.stats['pf_source'] == 'intercept'
    vm.write('paging_policy', 'adaptive')
    # The counters open at the first sample under adaptive: it has none.
    vm.timer_sample(10 ** 9, 10, intercepted=10 ** 5)
    assert (vm.stats['pmu'], vm.stats['last_rule']) == (0, 9)
    # Few TLB misses and many faults: history 3 samples, then HAP (rule 2).
    for _ in range(3):
        vm.timer_sample(10 ** 9, 10, intercepted=10 ** 5)
    assert vm.mode == 'hap'
    vm.write('paging_switch', 'shadow')          # forced: between samples
    vm.timer_sample(10 ** 9, 10, intercepted=5)
    assert (vm.stats['pf_source'], vm.stats['last_rule']) == ('none', 9)
    vm.timer_sample(10 ** 9, 10, intercepted=5)
    assert (vm.stats['pf_source'], vm.stats['last_page_faults']) == (
        'intercept', 5)


def test_host_threshold_change_reaches_vms_without_override():
    host = make_host()
    line = host.read(THR).replace('history=3', 'history=5')
    host.write(THR, line)
    assert host.vms['4242-11'].engine.history == 5
    assert 'history=5' in host.read(VM + 'paging_thresholds')


def test_conformance_passes_on_the_reference_model():
    # The model runs dsp.Engine: its decisions are checked against the
    # paper's rules written out as a table (paper_rules), not against
    # dsp.Engine itself.
    host = make_host()
    host.add_vm('4243-12', can_shadow=False)
    results = conformance.run(host, reference=paper_rules.Engine)
    assert [r for r in results if r[1] is not None] == []
    assert len(results) == len(conformance.CHECKS) >= 12
    assert not host.inject          # put back as found
    assert host.vms['4242-11'].policy == 'hap'


def test_conformance_picks_a_vm_that_can_switch():
    host = make_host(can_shadow=False)
    host.add_vm('9-9')
    assert conformance.find_vm(host) == '9-9'


def test_conformance_without_vm_reports_it():
    host = make_host(can_shadow=False)
    results = dict(conformance.run(host))
    assert results['check_discovery'] is None
    assert 'no running VM' in results['check_forced_switch']


def test_the_reference_sequence_really_switches():
    """The adaptive check must exercise switches in both directions."""
    host = make_host()
    conformance.Suite(host, '4242-11', paper_rules.Engine) \
        .check_adaptive_follows_reference()
    stats = host.vms['4242-11'].stats
    assert stats['switches_to_shadow'] >= 3
    assert stats['switches_to_hap'] >= 3


# -- implementations with one deviation each: the suite must catch them --
class LeakyRejects(model.VmModel):
    """Applies the policy before validating it."""

    def _write_policy(self, text):
        self.policy = text.strip()
        super()._write_policy(text)


class NoCounting(model.VmModel):
    def switch(self, mode, cost_ns=0):
        changed = super().switch(mode, cost_ns)
        if changed:
            self.stats['switches_to_%s' % mode] -= 1
        return changed


class LaxSwitch(model.VmModel):
    """Allows forced switches under a fixed policy."""

    def _write_switch(self, text):
        self.switch(spec.parse_word(text, spec.MODES))


class OffByOneRule(model.VmModel):
    """Compares FTLB >= TLBU instead of >, like a sloppy C port."""

    def sample(self, instructions, tlb_misses, page_faults, pf_source,
               elapsed_ns=0, **more):
        t = self.engine.thresholds
        self.engine.thresholds = dsp.Thresholds(
            max(t.tlb_upper - 1, t.tlb_lower), *t.as_tuple()[1:])
        try:
            return super().sample(instructions, tlb_misses, page_faults,
                                  pf_source, elapsed_ns, **more)
        finally:
            self.engine.thresholds = t


class NoWindowRestart(model.VmModel):
    def switch(self, mode, cost_ns=0):
        window = list(self.engine.window)
        changed = super().switch(mode, cost_ns)
        self.engine.window.extend(window)
        return changed


class NoRateCap(model.VmModel):
    """Runs the engine without the switch guard (a version 2 kernel)."""

    def _new_engine(self):
        t = self.effective_thresholds()
        return dsp.Engine(t.thresholds, t.history, dsp.Mode.parse(self.mode))


class IgnoresCr3(model.VmModel):
    """Reports the loads of CR3 but gives the engine none (a kernel
    that counts them and forgets to pass them on)."""

    def sample(self, *args, cr3_loads=0, **more):
        changed = super().sample(*args, **more)
        self.stats['last_cr3_loads'] = cr3_loads
        return changed


@pytest.mark.parametrize('broken,check', [
    (LeakyRejects, 'check_policy_rejects_bad_values'),
    (NoCounting, 'check_fixed_policies_switch_and_count'),
    (LaxSwitch, 'check_forced_switch'),
    (OffByOneRule, 'check_adaptive_follows_reference'),
    (NoWindowRestart, 'check_adaptive_follows_reference'),
    (NoRateCap, 'check_switch_rate_cap'),
    (NoRateCap, 'check_adaptive_follows_reference'),
    (IgnoresCr3, 'check_cr3_loads_priced'),
])
def test_conformance_catches_deviations(monkeypatch, broken, check):
    monkeypatch.setattr(model, 'VmModel', broken)
    host = make_host()
    results = dict(conformance.run(host, '4242-11'))
    assert results[check] is not None, results


def materialize(host, root):
    """Copy the model's readable files into plain files under root."""
    for rel in (spec.PARAMS_DIR, spec.DEBUGFS_DIR):
        for name in host.listdir(rel):
            names = ([name] if rel == spec.PARAMS_DIR
                     else ['%s/%s' % (name, f) for f in spec.VM_FILES])
            for sub in names:
                path = root / rel / sub
                path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    path.write_text(host.read('%s/%s' % (rel, sub)))
                except OSError:
                    path.write_text('')      # write-only file


def test_plain_files_cannot_pass(tmp_path):
    """A directory of plain files reads right but cannot refuse writes."""
    materialize(make_host(), tmp_path)
    t = files.FileTransport(str(tmp_path))
    results = dict(conformance.run(t, '4242-11'))
    assert results['check_discovery'] is None
    assert 'succeeded; expected EINVAL' in \
        results['check_policy_rejects_bad_values']
    assert 'succeeded; expected EPERM' in results['check_forced_switch']


@pytest.mark.parametrize('vendor,tdp', [('kvm_amd', True),
                                        ('kvm_intel', False)])
def test_vendor_tdp_parameter(vendor, tdp):
    host = model.HostModel(
        spec.ThresholdSet.from_profile(profiles.builtin()), lambda: 0,
        vendor=vendor, tdp=tdp)
    param = dict(spec.VENDOR_TDP_PARAMS)[vendor]
    rel = '%s/%s' % (spec.vendor_params_dir(vendor), param)
    assert host.read(rel) == ('Y\n' if tdp else 'N\n')
    assert host.listdir(spec.vendor_params_dir(vendor)) == [param]
    assert errno_of(host.write, rel, 'Y') == errno.EPERM
    vm = host.add_vm('1-1')
    assert vm.mode == ('hap' if tdp else 'shadow')
    assert vm.can['hap'] == tdp


def test_vm_thresholds_read_format_round_trips_and_is_strict():
    t = spec.ThresholdSet(dsp.Thresholds(5, 4, 3, 2, 1, 0), 2, 1000)
    for override in (False, True):
        text = spec.format_vm_thresholds(t, override)
        assert text.endswith(' override=%d\n' % override)
        assert spec.parse_vm_thresholds(text) == (t, override)
    for bad in (t.format(), t.format().strip() + ' override=2',
                'override=1 ' + t.format()):
        with pytest.raises(spec.AbiFormatError):
            spec.parse_vm_thresholds(bad)


def test_walk_cycles_count_toward_the_mode_of_a_whole_interval():
    """dsp_walk_events: the walk cycles of an interval with open counters
    and a named event go to the mode it ran in; none without a named
    event, and none for an interval a switch split (section 5)."""
    host = make_host()
    vm = host.vms['4242-11']
    walk = spec.param_path(spec.PARAM_WALK_EVENTS)
    assert host.read(walk) == 'load=0 store=0\n'
    vm.write('paging_policy', 'hap')
    vm.write('paging_policy', 'adaptive')
    # A walk of the tables is long, and there are few: stay in hap.
    quiet = dict(instructions=10 ** 9, tlb_misses=10 ** 3, intercepted=0)
    vm.timer_sample(walk_cycles=7, **quiet)         # counters open here
    vm.timer_sample(walk_cycles=11, **quiet)        # no event named
    assert (vm.stats['pmu'], vm.stats['walk_pmu']) == (1, 0)
    assert vm.stats['hap_walk_cycles'] == 0
    host.write(walk, 'store=4169 load=4104\n')
    assert host.read(walk) == 'load=4104 store=4169\n'
    vm.timer_sample(walk_cycles=13, **quiet)        # events open here
    vm.timer_sample(walk_cycles=17, **quiet)
    assert (vm.stats['walk_pmu'], vm.stats['hap_walk_cycles']) == (1, 17)
    # Counted under shadow too, on a host that profiles every VM.
    host.write(spec.param_path(spec.PARAM_PMU_ALL), 'Y')
    vm.write('paging_policy', 'shadow')             # splits the interval
    vm.timer_sample(walk_cycles=19, **quiet)
    vm.timer_sample(walk_cycles=23, **quiet)
    assert (vm.stats['hap_walk_cycles'], vm.stats['shadow_walk_cycles']) \
        == (17, 23)
    for bad in ('load=1', 'load=1 store=2 load=3', 'load=4294967296 store=0',
                'load=0x10 store=0', ''):
        assert errno_of(host.write, walk, bad) == errno.EINVAL
    assert host.read(walk) == 'load=4104 store=4169\n'


def test_the_walk_event_table_cites_its_events():
    """Every generation cpu.py knows either has its two walk-cycle events
    (raw config = event | umask << 8) or a reason; the figures checked
    here are the Linux 6.12 perf event lists', read independently."""
    from nova_adaptive_paging import cpu
    from nova_adaptive_paging import pmu_events
    known = {'intel-westmere': (0x0408, 0x0449),
             'intel-ivybridge': (0x8408, 0x0449),
             'intel-haswell': (0x1008, 0x1049),
             'intel-icelake-server': (0x1008, 0x1049),
             'intel-sapphirerapids-server': (0x1012, 0x1013)}
    for key, (load, store) in known.items():
        assert pmu_events.walk_events(key).configs() == {
            'load': load, 'store': store}, key
    for key in ('intel-nehalem', 'amd-zen3', 'amd-zen4', 'intel-6-999'):
        events = pmu_events.walk_events(key)
        assert not events.counted and events.reason, key
        assert events.configs() == {'load': 0, 'store': 0}
    for key in cpu.named_keys():
        events = pmu_events.walk_events(key)
        assert events.counted or events.reason != pmu_events.UNKNOWN, key
