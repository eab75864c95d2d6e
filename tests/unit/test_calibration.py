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

"""The calibration microbenchmarks (built with this machine's gcc and
run natively), the calibration runs against the reference host model,
and the fit of per-event costs."""

import json
import os
import shutil
import subprocess

from click.testing import CliRunner
import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.cmd import cli
from nova_adaptive_paging.host import calibration_runs
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging.tuning import cost_fit
from tests.unit import test_switch_cost as sc

SOURCES = os.path.join(os.path.dirname(__file__), '..', '..', 'ansible',
                       'roles', 'calibrate', 'files')


@pytest.fixture(scope='module')
def bench_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp('bench')
    for name in os.listdir(SOURCES):
        shutil.copy(os.path.join(SOURCES, name), out)
    subprocess.run(['make', '-s', '-C', str(out)], check=True)
    return str(out)


def run(bench_dir, program, *args):
    done = subprocess.run([os.path.join(bench_dir, program)] + list(args),
                          capture_output=True, text=True, timeout=120)
    return done


def test_fault_churn_faults_at_least_once_per_page_touched(bench_dir):
    done = run(bench_dir, 'nap-fault-churn', '--pages', '512', '--rounds',
               '8', '--forks', '3')
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # mmap/touch/munmap rounds, the first touch of the forked mapping
    # and each child's copy on write: one minor fault per page each.
    assert result['pages_touched'] == 512 * (8 + 3 + 1)
    assert result['minflt'] >= result['pages_touched']
    calibration_runs.parse_output(done.stdout, calibration_runs.FAULT, 'test')


def test_tlb_chase_time_per_access_grows_with_the_working_set(bench_dir):
    def ns(pages):
        done = run(bench_dir, 'nap-tlb-chase', '--pages', str(pages),
                   '--accesses', '4000000')
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)['ns_per_access']

    # 16 pages fit any first-level TLB; 32768 pages (128 MiB apart) are
    # far past the reach of any second-level TLB: every access misses.
    small = min(ns(16) for _ in range(3))
    large = min(ns(32768) for _ in range(3))
    assert large > 2 * small, (small, large)


def test_a_bad_benchmark_argument_is_one_line_and_exit_2(bench_dir):
    done = run(bench_dir, 'nap-tlb-chase', '--pages', 'many')
    assert done.returncode == 2
    assert done.stdout == ''
    assert done.stderr == '--pages: many; expected an integer >= 2\n'
    done = run(bench_dir, 'nap-fault-churn', '--bogus', '1')
    assert done.returncode == 2 and done.stderr.count('\n') == 1


def _result(bench, elapsed, minflt, count):
    doc = {'bench': bench, 'elapsed_s': elapsed, 'minflt': minflt,
           'tlb_misses': -1}
    doc[cost_fit.MISS_ESTIMATE[bench]] = count
    return doc


def synthetic(fault_s, miss_s, switch_ns, generation='amd-zen3',
              host='h1'):
    """Runs whose times follow the cost model exactly (the oracle)."""
    events = {calibration_runs.TLB: (2100, 20e6),
              calibration_runs.FAULT: (150e3, 150e3)}
    native = {calibration_runs.TLB: 0.4, calibration_runs.FAULT: 0.3}
    runs = []
    for bench, (faults, misses) in events.items():
        for kind in calibration_runs.KINDS:
            extra = {'hap': misses * miss_s, 'shadow': faults * fault_s,
                     'h-s-h': misses * miss_s}[kind]
            trips = 1 if kind == 'h-s-h' else 0
            runs.append({'bench': bench, 'kind': kind, 'repeat': 1,
                         'seconds': 1.0, 'round_trips': trips,
                         'switches': 2 * trips,
                         'switching_ns': 2 * trips * switch_ns,
                         'result': _result(bench, native[bench] + extra,
                                           faults, misses)})
    return {'format_version': 1, 'host': host, 'generation': generation,
            'vm': '1-2', 'repeats': 1, 'runs': runs, 'modeled': False}


