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

import json
import os
import subprocess
import sys

from click.testing import CliRunner
import pytest

from nova_adaptive_paging.abi import conformance
from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.cmd import cli

from tests.unit import test_abi


def run(*args):
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.output


def test_policy_check_ok():
    code, out = run('policy', 'check', 'hw:paging=adaptive',
                    'hw:paging_interval=5')
    assert code == 0
    assert out == 'hw:paging=adaptive (flavor)\ninterval: 5 s\n'


def test_policy_check_host_default():
    code, out = run('policy', 'check', 'hw:cpu_policy=dedicated',
                    '--default-policy', 'shadow')
    assert (code, out) == (0, 'hw:paging=shadow (host default)\n')


def test_policy_check_bogus_is_one_clear_line():
    result = CliRunner().invoke(cli.main, ['policy', 'check',
                                           'hw:paging=bogus'])
    assert result.exit_code == 2
    assert result.stderr == ("error: invalid hw:paging='bogus': expected "
                             "one of hap, shadow, adaptive\n")


@pytest.mark.parametrize('trait_key', [
    'trait:CUSTOM_PAGING_SWITCHING', 'trait1:CUSTOM_PAGING_SWITCHING'])
def test_policy_check_flags_a_flavor_forbidding_its_trait(trait_key):
    result = CliRunner().invoke(cli.main, [
        'policy', 'check', 'hw:paging=adaptive', trait_key + '=forbidden'])
    assert result.exit_code == 2
    assert result.stdout == ''
    line = result.stderr
    assert len(line.splitlines()) == 1
    assert trait_key + "='forbidden'" in line
    assert 'hw:paging=adaptive' in line
    # The pair nova-paging flavor set writes passes.
    code, out = run('policy', 'check', 'hw:paging=adaptive',
                    'trait:CUSTOM_PAGING_SWITCHING=required')
    assert (code, out) == (0, 'hw:paging=adaptive (flavor)\n')


def test_policy_check_not_key_value():
    code, out = run('policy', 'check', 'hw:paging')
    assert code == 2


def test_thresholds_show_builtin():
    code, out = run('thresholds', 'show', '--generation', 'intel-nehalem')
    assert code == 0
    assert 'profile for intel-nehalem' in out
    assert ('kernel:  tlb_upper=10000 tlb_lower=100 pf_upper=5000000 '
            'pf_lower=100000 pt_upper=200000 pt_lower=150000 history=3 '
            'interval_ms=5000') in out


def test_thresholds_show_fallback_json():
    code, out = run('thresholds', 'show', '--generation', 'amd-zen4',
                    '--json')
    doc = json.loads(out)
    assert code == 0
    assert doc['generation'] == 'intel-nehalem'
    assert doc['requested_generation'] == 'amd-zen4'
    assert doc['selection'] == 'fallback: no profile for amd-zen4'


def test_configured_profile_dir_and_a_bad_file(tmp_path):
    good = tmp_path / 'zen4.yaml'
    doc = cli.profiles.builtin().to_dict()
    doc['generation'] = 'amd-zen4'
    doc['thresholds']['tlb_upper'] = 7
    good.write_text(cli.profiles.yaml.safe_dump(doc))
    conf = tmp_path / 'agent.conf'
    conf.write_text('[adaptive_paging]\nprofile_dirs = %s\n' % tmp_path)
    code, out = run('--config-file', str(conf), 'thresholds', 'show',
                    '--generation', 'amd-zen4', '--json')
    assert code == 0 and json.loads(out)['thresholds']['tlb_upper'] == 7
    (tmp_path / 'zz-broken.yaml').write_text('format_version: 1\n')
    result = CliRunner().invoke(cli.main, [
        '--config-file', str(conf), 'thresholds', 'show', '--generation',
        'amd-zen4', '--json'])
    # The broken file is left out on its own, with one warning line; the
    # good file beside it still applies.
    assert result.exit_code == 0
    assert 'zz-broken.yaml: generation:' in result.stderr
    assert result.stderr.count('\n') == 1 and 'left out' in result.stderr
    shown = json.loads(result.stdout)
    assert shown['generation'] == 'amd-zen4'
    assert shown['thresholds']['tlb_upper'] == 7


def test_thresholds_check(tmp_path):
    bad = tmp_path / 'bad.yaml'
    bad.write_text('format_version: 1\ngeneration: x\n')
    result = CliRunner().invoke(cli.main, ['thresholds', 'check', str(bad)])
    assert result.exit_code == 2
    assert result.stderr.startswith('error: %s: thresholds:' % bad)


def test_cpu_generation(tmp_path):
    path = tmp_path / 'cpuinfo'
    path.write_text('vendor_id : AuthenticAMD\ncpu family : 25\n'
                    'model : 1\n')
    result = run('cpu-generation', '--cpuinfo', str(path))
    assert result == (0, 'amd-zen3\n')


