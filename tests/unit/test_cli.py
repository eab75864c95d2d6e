import json
import subprocess
import sys

from click.testing import CliRunner
import pytest

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
    assert result.exit_code == 0
    assert 'zz-broken.yaml: generation:' in result.stderr
    assert 'using the built-in profiles' in result.stderr
    assert json.loads(result.stdout)['generation'] == 'intel-nehalem'


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
    test_abi.materialize(test_abi.make_host(), tmp_path)
    code, out = run('abi', 'conformance', '--root', str(tmp_path))
    assert code == 1
    assert 'PASS check_discovery\n' in out
    assert out.splitlines()[-1].endswith(' failed')
    assert out.splitlines()[-1] != '%d passed, 0 failed' % len(
        out.splitlines())


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
