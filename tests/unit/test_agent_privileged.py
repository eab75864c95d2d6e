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

"""The agent's privileged side: the files it touches, the command sudo
runs for it, the helper its configuration names."""

import os
import re
import sys
import tempfile

from oslo_config import cfg
import pytest

from nova_adaptive_paging.host import privileged

if 'eventlet.patcher' in sys.modules and \
        sys.modules['eventlet.patcher'].is_monkey_patched('thread'):
    raise RuntimeError('%s needs real threads: run it in a pytest process '
                       'of its own, as tox.ini does' % __name__)


def test_the_privileged_side_touches_interface_files_only():
    for rel in ('sys/kernel/debug/kvm/123-11/paging_policy',
                'sys/module/kvm/parameters/dsp_thresholds'):
        privileged.check_path(rel, write=True)
    privileged.check_path('sys/kernel/debug/kvm')
    privileged.check_path('sys/kernel/debug/kvm/1-2/paging_stats')
    for rel, write in (('etc/shadow', False),
                       ('sys/kernel/debug/kvm/../../../etc/shadow', True),
                       ('sys/kernel/debug/kvm/1-2/paging_stats', True),
                       ('sys/module/kvm/parameters/paging_switch_abi', True),
                       ('sys/kernel/debug/kvm/1-2/../x', False),
                       ('sys/kernel/debug/kvm/1-2/paging_policy/x', False)):
        with pytest.raises(PermissionError):
            privileged.check_path(rel, write=write)


def test_the_mechanisms_control_takes_a_vm_and_a_mode_only():
    # hap or shadow, for a <pid>-<fd> name and nothing else: a path, a
    # trailing newline or another word is refused before any pid is.
    for vm, mode in (('1-2', 'adaptive'), ('1-2', 'tdp'), ('1-2\n', 'hap'),
                     ('../1-2', 'hap'), ('1', 'shadow'), (12, 'hap')):
        with pytest.raises(PermissionError, match='paging mode'):
            privileged.check_mode_request(vm, mode)


def test_sudoers_allows_the_command_the_agent_runs(monkeypatch, tmp_path):
    """host-agent's sudoers rule and the privsep helper command the agent
    runs must agree, or the daemon never starts: the command is the
    rule's, and its arguments, with a socket oslo.privsep's mkdtemp makes
    in the runtime directory, match the rule's regular expression (sudo's
    own matching is tests/unit/test_privileges.py's)."""
    monkeypatch.setattr(sys, 'argv', [
        '/opt/nova-adaptive-paging/bin/nova-paging-agent'])
    privileged.Transport()
    sock = os.path.join(tempfile.mkdtemp(dir=tmp_path), 'privsep.sock')
    sock = privileged.RUNTIME_DIR + sock[len(str(tmp_path)):]
    command = privileged.host_admin.helper_command(sock)
    path = os.path.join(os.path.dirname(__file__), '..', '..', 'host-agent',
                        'sudoers.d-nova-paging-agent')
    with open(path) as f:
        rule = [line for line in f if line.startswith('nova-paging ALL')]
    binary, args = rule[0].split('NOPASSWD: ', 1)[1].strip().split(' ', 1)
    assert command[:2] == ['sudo', binary]
    assert args.startswith('^') and args.endswith('$')
    assert re.fullmatch(args[1:-1], ' '.join(command[2:]))
    assert not re.fullmatch(args[1:-1], ' '.join(
        command[2:] + ['--log-config-append', '/tmp/x']))


def test_the_agent_conf_sets_the_privsep_helper(tmp_path, monkeypatch):
    """oslo.privsep reads its section from the global cfg.CONF; a
    helper_command in the agent's own configuration file must reach it
    (a root without sudo, as the end-to-end test in the emulated host
    runs)."""
    monkeypatch.setattr(sys, 'argv', [
        '/opt/nova-adaptive-paging/bin/nova-paging-agent'])
    path = tmp_path / 'agent.conf'
    path.write_text('[nova_adaptive_paging_privileged]\n'
                    'helper_command = privsep-helper --config-file %s\n'
                    % path)
    conf = cfg.ConfigOpts()
    conf([], default_config_files=[str(path)])
    try:
        privileged.Transport(conf)
        command = privileged.host_admin.helper_command('S')
    finally:
        cfg.CONF.clear()
    assert command == ['privsep-helper', '--config-file', str(path),
                       '--privsep_context', privileged.host_admin.pypath,
                       '--privsep_sock_path', 'S']