def test_the_fit_recovers_the_costs_the_runs_were_made_with():
    fitted = cost_fit.fit([('a.json', synthetic(6e-6, 5e-9, 400e3)),
                           ('b.json', synthetic(8e-6, 3e-9, 600e3,
                                                host='h2')),
                           ('c.json', synthetic(12e-6, 4.5e-9, 900e3,
                                                'intel-skylake-server'))])
    assert sorted(fitted) == ['amd-zen3', 'intel-skylake-server']
    profile, hosts, costs = fitted['amd-zen3']
    assert [h.host for h in hosts] == ['h1', 'h2']
    assert costs.fault_s == pytest.approx(7e-6)      # median of two
    assert costs.miss_s == pytest.approx(4e-9)
    assert costs.switch_s == pytest.approx(500e-6)
    assert profile.provenance.method == 'calibrated'
    assert profile.provenance.hosts == 2
    assert 'hosts h1, h2' in profile.provenance.source
    assert 'MODELED' not in profile.provenance.source
    one = fitted['intel-skylake-server'][2]
    assert (one.fault_s, one.miss_s) == (pytest.approx(12e-6),
                                         pytest.approx(4.5e-9))


def test_a_load_during_some_repeats_does_not_move_the_fit():
    # Three repeats; other work on the host slowed two of them in each
    # mode, by different amounts (interference only ever adds time).
    doc = synthetic(6e-6, 5e-9, 400e3)
    runs = []
    slowed = {'hap': (0.0, 0.15, 0.4), 'shadow': (0.3, 0.1, 0.0),
              'h-s-h': (0.0, 0.0, 0.0)}
    for rep in range(3):
        for run in doc['runs']:
            run = json.loads(json.dumps(run))
            run['repeat'] = rep + 1
            run['result']['elapsed_s'] += slowed[run['kind']][rep]
            runs.append(run)
    doc['runs'] = runs
    costs = cost_fit.fit([('a.json', doc)])['amd-zen3'][2]
    assert (costs.fault_s, costs.miss_s) == (pytest.approx(6e-6),
                                             pytest.approx(5e-9))


def test_a_host_busy_through_every_run_does_not_move_the_fit():
    # Guests (or a build) kept the benchmark's CPU busy through every
    # run, so no repeat has an undisturbed wall time; the CPU seconds the
    # benchmarks print leave the wait out, and the fit takes those.
    doc = synthetic(6e-6, 5e-9, 400e3)
    waited = {'hap': (0.2, 0.5, 0.3), 'shadow': (0.6, 0.1, 0.4),
              'h-s-h': (0.0, 0.3, 0.0)}
    runs = []
    for rep in range(3):
        for run in doc['runs']:
            run = json.loads(json.dumps(run))
            run['repeat'] = rep + 1
            result = run['result']
            result['cpu_s'] = result['elapsed_s']
            result['elapsed_s'] += waited[run['kind']][rep]
            runs.append(run)
    doc['runs'] = runs
    costs = cost_fit.fit([('a.json', doc)])['amd-zen3'][2]
    assert (costs.fault_s, costs.miss_s) == (pytest.approx(6e-6),
                                             pytest.approx(5e-9))
    # The same runs judged by their wall time are off by far more.
    for run in runs:
        del run['result']['cpu_s']
    wall = cost_fit.fit([('a.json', doc)])['amd-zen3'][2]
    assert wall.miss_s != pytest.approx(5e-9, rel=0.35)


def test_more_expensive_faults_give_a_higher_pf_upper_threshold():
    cheap = cost_fit.fit([('a', synthetic(2e-6, 5e-9, 400e3))])['amd-zen3'][0]
    dear = cost_fit.fit([('a', synthetic(20e-6, 5e-9, 400e3))])['amd-zen3'][0]
    # Shadow pays per fault: the dearer a fault, the fewer faults it
    # takes to leave shadow mode (the paper's P-to-T break-even).
    assert dear.thresholds.pt_upper < cheap.thresholds.pt_upper


