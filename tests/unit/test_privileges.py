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

"""The agent's user must not become root: the attacks of
doc/source/security.rst tried for real.  sudo's own policy matching
(host-agent's sudoers rule, installed for a real unprivileged user) and
the privileged daemon's own checks of what it is asked to reach."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from nova_adaptive_paging.host import privileged

HERE = os.path.dirname(os.path.abspath(__file__))
RULE = os.path.join(HERE, '..', '..', 'host-agent',
                    'sudoers.d-nova-paging-agent')
HELPER = '/opt/nova-adaptive-paging/bin/privsep-helper'
USER = 'nap-privtest'

needs_root = pytest.mark.skipif(
    (os.geteuid() != 0 or not shutil.which('sudo')
     or not shutil.which('runuser')) and not os.environ.get(
        'NAP_REQUIRE_SUDO'),
    reason='needs root, sudo and runuser (set NAP_REQUIRE_SUDO=1 to make '
           'this a failure)')


@pytest.fixture(scope='module')
def rule_installed():
    """host-agent's rule, for USER and a helper that records its
    arguments, in /etc/sudoers.d for the module's time."""
    if subprocess.run(['id', USER], capture_output=True).returncode:
        subprocess.run(['useradd', '--system', '--no-create-home', '--shell',
                        '/usr/sbin/nologin', USER], check=True)
    bindir = tempfile.mkdtemp(prefix='nap-priv-')
    os.chmod(bindir, 0o755)
    helper = os.path.join(bindir, 'privsep-helper')
    record = os.path.join(bindir, 'ran')
    with open(helper, 'w') as f:
        f.write('#!/bin/sh\necho "$@" > %s\n' % record)
    os.chmod(helper, 0o755)
    with open(RULE) as f:
        text = f.read().replace(HELPER, helper)
    # The rule's user, not the runtime directory's name.
    text = re.sub(r'(?m)^(Defaults:)?nova-paging ', r'\g<1>%s ' % USER, text)
    installed = '/etc/sudoers.d/nap-privilege-test'
    with open(installed + '.new', 'w') as f:
        f.write(text)
    os.chmod(installed + '.new', 0o440)
    subprocess.run(['visudo', '-cf', installed + '.new'], check=True,
                   capture_output=True)
    os.rename(installed + '.new', installed)
    try:
        yield helper, record
    finally:
        os.unlink(installed)
        shutil.rmtree(bindir)


def as_user(helper, record, args):
    """Run ``sudo -n helper args`` as USER; what the helper ran with, or
    None if sudo refused."""
    if os.path.exists(record):
        os.unlink(record)
    done = subprocess.run(['runuser', '-u', USER, '--', 'sudo', '-n',
                           helper] + args, capture_output=True, text=True)
    if done.returncode:
        assert not os.path.exists(record)
        return None
    with open(record) as f:
        return f.read().split()


def agent_args(sock):
    return ['--privsep_context', privileged.host_admin.pypath,
            '--privsep_sock_path', sock]


SOCK = privileged.RUNTIME_DIR + '/tmpab_c1x9z/privsep.sock'


@needs_root
def test_sudo_runs_the_agents_command_and_nothing_else(rule_installed):
    helper, record = rule_installed
    # What oslo.privsep runs, with the socket mkdtemp made.
    assert as_user(helper, record, agent_args(SOCK)) == agent_args(SOCK)
    attacks = {
        'a logging config runs code':
            agent_args(SOCK) + ['--log-config-append', '/tmp/evil.conf'],
        'a config file of its choosing':
            ['--config-file', '/tmp/evil.conf'] + agent_args(SOCK),
        'another context':
            ['--privsep_context', 'os.system', '--privsep_sock_path', SOCK],
        'a socket elsewhere':
            agent_args('/tmp/tmpab_c1x9z/privsep.sock'),
        'a socket path up and out':
            agent_args(privileged.RUNTIME_DIR + '/../tmp/x/privsep.sock'),
        'arguments inside one word':
            agent_args(SOCK + ' --log-config-append /tmp/evil.conf'),
        'no arguments': [],
    }
    ran = {what: as_user(helper, record, args)
           for what, args in attacks.items()}
    assert ran == dict.fromkeys(attacks), ran