def test_abi_conformance_command(tmp_path):
    # Plain files read like the interface but cannot refuse a write, so
    # some checks must fail: the command reports each check once, counts
    # them right and exits 1.
    test_abi.materialize(test_abi.make_host(), tmp_path)
    code, out = run('abi', 'conformance', '--root', str(tmp_path),
                    '--vm', '4242-11')
    lines = out.splitlines()
    verdicts = [line.split(':')[0].split()[:2] for line in lines[:-1]]
    assert sorted(name for _, name in verdicts) == sorted(
        conformance.CHECKS)
    passed = sum(1 for v, _ in verdicts if v == 'PASS')
    failed = sum(1 for v, _ in verdicts if v == 'FAIL')
    assert passed + failed == len(conformance.CHECKS)
    assert ['PASS', 'check_discovery'] in verdicts
    assert ['FAIL', 'check_policy_rejects_bad_values'] in verdicts
    assert lines[-1] == '%d passed, %d failed' % (passed, failed)
    assert code == 1


def test_abi_conformance_touches_no_vm_it_was_not_given(tmp_path):
    test_abi.materialize(test_abi.make_host(), tmp_path)
    policy_file = tmp_path / spec.DEBUGFS_DIR / '4242-11' / spec.FILE_POLICY
    before = policy_file.read_text()
    result = CliRunner().invoke(cli.main, ['abi', 'conformance', '--root',
                                           str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.startswith('error: --root %s: not a simulated '
                                    'host' % tmp_path)
    assert '--vm PID-FD' in result.stderr
    assert result.stderr.count('\n') == 1 and result.stdout == ''
    assert policy_file.read_text() == before


def test_abi_conformance_on_a_root_without_the_interface(tmp_path):
    result = CliRunner().invoke(cli.main, ['abi', 'conformance', '--root',
                                           str(tmp_path), '--vm', '1-2'])
    assert result.exit_code == 2
    assert result.stderr == ('error: --root %s: not a root of the switching '
                             'interface (no sys/module/kvm/parameters/'
                             'paging_switch_abi)\n' % tmp_path)


@pytest.mark.parametrize('args,code', [
    (['--help'], 0), (['policy', 'check', 'hw:paging=adaptive'], 0),
    (['policy', 'check', 'hw:paging=bogus'], 2)])
def test_installed_console_script(args, code):
    """The entry point pip installed runs (not just the click object)."""
    proc = subprocess.run(
        [sys.executable, '-c',
         'import sys; from importlib.metadata import entry_points; '
         '[ep] = [e for e in entry_points(group="console_scripts") '
         'if e.name == "nova-paging"]; sys.argv[0] = "nova-paging"; '
         'ep.load()()'] + args, capture_output=True, text=True)
    assert proc.returncode == code, proc.stderr


@pytest.mark.parametrize('args, said', [
    (['simulate', '--bogus'], "No such option '--bogus'"),
    (['no-such-command'], "No such command 'no-such-command'"),
])
def test_a_usage_error_is_one_error_line(args, said):
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 2
    assert result.stderr.count('\n') == 1, result.stderr
    assert result.stderr.startswith('error: ') and said in result.stderr
    assert '--help' in result.stderr


@pytest.mark.parametrize('hardware', [['--hardware', 'nehalem'], []])
def test_a_misspelled_trace_lists_the_shipped_ones(hardware):
    # ... with or without --hardware: the trace is said first.
    result = CliRunner().invoke(cli.main, ['simulate', '--trace', 'gccc']
                                + hardware)
    assert result.exit_code == 2
    assert 'mcf' in result.stderr and 'did you mean gcc?' in result.stderr
    assert result.stderr.count('\n') == 1


def test_simulate_without_hardware_names_the_choices():
    result = CliRunner().invoke(cli.main, ['simulate', '--trace', 'gcc'])
    assert result.exit_code == 2
    assert result.stderr.startswith('error: --hardware: missing')
    assert 'intel-nehalem' in result.stderr


@pytest.mark.parametrize('name', ['nehalem', 'intel-nehalem'])
def test_a_generation_has_one_key_and_its_short_alias(name):
    # The generation key works for the cost model too, and the cost
    # profile's short name works where a generation is asked.
    result = CliRunner().invoke(cli.main, ['simulate', '--hardware', name,
                                           '--trace', 'gcc'])
    assert result.exit_code == 0, result.stderr
    shown = CliRunner().invoke(cli.main, ['thresholds', 'show',
                                          '--generation', name])
    assert shown.stdout.startswith(
        'generation:  intel-nehalem (profile for intel-nehalem)')


def test_a_compute_node_never_imports_the_simulated_host():
    # The CLI loads sim-host, sim-vm and demo on first use only.
    code = ('import sys; from nova_adaptive_paging.cmd import cli; '
            'from click.testing import CliRunner; '
            'CliRunner().invoke(cli.main, ["host", "--help"]); '
            'print(sorted(m for m in sys.modules '
            'if m.startswith("nova_adaptive_paging.simhost")))')
    done = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == '[]', done.stdout
    assert CliRunner().invoke(cli.main, ['sim-vm', '--help']).exit_code == 0


def test_a_reader_that_stops_early_ends_the_command_quietly():
    # ``nova-paging simulate ... | head -1``: the read end is closed
    # before the command writes, so its first write meets EPIPE for sure.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, '-c',
             'import sys; sys.argv[0] = "nova-paging"; '
             'from nova_adaptive_paging.cmd import cli; cli.main()',
             'simulate', '--hardware', 'nehalem', '--trace', 'gcc'],
            stdout=write_end, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write_end)
    assert proc.returncode == 1
    assert 'error' not in proc.stderr.lower(), proc.stderr
    assert 'Traceback' not in proc.stderr
