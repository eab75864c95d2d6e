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

"""Files are untrusted input and a failed read keeps the last good
state: profile files that are FIFOs, devices, links into another user's
files, world-writable or another user's; a profile damaged before a
SIGHUP; an interface version file that reads garbage.  The real
``nova-paging-agent`` against a simulated host served over FUSE (its
kernel files answer as the kernel's do), or the agent's loop against
the simulated host's interface model."""

import os
import signal

import prometheus_client
from prometheus_client import parser
import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import health
from nova_adaptive_paging.agent import profile_files
from nova_adaptive_paging import profiles
from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import vocabulary
from tests.unit.conftest import needs_fuse
from tests.unit.conftest import wait_for

ZEN3 = ('format_version: 1\ngeneration: amd-zen3\nthresholds: '
        '{tlb_upper: 7, tlb_lower: 0.2, pf_upper: 4000, pf_lower: '
        '90, pt_upper: 300, pt_lower: 120}\nhistory_samples: 2\n'
        'interval_s: 1\nprovenance: {method: manual, source: t, '
        'obtained: 2026-11-25, hosts: 1, samples: 1}\n')
ZEROS = ZEN3.replace('tlb_upper: 7, tlb_lower: 0.2, pf_upper: 4000, '
                     'pf_lower: 90, pt_upper: 300, pt_lower: 120',
                     'tlb_upper: 0, tlb_lower: 0, pf_upper: 0, '
                     'pf_lower: 0, pt_upper: 0, pt_lower: 0')
SECRET = 'password: hunter2-do-not-print\n'
OTHER_UID = 4242            # a user that is neither root nor the agent


def _write(path, text, mode=0o644, uid=None):
    path.write_text(text)
    os.chmod(path, mode)
    if uid is not None:
        os.chown(path, uid, uid)
    return path


def _served_options(served, tmp_path, dirs, **agent):
    options = {('adaptive_paging', 'host_root'): served.root,
               ('adaptive_paging', 'libvirt_uri'): served.libvirt_uri,
               ('adaptive_paging', 'cpu_generation'): 'amd-zen3',
               ('adaptive_paging', 'profile_dirs'):
                   ','.join(str(d) for d in dirs),
               ('agent', 'lock_file'): str(tmp_path / 'agent.lock'),
               ('agent', 'interval'): 1,
               ('agent', 'reconcile_interval'): 1,
               ('agent', 'stop_timeout'): 5}
    options.update({('agent', k): v for k, v in agent.items()})
    return options


def _kernel_thresholds(served):
    with open(served.param(spec.PARAM_THRESHOLDS)) as f:
        return spec.ThresholdSet.parse(f.read())


def _policy(served, index):
    with open(served.vm_file(index, spec.FILE_POLICY)) as f:
        return f.read().strip()


def _drift(served, index, policy):
    with open(served.vm_file(index, spec.FILE_POLICY), 'w') as f:
        f.write(policy)


def _good(tmp_path):
    return spec.ThresholdSet.from_profile(profiles.loads(ZEN3))


@pytest.mark.skipif(os.geteuid() != 0, reason='makes files of another '
                    'user (chown), as an attacker on the host would')