def test_the_daemon_reaches_no_process_but_a_guests_qemu(tmp_path):
    """counters_open and a VM file's path name a pid: the daemon takes
    only one of libvirt's pid files that holds a KVM VM descriptor."""
    run = tmp_path / 'run' / 'libvirt' / 'qemu'
    run.mkdir(parents=True)
    sleeper = subprocess.Popen(['sleep', '60'])
    try:
        for pid in (1, os.getpid(), sleeper.pid):
            with pytest.raises(PermissionError):
                privileged.check_guest_pid(pid, str(tmp_path))
        # Named by a pid file, but no VM descriptor: not a guest's QEMU.
        (run / 'instance-1.pid').write_text('%d\n' % sleeper.pid)
        with pytest.raises(PermissionError, match='KVM VM descriptor'):
            privileged.check_guest_pid(sleeper.pid, str(tmp_path))
        # ... nor may a VM file's path name it.
        with pytest.raises(PermissionError):
            privileged.check_path('sys/kernel/debug/kvm/%d-3/paging_policy'
                                  % sleeper.pid, write=True,
                                  root=str(tmp_path))
        # ... nor a request for the mechanism's control.
        with pytest.raises(PermissionError, match='KVM VM descriptor'):
            privileged.check_mode_request('%d-3' % sleeper.pid, 'shadow',
                                          str(tmp_path))
        # On this host, no process at all is a guest's QEMU.
        with pytest.raises(PermissionError):
            privileged.check_guest_pid(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_an_agent_whose_daemon_cannot_start_exits_at_once(tmp_path):
    """Without the privileges it needs (the helper command fails, as
    sudo does without the rule), the agent says so in one line and exits
    1, so systemd restarts it; it does not run without its daemon."""
    config = tmp_path / 'agent.conf'
    config.write_text('[adaptive_paging]\nhost_root = /\ncpu_generation = '
                      'intel-nehalem\nlibvirt_uri = test:///default\n'
                      '[agent]\nlisten_port = 0\nlock_file = %s\n'
                      '[nova_adaptive_paging_privileged]\n'
                      'helper_command = /bin/false\n' % (
                          tmp_path / 'agent.lock'))
    done = subprocess.run(
        [sys.executable, '-m', 'nova_adaptive_paging.cmd.agent',
         '--config-file', str(config)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines()
              if line.startswith('error:')]
    assert len(errors) == 1 and 'privsep daemon did not start' in errors[0]
    assert 'Traceback' not in done.stderr


def test_the_socket_lies_where_sudo_allows_it_without_tmpdir(
        monkeypatch, tmp_path):
    """Under the Ansible role's pidfile mode no unit sets TMPDIR, but the
    role makes the runtime directory: the agent puts oslo.privsep's
    socket there itself, where the sudoers rule allows it (before, the
    socket went to /tmp and sudo refused the daemon)."""
    import tempfile as tempfile_module
    runtime = tmp_path / 'run' / 'nova-paging-agent'
    runtime.mkdir(parents=True, mode=0o700)
    monkeypatch.setattr(privileged, 'RUNTIME_DIR', str(runtime))
    monkeypatch.setenv('TMPDIR', '/tmp')
    monkeypatch.setattr(tempfile_module, 'tempdir', None)
    monkeypatch.setattr(sys, 'argv', [
        '/opt/nova-adaptive-paging/bin/nova-paging-agent'])
    privileged.Transport()
    sock = os.path.join(tempfile_module.mkdtemp(), 'privsep.sock')
    command = privileged.host_admin.helper_command(sock)
    with open(RULE) as f:
        rule = [line for line in f if line.startswith('nova-paging ALL')]
    args = rule[0].split('NOPASSWD: ', 1)[1].strip().split(' ', 1)[1]
    allowed = args[1:-1].replace('/run/nova-paging-agent/',
                                 re.escape(str(runtime)) + '/')
    assert allowed != args[1:-1]
    assert re.fullmatch(allowed, ' '.join(command[2:])), command
