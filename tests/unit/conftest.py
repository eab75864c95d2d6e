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

"""Fixtures the agent's tests share: a simulated KVM host (its files,
its libvirt test-driver XML, a clock that moves only when told) and an
agent driving it through the model's own interface."""

import os

import pytest

from nova_adaptive_paging.agent import service
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging import vocabulary

GENERATION = 'amd-zen3'


@pytest.fixture
def sim(tmp_path):
    clock = simfleet.Clock()
    host = simhost.SimHost(str(tmp_path), hardware.resolve('nehalem'),
                           profiles.builtin(), clock=clock)
    host.clock = clock
    os.makedirs(os.path.join(host.root, 'profiles'))
    return host


@pytest.fixture
def start_guest(sim):
    """start_guest(name, extra specs, trace=...): a running domain."""
    def start(name, specs, trace='phases-tlb-fault', **kw):
        return sim.start_vm(simhost.VmSpec(name, traces.builtin()[trace],
                                           specs, **kw))
    return start


@pytest.fixture
def make_agent(sim):
    """make_agent(default=..., transport=...): an agent of ``sim``."""
    def make(default=vocabulary.HAP, count_all=False, transport=None,
             **kw):
        conf = simfleet.agent_conf_for(sim.root, sim.libvirt_uri, default,
                                       count_all)
        kw.setdefault('clock', sim.now_s)
        return service.Agent(conf, GENERATION,
                             transport=transport or sim.model, **kw)
    return make


# -- the real commands: a simulated host served over FUSE, the agent ------
def fuse_usable():
    """Whether a simulated host can be served over FUSE here."""
    import shutil
    return bool(os.path.exists('/dev/fuse') and os.geteuid() == 0
                and (shutil.which('fusermount3')
                     or shutil.which('fusermount')))


# A test that runs the commands against a host served over FUSE.  CI has
# FUSE and sets NAP_REQUIRE_FUSE, so there the test fails rather than
# skips.
needs_fuse = pytest.mark.skipif(
    not fuse_usable() and not os.environ.get('NAP_REQUIRE_FUSE'),
    reason='needs /dev/fuse, root and fusermount (set NAP_REQUIRE_FUSE=1 '
           'to make this a failure)')


def wait_for(check, seconds, what, proc=None):
    """Poll ``check`` until true; fail naming ``what`` after ``seconds``
    (at once if ``proc`` ended)."""
    import time
    deadline = time.monotonic() + seconds
    while not check():
        if proc is not None and proc.poll() is not None:
            raise AssertionError('%s: the process ended (%s) first'
                                 % (what, proc.returncode))
        if time.monotonic() > deadline:
            raise AssertionError('%s: not within %s s' % (what, seconds))
        time.sleep(0.05)


class ServedHost:
    """``nova-paging sim-host`` over FUSE, with two guests (shadow and
    adaptive) at real-time speed."""

    VMS = 2

    def __init__(self, root):
        import subprocess
        import sys
        self.root = root
        self.debugfs = os.path.join(root, 'sys/kernel/debug/kvm')
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli',
             'sim-host', '--root', root, '--vms', str(self.VMS), '--speed',
             '1', '--duration', '600', '--paging', 'shadow', '--paging',
             'adaptive'], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        wait_for(lambda: os.path.isdir(self.debugfs)
                 and len(os.listdir(self.debugfs)) == self.VMS, 60,
                 'the simulated host serving its VMs', self.proc)

    @property
    def libvirt_uri(self):
        return 'test://' + os.path.join(self.root, simhost.NODE_XML)

    def vm_file(self, index, name):
        vm = sorted(os.listdir(self.debugfs))[index]
        return os.path.join(self.debugfs, vm, name)

    def param(self, name):
        return os.path.join(self.root, 'sys/module/kvm/parameters', name)

    def close(self):
        import signal
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