@needs_fuse
def test_profile_files_that_are_not_the_operators_are_refused(
        served_host, agent_process, tmp_path):
    """Beside a good profile: a FIFO named zz.yaml (it held the loop:
    /metrics timed out, drift went unrepaired, SIGTERM was ignored), a
    link to /dev/zero (1.1 GB before a MemoryError), a link into a file
    of another user (its content was printed), a 0666 all-zero profile
    of another user (its zeros were written to dsp_thresholds), and a
    directory writable by every user.  Each is refused with one line
    naming it, none is read, the good one is in force."""
    good_dir = tmp_path / 'profiles'
    good_dir.mkdir()
    _write(good_dir / 'zen3.yaml', ZEN3)
    os.mkfifo(good_dir / 'zz.yaml')
    os.symlink('/dev/zero', good_dir / 'dev.yaml')
    secret = _write(tmp_path / 'secret', SECRET, 0o600, OTHER_UID)
    os.symlink(secret, good_dir / 'link.yaml')
    _write(good_dir / 'a-zeros.yaml', ZEROS, 0o666, OTHER_UID)
    open_dir = tmp_path / 'open'
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    _write(open_dir / 'b-zeros.yaml', ZEROS)
    agent = agent_process(_served_options(served_host, tmp_path,
                                          [open_dir, good_dir]))
    wait_for(agent.serving, 30, '/metrics', agent.proc)
    wait_for(lambda: _kernel_thresholds(served_host) == _good(tmp_path),
             15, 'the good profile in dsp_thresholds', agent.proc)
    _drift(served_host, 0, vocabulary.HAP)
    wait_for(lambda: _policy(served_host, 0) == vocabulary.SHADOW, 15,
             'the drifted guest restored', agent.proc)
    for _ in range(3):                      # passes go on; scrapes too
        fams = agent.scrape_after_pass()
    assert fams[metrics.PROFILE_MISSING.name].samples[0].value == 0
    assert _kernel_thresholds(served_host) == _good(tmp_path)
    assert agent.stop() == 0
    text = agent.text()
    refused = {
        'zz.yaml': 'not a regular file',
        'dev.yaml': 'not a regular file',
        'link.yaml': 'a symbolic link to a file of another owner',
        'a-zeros.yaml': 'owned by uid %d' % OTHER_UID,
        'b-zeros.yaml': 'writable by every user',
    }
    for name, why in refused.items():
        lines = [line for line in text.splitlines()
                 if name in line and why in line and 'left out' in line]
        assert len(lines) == 1, (name, text)
    assert 'hunter2' not in text and 'password' not in text
    assert 'Traceback' not in text


def test_a_refused_file_is_never_read(tmp_path):
    """The checks come before the read: a FIFO (no writer: a read would
    block for ever) and a device are refused at once."""
    os.mkfifo(tmp_path / 'fifo.yaml')
    for path in (tmp_path / 'fifo.yaml', '/dev/zero'):
        with pytest.raises(profiles.ProfileError) as exc:
            profile_files.read_text(str(path), owners={os.geteuid(), 0})
        assert 'not a regular file' in str(exc.value)
    big = _write(tmp_path / 'big.yaml', '#' * (profile_files.MAX_BYTES + 1))
    with pytest.raises(profiles.ProfileError) as exc:
        profile_files.read_text(str(big))
    assert 'more than a profile' in str(exc.value)


@pytest.mark.skipif(os.geteuid() != 0, reason='makes a link of another '
                    'user (lchown), as an attacker on the host would')
def test_every_link_on_the_way_to_a_profile_is_held_to_the_rule(tmp_path):
    """A link root made, into a directory another user controls: that
    user's own link there led the agent to any of root's files (a
    secret was read as a profile).  Every link met is checked, a
    directory's too; links of trusted owners all the way still work."""
    profile_dir = tmp_path / 'profiles'
    profile_dir.mkdir()
    secret = _write(tmp_path / 'secret', SECRET, 0o600)
    theirs = tmp_path / 'theirs'
    theirs.mkdir()
    os.chown(theirs, OTHER_UID, OTHER_UID)
    os.symlink(secret, theirs / 'b.yaml')
    os.lchown(theirs / 'b.yaml', OTHER_UID, OTHER_UID)
    os.symlink(theirs / 'b.yaml', profile_dir / 'file.yaml')
    os.symlink(secret.parent, theirs / 'd')
    os.lchown(theirs / 'd', OTHER_UID, OTHER_UID)
    os.symlink(theirs / 'd' / 'secret', profile_dir / 'dir.yaml')
    for name, via in (('file.yaml', theirs / 'b.yaml'),
                      ('dir.yaml', theirs / 'd')):
        with pytest.raises(profiles.ProfileError) as exc:
            profile_files.read_text(str(profile_dir / name))
        assert 'leads through %s, a symbolic link made by uid %d' % (
            via, OTHER_UID) in str(exc.value)
    good = tmp_path / 'real'
    good.mkdir()
    _write(good / 'zen3.yaml', ZEN3)
    os.symlink('real', tmp_path / 'alias')
    os.symlink('../alias/./zen3.yaml', profile_dir / 'zen3.yaml')
    assert profile_files.read_text(str(profile_dir / 'zen3.yaml')) == ZEN3


