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

"""Input the commands once took with exit 0 and now refuse: one line
naming the input and what was expected, a non-zero exit, no traceback,
and nothing written."""

import os
import socket
import subprocess
import sys

from click.testing import CliRunner
import pytest

from nova_adaptive_paging.cmd import cli
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import host as hostiface
from nova_adaptive_paging.simhost import control
from tests.unit.test_bad_input import one_error_line


def invoke(*args):
    return CliRunner().invoke(cli.main, list(args))


def tree(path):
    """Every path under ``path``, to show that nothing was written."""
    return sorted(os.path.join(d, n) for d, dirs, files in os.walk(path)
                  for n in dirs + files)


def test_a_misspelled_generation_is_not_shown_as_the_fallback():
    one_error_line(invoke('thresholds', 'show', '--generation',
                          'intel-nehalm'),
                   "'intel-nehalm'", 'did you mean intel-nehalem?')
    # What a host can be called still shows: a named generation, a
    # shipped profile's short name, the fallback form of an unknown CPU.
    for ok in ('intel-skylake-server', 'nehalem', 'intel-6-85'):
        result = invoke('thresholds', 'show', '--generation', ok)
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize('specs,needles', [
    (('=adaptive',), ("'=adaptive'", 'non-empty KEY')),
    (('hw:paging',), ("'hw:paging'", 'KEY=VALUE')),
    (('hw:paging=adaptive', 'hw:paging=shadow'),
     ('hw:paging given twice', "'adaptive', then 'shadow'")),
    (('hw:paging=adaptiv',), ("hw:paging='adaptiv'",
                              "did you mean 'adaptive'?")),
])
def test_policy_check_refuses_what_it_cannot_read_one_way(specs, needles):
    one_error_line(invoke('policy', 'check', *specs), *needles)


def test_sim_vm_start_refuses_a_bad_extra_spec_before_the_spool(tmp_path):
    spool = tmp_path / control.CONTROL_DIR
    spool.mkdir(parents=True)
    for specs, needle in (
            (['hw:paging=adaptiv'], "did you mean 'adaptive'?"),
            (['hw:pagin=hap'], 'did you mean hw:paging?'),
            (['hw:paging'], 'KEY=VALUE'),
            (['hw:paging=hap', 'hw:paging=shadow'], 'given twice'),
            # A flavor no host could take, refused as Nova's API does.
            (['hw:paging=adaptive', 'trait:CUSTOM_PAGING_SWITCHING='
              'forbidden'], 'not forbidden with hw:paging=adaptive')):
        args = [a for spec in specs for a in ('--extra-spec', spec)]
        # The timeout would be the failure were the request spooled: no
        # sim-host answers here.
        one_error_line(invoke('sim-vm', 'start', '--root', str(tmp_path),
                              '--timeout', '0.1', '--trace', 'gcc', *args,
                              'instance-1'), needle)
        assert os.listdir(spool) == []


def test_demo_makes_no_directories_but_its_own(tmp_path):
    workdir = tmp_path / 'absent' / 'x'
    one_error_line(invoke('demo', '--workdir', str(workdir)),
                   str(workdir), str(tmp_path / 'absent'))
    assert os.listdir(tmp_path) == []


def test_publish_capabilities_without_credentials(tmp_path):
    one_error_line(invoke('host', 'publish-capabilities'),
                   '[placement] auth_type is not set')


def test_publish_capabilities_with_auth_url_unreachable(tmp_path):
    # A bound socket that does not listen: connections are refused, and
    # no other process can take the port while the test holds it.
    with socket.socket() as closed:
        closed.bind(('127.0.0.1', 0))
        url = 'http://127.0.0.1:%d/v3' % closed.getsockname()[1]
        conf = tmp_path / 'agent.conf'
        conf.write_text(
            '[adaptive_paging]\nhost_root = %s\ncpu_generation = '
            'intel-nehalem\nprofile_dirs =\n[placement]\nauth_type = '
            'password\nauth_url = %s\nusername = nova\npassword = x\n'
            'project_name = service\nuser_domain_name = Default\n'
            'project_domain_name = Default\n' % (tmp_path, url))
        # A process of its own: loading the password plugin registers
        # its options, auth_url required, in the process's CONF.
        done = subprocess.run(
            [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli',
             '--config-file', str(conf), 'host', 'publish-capabilities'],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONWARNINGS='ignore'))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith('error: [placement]: ')
    assert done.stderr.count('\n') == 1, done.stderr
    assert url in done.stderr and 'Connection refused' in done.stderr


def test_agent_once_without_libvirt_does_nothing(tmp_path):
    root = tmp_path / 'node'
    (root / hostiface.SIMULATED_MARKER).mkdir(parents=True)
    conf = tmp_path / 'agent.conf'
    uri = 'qemu+unix:///system?socket=%s' % (tmp_path / 'absent.sock')
    conf.write_text('[adaptive_paging]\nhost_root = %s\nlibvirt_uri = %s\n'
                    'cpu_generation = intel-nehalem\nprofile_dirs =\n'
                    % (root, uri))
    before = tree(root)
    done = subprocess.run(
        [sys.executable, '-m', 'nova_adaptive_paging.cmd.agent',
         '--config-file', str(conf), '--once'],
        capture_output=True, text=True, timeout=120,
        # Deprecation warnings of the libraries are not the agent's.
        env=dict(os.environ, PYTHONWARNINGS='ignore'))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ''
    assert done.stderr.startswith('error: ') and \
        done.stderr.count('\n') == 1, done.stderr
    assert uri in done.stderr and 'absent.sock' in done.stderr
    assert 'nothing done' in done.stderr
    # The agent's own lock (one agent per host, under run/) aside, the
    # host's files are as they were.
    run = str(root / 'run')
    assert [p for p in tree(root) if not p.startswith(run)] == before


def test_every_generation_the_demo_runs_can_be_simulated():
    from nova_adaptive_paging.simhost import scraped_fleet
    trace = str(traces.builtin_paths()[0])
    for hw in scraped_fleet.truths():
        result = invoke('simulate', '--hardware', hw.generation, '--trace',
                        trace)
        assert result.exit_code == 0, result.output
        assert 'hardware profile %s,' % hw.name in result.output
    # A generation neither shipped nor simulated: one line naming both.
    one_error_line(invoke('simulate', '--hardware', 'amd-zen9', '--trace',
                          trace), 'amd-zen9', 'not a shipped profile',
                   'nor a generation of the simulated fleet (amd-zen3')