@pytest.fixture(scope='session')
def served_host(tmp_path_factory):
    """One simulated host served over FUSE for the agent tests."""
    if not fuse_usable() and not os.environ.get('NAP_REQUIRE_FUSE'):
        pytest.skip('needs /dev/fuse, root and fusermount')
    host = ServedHost(str(tmp_path_factory.mktemp('served') / 'node'))
    yield host
    host.close()


class AgentProcess:
    """``nova-paging-agent`` run as a process with a config file of
    ``[section] option = value`` lines; its log in ``log``."""

    def __init__(self, tmp_path, options, name='agent'):
        import socket
        import subprocess
        import sys
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            self.port = s.getsockname()[1]
        sections = {}
        for (section, option), value in options.items():
            sections.setdefault(section, []).append('%s = %s' % (option,
                                                                 value))
        if ('agent', 'listen_port') not in options:
            sections.setdefault('agent', []).append('listen_port = %d'
                                                    % self.port)
        self.config = tmp_path / ('%s.conf' % name)
        self.config.write_text(''.join(
            '[%s]\n%s\n' % (section, '\n'.join(lines))
            for section, lines in sections.items()))
        self.log = tmp_path / ('%s.log' % name)
        self._out = open(self.log, 'w')
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'nova_adaptive_paging.cmd.agent',
             '--config-file', str(self.config)],
            stdout=self._out, stderr=subprocess.STDOUT)

    def text(self):
        return self.log.read_text()

    def handles(self, signum):
        """Whether the process has installed a handler for ``signum``."""
        try:
            with open('/proc/%d/status' % self.proc.pid) as f:
                caught = [line.split()[1] for line in f
                          if line.startswith('SigCgt:')][0]
        except (OSError, IndexError):
            return False
        return bool(int(caught, 16) >> (signum - 1) & 1)

    def scrape(self, timeout=5.0):
        """{family name: family} of one scrape of /metrics."""
        import urllib.request

        from prometheus_client import parser
        with urllib.request.urlopen('http://127.0.0.1:%d/metrics'
                                    % self.port, timeout=timeout) as r:
            text = r.read().decode()
        return {f.name: f for f in parser.text_string_to_metric_families(
            text)}

    @staticmethod
    def snapshot_age(fams):
        """The age of the snapshot a scrape's ``fams`` served, as the agent
        measured it; None before the agent's first pass."""
        from nova_adaptive_paging.telemetry import metrics
        family = fams.get(metrics.SNAPSHOT_AGE.name)
        return family.samples[0].value if family else None

    def scrape_after_pass(self, seconds=15.0):
        """A scrape whose snapshot the agent built after this call
        began: a pass's effect on a file can be seen before the pass
        has published its snapshot (on a loaded machine, for several
        scrapes), so a test that checks what /metrics says of that pass
        waits for it here.  The snapshot's age, as the agent measures
        it, dates it; a scrape sent at ``asked`` serves one built after
        ``start`` if its age is below ``asked - start``."""
        import time
        start = time.monotonic()
        deadline = start + seconds
        while True:
            asked = time.monotonic()
            fams = self.scrape()
            age = self.snapshot_age(fams)
            if age is not None and age < asked - start:
                return fams
            if self.proc.poll() is not None or asked > deadline:
                raise AssertionError('no snapshot after a pass within %s s '
                                     '(agent ended: %s)'
                                     % (seconds, self.proc.poll()))
            time.sleep(0.05)

    def serving(self):
        try:
            self.scrape(1.0)
        except OSError:
            return False
        return True

    def stop(self, seconds=15):
        """SIGTERM; the exit status."""
        import signal
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(seconds)
        finally:
            self._out.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._out.close()


@pytest.fixture
def agent_process(tmp_path):
    """agent_process(options, name=...): a started AgentProcess, killed
    at the end of the test if it still runs."""
    started = []

    def start(options, name='agent'):
        proc = AgentProcess(tmp_path, options, name)
        started.append(proc)
        return proc
    yield start
    for proc in started:
        proc.kill()