@pytest.mark.parametrize('edit, words', [
    (lambda d: d.update(format_version=2), 'format_version 2; expected 1'),
    (lambda d: d.update(generation='../x'), "generation '../x'"),
    (lambda d: d['runs'][0].update(kind='sideways'), 'runs[0]'),
    (lambda d: d['runs'][1]['result'].pop('minflt'), 'runs[1]'),
    (lambda d: d.update(runs=[r for r in d['runs'] if r['kind'] != 'shadow']),
     'no shadow run of tlb-chase'),
    (lambda d: [r.update(switches=0) for r in d['runs']],
     'no switch in the round-trip runs'),
    # The policy was not forced: both modes run alike.
    (lambda d: [r['result'].update(elapsed_s=0.5) for r in d['runs']],
     'expected both positive'),
])
def test_results_the_fit_cannot_use_are_named(edit, words):
    doc = synthetic(6e-6, 5e-9, 400e3)
    edit(doc)
    with pytest.raises(cost_fit.FitError) as exc:
        cost_fit.fit([('x.json', doc)])
    assert str(exc.value).startswith('x.json: ')
    assert words in str(exc.value)


def test_fit_cli_writes_a_profile_per_generation_or_nothing(tmp_path):
    good = tmp_path / 'good.json'
    good.write_text(json.dumps(synthetic(6e-6, 5e-9, 400e3)))
    bad = tmp_path / 'bad.json'
    bad.write_text('{"format_version": 1, "generation": "amd-zen3"')
    out = tmp_path / 'profiles'
    result = CliRunner().invoke(cli.main, ['calibration', 'fit', str(good),
                                           str(bad), '--out', str(out)])
    assert result.exit_code == 2
    assert result.output.count('\n') == 1
    assert 'bad.json: not JSON' in result.output
    assert not out.exists()
    result = CliRunner().invoke(cli.main, ['calibration', 'fit', str(good),
                                           '--out', str(out)])
    assert result.exit_code == 0, result.output
    assert os.listdir(out) == ['amd-zen3.yaml']
    check = CliRunner().invoke(cli.main, ['thresholds', 'check',
                                          str(out / 'amd-zen3.yaml')])
    assert check.exit_code == 0, check.output


def test_measure_runs_each_kind_and_puts_the_vm_back(tmp_path):
    host = sc.make_host()
    t = sc.Wrapped(host)
    vm = vmfiles.Vm(t, sc.NAME)
    vm.set_policy('shadow')
    line = json.dumps(_result(calibration_runs.TLB, 0.01, 10, 100))
    fault = json.dumps(_result(calibration_runs.FAULT, 0.01, 100, 100))
    bin_dir = tmp_path
    benches = calibration_runs.BENCHES
    for name, text in ((benches[calibration_runs.TLB], line),
                       (benches[calibration_runs.FAULT], fault)):
        path = bin_dir / name
        # A second long: the round trip, at half the static run's
        # median time, falls inside the run however loaded the machine
        # (the static run would have to take twice as long as this one).
        path.write_text("#!/bin/sh\nsleep 1\necho '%s'\n" % text)
        path.chmod(0o755)
    cpuinfo = tmp_path / 'proc' / 'cpuinfo'
    cpuinfo.parent.mkdir()
    cpuinfo.write_text('vendor_id\t: AuthenticAMD\ncpu family\t: 25\n'
                       'model\t\t: 1\n\n')
    doc = calibration_runs.measure(t, sc.NAME, str(bin_dir), repeats=1,
                                   root=str(tmp_path), host='h1')
    assert doc['generation'] == 'amd-zen3'
    assert len(doc['runs']) == 2 * 3
    assert {(r['bench'], r['kind']) for r in doc['runs']} == {
        (b, k) for b in calibration_runs.BENCHES
        for k in calibration_runs.KINDS}
    trips = [r for r in doc['runs'] if r['kind'] == 'h-s-h']
    assert all(r['switches'] == 2 for r in trips)
    assert vm.word(spec.FILE_POLICY) == 'shadow'
    assert vm.word(spec.FILE_MODE) == 'shadow'


def test_measure_refuses_output_that_is_no_benchmark(tmp_path):
    host = sc.make_host()
    t = sc.Wrapped(host)
    for name in calibration_runs.BENCHES.values():
        path = tmp_path / name
        path.write_text('#!/bin/sh\necho hello\n')
        path.chmod(0o755)
    with pytest.raises(calibration_runs.BenchmarkError) as exc:
        calibration_runs.measure(t, sc.NAME, str(tmp_path), repeats=1,
                                 root=str(tmp_path))
    assert "tlb-chase hap run 1: output 'hello\\n'" in str(exc.value)
    assert vmfiles.Vm(t, sc.NAME).word(spec.FILE_POLICY) == 'hap'