def test_a_profile_error_line_repeats_nothing_of_the_file():
    """What a file holds stays out of the agent's line: a value, an
    unknown key, YAML's quote of what it found."""
    for text in ('format_version: s3cr3t\n', SECRET, 'x: "a\n',
                 ZEN3.replace('tlb_upper: 7', 'tlb_upper: 7.12345678')):
        with pytest.raises(profiles.ProfileError) as exc:
            profiles.loads(text, '/p/x.yaml')
        line = exc.value.left_out(echo=False)
        assert line.startswith('/p/x.yaml: ')
        for secret in ('s3cr3t', 'hunter2', 'password', '12345678'):
            assert secret not in line, line


@needs_fuse
def test_sighup_with_a_damaged_profile_keeps_its_last_good_version(
        served_host, agent_process, tmp_path):
    """A profile corrupted, then SIGHUP: its last good version stays in
    force, as it does without the SIGHUP (before: the built-in
    thresholds were written, profile_missing said 0, and the log only
    said "left out")."""
    profile_dir = tmp_path / 'profiles'
    profile_dir.mkdir()
    path = _write(profile_dir / 'zen3.yaml', ZEN3)
    with open(served_host.param(spec.PARAM_THRESHOLDS), 'w') as f:
        f.write(spec.ThresholdSet.from_profile(profiles.builtin()).format())
    assert _kernel_thresholds(served_host) != _good(tmp_path)
    agent = agent_process(_served_options(served_host, tmp_path,
                                          [profile_dir]))
    wait_for(lambda: _kernel_thresholds(served_host) == _good(tmp_path),
             30, 'the profile in dsp_thresholds', agent.proc)
    wait_for(agent.serving, 30, '/metrics', agent.proc)
    path.write_text('thresholds: {tlb_upper: [\n')
    agent.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: 'last good version' in agent.text(), 15,
             'the damaged profile reported', agent.proc)
    wait_for(lambda: 'SIGHUP: configuration and profiles reloaded'
             in agent.text(), 15, 'the reload', agent.proc)
    _drift(served_host, 0, vocabulary.HAP)      # one more pass at least
    wait_for(lambda: _policy(served_host, 0) == vocabulary.SHADOW, 15,
             'a pass after the reload', agent.proc)
    fams = agent.scrape_after_pass()
    assert _kernel_thresholds(served_host) == _good(tmp_path)
    assert fams[metrics.PROFILE_MISSING.name].samples[0].value == 0
    (info,) = fams[metrics.PROFILE_INFO.name].samples
    assert info.labels['file'] == str(path)
    assert agent.stop() == 0


class Garbled:
    """The simulated kernel with its interface version file reading
    ``text`` once ``on`` is set."""

    def __init__(self, model, text):
        self.model, self.text, self.on = model, text, False

    def __getattr__(self, name):
        return getattr(self.model, name)

    def read(self, rel):
        if self.on and rel == spec.param_path(spec.PARAM_ABI):
            return self.text
        return self.model.read(rel)


def _scrape(agent):
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    return {f.name: f for f in parser.text_string_to_metric_families(
        prometheus_client.generate_latest(registry).decode())}


def test_an_abi_file_reading_garbage_keeps_the_last_capabilities(
        sim, start_guest, make_agent, caplog):
    """The version file reads ``zz`` after start-up: a failed read of
    the host, counted (kind="host"), its last capabilities in force: the
    guests keep their series and a drift is repaired.  Before, the agent
    fell into advisory mode (no guest series, switching="false", drift
    left) and logged "host: resolved"."""
    start_guest('a', {'hw:paging': 'shadow'})
    transport = Garbled(sim.model, 'zz\n')
    agent = make_agent(transport=transport)
    agent.preflight()
    assert agent.reconcile()
    transport.on = True
    rel = '%s/%s/%s' % (spec.DEBUGFS_DIR, sim.vms['a'].dirname,
                        spec.FILE_POLICY)
    sim.model.write(rel, vocabulary.HAP + '\n')
    for _ in range(2):
        assert not agent.reconcile()
        agent.sample()
    assert agent.errors[health.HOST] == 2
    assert sim.model.vms[sim.vms['a'].dirname].policy == vocabulary.SHADOW
    fams = _scrape(agent)
    (info,) = fams[metrics.HOST_INFO.name].samples
    assert info.labels['switching'] == 'true'
    assert fams[metrics.GUEST_MODE.name].samples
    assert not [r for r in caplog.records
                if r.getMessage() == 'host: resolved']
    warned = [r.getMessage() for r in caplog.records
              if 'host interface failed' in r.getMessage()]
    assert len(warned) == 1 and spec.PARAM_ABI in warned[0]
