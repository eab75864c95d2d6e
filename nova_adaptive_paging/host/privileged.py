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

"""The agent's only privileged code: reading and writing the switching
interface's files on a real host, through oslo.privsep.

The per-VM files are reached through QEMU's VM file descriptor
(``host.vmfd``: pidfd_getfd(2) needs ptrace rights over QEMU) and the
host-wide ones are root's module parameters, so the agent runs
unprivileged and asks a privsep daemon for exactly these operations; in
advisory mode the same daemon opens and reads the guest-only counters of
QEMU's vCPU threads (and nothing else).  doc/source/security.rst says
why the daemon keeps each of its four capabilities.

The daemon trusts nothing the agent sends: every path must be one of the
interface's own names (``abi/spec.py``), and every process it reaches
(a VM's descriptor, a guest's counters) must be the QEMU of a libvirt
guest on this host: named by one of libvirt's pid files and holding a
KVM VM descriptor.  A compromised agent can change a VM's paging policy
or the host's thresholds, never open another file or another process.
Paths are always under ``/``: a simulated host's root is the agent's own
and needs no privilege (``host.transport.for_root``).

sudo starts the daemon (host-agent/sudoers.d-nova-paging-agent) with one
argument of the agent's choosing, the socket path, which must lie in
:data:`RUNTIME_DIR`: oslo.privsep makes it with ``tempfile.mkdtemp``, so
the agent's unit sets ``TMPDIR`` to that directory (and where the
runtime directory exists but ``TMPDIR`` says otherwise, as under the
Ansible role's pidfile mode, :class:`Transport` points oslo.privsep's
``mkdtemp`` there itself).

Every call has a deadline: the daemon must start within the agent's
``[agent] privsep_timeout`` (else :class:`Unavailable`, one line, and
the helper it ran is ended) and each call must answer within it (else
oslo.privsep's timeout error, counted by the caller).  A daemon that
ended (the OOM killer of the unit's cgroup) is started again under the
same deadline: oslo.privsep would start it inside the next call and
wait for its helper's connection without end.
"""

import errno
import logging
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time

from oslo_config import cfg
from oslo_log import log as oslo_logging
from oslo_privsep import capabilities
from oslo_privsep import priv_context

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import exception
from nova_adaptive_paging.host import perf
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging.host import vmfd

LOG = logging.getLogger(__name__)

# The agent's runtime directory (systemd's RuntimeDirectory): the only
# place sudo lets the privsep socket be.
RUNTIME_DIR = '/run/nova-paging-agent'

# linux/capability.h: newer oslo.privsep releases name it, the 3.0 that
# Debian 12 packages does not (the agent's end-to-end test runs on it).
CAP_PERFMON = getattr(capabilities, 'CAP_PERFMON', 38)

host_admin = priv_context.PrivContext(
    'nova_adaptive_paging',
    cfg_section='nova_adaptive_paging_privileged',
    pypath=__name__ + '.host_admin',
    capabilities=[capabilities.CAP_DAC_OVERRIDE,
                  capabilities.CAP_DAC_READ_SEARCH,
                  # QEMU's VM descriptor (pidfd_getfd), and in advisory
                  # mode the guest-only counters of QEMU's threads
                  capabilities.CAP_SYS_PTRACE, CAP_PERFMON],
)

_VM_FILE = re.compile(r'%s/(?P<pid>\d+)-\d+/(?P<file>%s)' % (
    re.escape(spec.DEBUGFS_DIR), '|'.join(spec.VM_FILES)))
_PARAM = re.compile(r'%s/(%s)' % (re.escape(spec.PARAMS_DIR), '|'.join(
    (spec.PARAM_ABI, spec.PARAM_THRESHOLDS, spec.PARAM_INJECT,
     spec.PARAM_PMU_ALL, spec.PARAM_WALK_EVENTS, spec.PARAM_TDP_MMU))))
_WRITABLE_PARAMS = (spec.PARAM_THRESHOLDS, spec.PARAM_PMU_ALL,
                    spec.PARAM_WALK_EVENTS)
_WRITABLE_VM_FILES = (spec.FILE_POLICY, spec.FILE_SWITCH,
                      spec.FILE_THRESHOLDS, spec.FILE_GUEST_FAULTS)


def check_guest_pid(pid, root='/'):
    """Refuse (PermissionError) a process that is not the QEMU of a
    libvirt guest of this host: its pid must be in one of libvirt's pid
    files and it must hold a KVM VM descriptor."""
    pid = int(pid)
    if pid not in vmfiles.guest_pids(root):
        raise PermissionError(1, 'not the QEMU of a libvirt guest of this '
                              'host (no pid file of %s names it)'
                              % os.path.join(root, vmfiles.LIBVIRT_PID_DIR),
                              str(pid))
    if not vmfd.holds_vm(pid, root):
        raise PermissionError(1, 'holds no KVM VM descriptor', str(pid))
    return pid


def check_path(rel, write=False, root=None):
    """Refuse (PermissionError) any path that is not an interface file
    (or, for a write, not one the agent writes); with ``root``, also a
    VM's file whose process is not a guest's QEMU
    (:func:`check_guest_pid`)."""
    vm = _VM_FILE.fullmatch(rel)
    param = _PARAM.fullmatch(rel)
    ok = vm or param or (not write and rel == spec.DEBUGFS_DIR)
    if ok and write:
        ok = ((vm and vm.group('file') in _WRITABLE_VM_FILES)
              or (param and param.group(1) in _WRITABLE_PARAMS))
    if not ok:
        raise PermissionError(1, 'not a switching-interface file the agent '
                              'may %s' % ('write' if write else 'read'), rel)
    if vm and root is not None:
        check_guest_pid(vm.group('pid'), root)


# The guest check again once the pidfd pins the process (check_path's
# is by pid alone, which a new process may have taken since).
_HOST = vmfd.VmFdTransport('/', check_pid=check_guest_pid)


@host_admin.entrypoint
def read(rel):
    check_path(rel, root='/')
    return _HOST.read(rel)


@host_admin.entrypoint
def write(rel, text):
    check_path(rel, write=True, root='/')
    _HOST.write(rel, text)


def check_mode_request(vm, mode, root='/'):
    """Refuse (PermissionError) a ``KVM_SET_PAGING_MODE`` request that is
    not hap or shadow for the VM (``<pid>-<fd>``) of a guest's QEMU."""
    m = spec.VM_DIR_RE.fullmatch(str(vm))
    if not m or mode not in spec.KVM_PAGING_MODE:
        raise PermissionError(1, 'not a VM and a paging mode the agent may '
                              'set', '%s %s' % (vm, mode))
    check_guest_pid(m.group('pid'), root)


@host_admin.entrypoint
def set_mode(vm, mode):
    """``KVM_SET_PAGING_MODE`` on a guest's VM, to hap or shadow."""
    check_mode_request(vm, mode)
    _HOST.set_mode(vm, mode)


def check_vm(vm, root='/'):
    """Refuse (PermissionError) a name that is not the VM
    (``<pid>-<fd>``) of a guest's QEMU."""
    m = spec.VM_DIR_RE.fullmatch(str(vm))
    if not m:
        raise PermissionError(1, 'not a VM', str(vm))
    check_guest_pid(m.group('pid'), root)


@host_admin.entrypoint
def vcpus_in_shadow(vm):
    """``(vCPUs in shadow mode, vCPUs)`` of a guest's VM, from its
    vCPUs' paging_shadow statistic in debugfs."""
    check_vm(vm)
    return _HOST.vcpus_in_shadow(vm)


@host_admin.entrypoint
def paging_mode_cap():
    """Whether the kernel has ``KVM_SET_PAGING_MODE`` and switches here."""
    return _HOST.paging_mode_cap()


@host_admin.entrypoint
def ping():
    """The daemon's pid: that it runs and answers."""
    return os.getpid()


@host_admin.entrypoint
def listdir(rel):
    check_path(rel, root='/')
    names = _HOST.listdir(rel)
    if rel.strip('/') == spec.DEBUGFS_DIR:
        # Only the VMs of libvirt's guests are the agent's to see.
        pids = {str(pid) for pid in vmfiles.guest_pids('/')}
        names = [n for n in names if (m := spec.VM_DIR_RE.match(n))
                 and m.group('pid') in pids]
    return names


def _use_our_helper(conf=None):
    """sudo runs the privsep-helper installed beside the agent (its
    virtualenv's bin/, outside sudo's secure_path), as the sudoers file
    of host-agent/ names it; an operator's helper_command wins.

    oslo.privsep reads its section from the global ``cfg.CONF``, while
    the agent's options live in a ConfigOpts of their own
    (:mod:`nova_adaptive_paging.conf`): the agent's configuration files
    are parsed into ``cfg.CONF`` too, or a
    ``[nova_adaptive_paging_privileged]`` section in them would never
    apply.
    """
    helper = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])),
                          'privsep-helper')
    cfg.CONF.set_default('helper_command', 'sudo %s' % helper,
                         group=host_admin.cfg_section)
    files = getattr(conf, 'config_file', None) or []
    dirs = getattr(conf, 'config_dir', None) or []
    if files or dirs:
        cfg.CONF([], project='nova-adaptive-paging',
                 default_config_files=list(files),
                 default_config_dirs=list(dirs))


# Guest-only counters the daemon holds open, by handle (file descriptors
# do not cross the privsep channel).
_COUNTERS = {}


@host_admin.entrypoint
def counters_open(pid):
    counters = perf.GuestCounters(check_guest_pid(pid))
    handle = max(_COUNTERS, default=0) + 1
    _COUNTERS[handle] = counters
    return handle


@host_admin.entrypoint
def counters_read(handle):
    return _COUNTERS[handle].read()


@host_admin.entrypoint
def counters_close(handle):
    counters = _COUNTERS.pop(handle, None)
    if counters is not None:
        counters.close()


class Counters:
    """perf.GuestCounters held by the privsep daemon."""

    def __init__(self, pid):
        _use_our_helper()
        self.handle = counters_open(pid)

    def read(self):
        return tuple(counters_read(self.handle))

    def close(self):
        counters_close(self.handle)


class Unavailable(exception.Error):
    """The privsep daemon cannot start: the agent cannot work here."""


def _children():
    """The pids of this process's children (the helper oslo.privsep
    runs, while it has not exited)."""
    pids = set()
    try:
        tasks = os.listdir('/proc/self/task')
    except OSError:
        return pids
    for tid in tasks:
        try:
            with open('/proc/self/task/%s/children' % tid) as f:
                pids.update(int(p) for p in f.read().split())
        except (OSError, ValueError):
            continue
    return pids


class _Quiet(logging.Filter):
    """Drops oslo.privsep's lines while :attr:`on`: the traceback and
    CRITICAL line of a start the agent ended itself (already one line of
    its own)."""

    on = False

    def filter(self, record):
        return not self.on


_QUIET = _Quiet()
logging.getLogger('oslo_privsep.comm').addFilter(_QUIET)
# The daemon's client logs through oslo.log, which renames ``oslo_...``.
oslo_logging.getLogger(host_admin.conf.logger_name).logger.addFilter(_QUIET)


def _hang_up_on_start():
    """A start that timed out waits in accept(2) on its socket for ever
    (oslo.privsep gives it no deadline), holding oslo.privsep's start
    lock, so no later start could run: connect to that socket, this
    process's own listening ``privsep.sock`` (matched by inode), and
    hang up, and the start fails at once."""
    ours = set()
    for fd in os.listdir('/proc/self/fd'):
        try:
            link = os.readlink('/proc/self/fd/%s' % fd)
        except OSError:
            continue
        if link.startswith('socket:['):
            ours.add(link[len('socket:['):-1])
    try:
        with open('/proc/self/net/unix') as f:
            rows = [line.split() for line in f.read().splitlines()[1:]]
    except OSError:
        return
    for row in rows:
        # Num RefCount Protocol Flags Type St Inode Path; __SO_ACCEPTCON
        if (len(row) == 8 and row[6] in ours and int(row[3], 16) & 0x10000
                and row[7].endswith('/privsep.sock')):
            try:
                with socket.socket(socket.AF_UNIX) as sock:
                    sock.settimeout(1.0)
                    sock.connect(row[7])
            except OSError:
                pass                # gone meanwhile


def _socket_dir():
    """oslo.privsep makes its socket's directory with mkdtemp: in the
    runtime directory, the only place the sudoers rule allows, when it
    exists, whatever TMPDIR says."""
    if os.path.isdir(RUNTIME_DIR) and os.access(RUNTIME_DIR, os.W_OK):
        tempfile.tempdir = RUNTIME_DIR


class Transport:
    """The host interface of ``/``, through the privsep daemon; every
    call answers within ``timeout`` seconds."""

    root = '/'

    def __init__(self, conf=None, timeout=None):
        _use_our_helper(conf)
        _socket_dir()
        if timeout is None:
            # oslo.config's NoSuchOptError is an AttributeError.
            timeout = getattr(getattr(conf, 'agent', None),
                              'privsep_timeout', None)
        # oslo.privsep 2.6 and later: the default timeout of every call.
        host_admin.timeout = timeout
        self.timeout = timeout
        # After a call that timed out, the others fail at once for as
        # long again (a stopped daemon would cost each guest of a pass
        # the whole timeout); then the next call tries for real.
        self._quiet_until = 0.0
        # The thread of the last start: one that has not returned holds
        # oslo.privsep's start lock (and a helper that never connected).
        self._starting = None

    def _call(self, entrypoint, *args):
        if time.monotonic() < self._quiet_until:
            raise OSError(errno.ETIMEDOUT, 'the privsep daemon did not '
                          'answer its last call within %.0f s; not asked '
                          'again before %.0f s more' % (
                              self.timeout or 0,
                              self._quiet_until - time.monotonic()),
                          args[0] if args else None)
        channel = host_admin.channel
        if self._starting is not None and self._starting.is_alive():
            raise OSError(errno.ETIMEDOUT, 'the privsep daemon has not '
                          'started: its helper never connected',
                          args[0] if args else None)
        if channel is not None and not (
                channel.running and channel.reader_thread.is_alive()):
            # Its reader ended: at EOF (running is then False) or on a
            # reset connection (a daemon killed with a request unread),
            # which leaves running True and oslo.privsep never restarts.
            self._restart(args[0] if args else None)
        try:
            return entrypoint(*args)
        except Exception as exc:    # oslo.privsep's share no base
            if type(exc).__name__ != 'PrivsepTimeout':
                raise
            self._quiet_until = time.monotonic() + (self.timeout or 0)
            raise OSError(errno.ETIMEDOUT, 'the privsep daemon did not '
                          'answer within %.0f s ([agent] privsep_timeout)'
                          % (self.timeout or 0),
                          args[0] if args else None) from None

    def _restart(self, what):
        """The daemon ended: start it again within the deadline, not
        inside the next call (where oslo.privsep would wait for ever for
        a helper that never connects)."""
        LOG.warning('the privsep daemon ended; starting it again')
        try:
            host_admin.stop()       # its reader has ended: no wait
        except OSError:             # the half close of a reset socket
            host_admin.channel = None
        try:
            self.start(self.timeout or 30.0)
        except Unavailable as exc:
            self._quiet_until = time.monotonic() + (self.timeout or 0)
            raise OSError(errno.ETIMEDOUT, str(exc), what) from None

    def ping(self):
        """The daemon's pid, within the deadline."""
        return self._call(ping)

    def start(self, timeout=30.0):
        """Start the daemon now (it starts at its first call otherwise),
        so that a host where it cannot start fails at start-up, in one
        line (:class:`Unavailable`), within ``timeout`` seconds: a
        helper that never connects (a sudo that waits, a helper that
        hangs) is ended, not waited for."""
        before = _children()
        outcome = {}

        def start():
            try:
                outcome['pid'] = ping()
            except Exception as exc:  # oslo.privsep's share no base
                outcome['error'] = exc
        thread = self._starting = threading.Thread(
            target=start, name='privsep-start', daemon=True)
        thread.start()
        thread.join(timeout)
        helper = cfg.CONF[host_admin.cfg_section].helper_command
        if thread.is_alive():
            _QUIET.on = True
            try:
                for pid in _children() - before:
                    try:
                        os.kill(pid, signal.SIGTERM)
                    except OSError:
                        pass
                _hang_up_on_start()
                thread.join(1.0)
            finally:
                _QUIET.on = False
            raise Unavailable(
                'the privsep daemon did not start within %.0f s ([agent] '
                'privsep_timeout): %s did not connect to its socket in %s'
                % (timeout, helper, RUNTIME_DIR))
        if 'error' in outcome:
            exc = outcome['error']
            raise Unavailable(
                'the privsep daemon did not start (%s: %s); the agent\'s '
                'user must be allowed to run %s as root by sudo, with the '
                'socket in %s (TMPDIR)' % (
                    type(exc).__name__, exc, helper, RUNTIME_DIR))
        return outcome['pid']

    def read(self, rel):
        # Most of /sys is world-readable: only what is not (another
        # user's VM descriptor) goes through the daemon.
        try:
            return _HOST.read(rel)
        except PermissionError:
            return self._call(read, rel)

    def write(self, rel, text):
        self._call(write, rel, text)

    def set_mode(self, vm, mode):
        self._call(set_mode, vm, mode)

    def paging_mode_cap(self):
        return self._call(paging_mode_cap)

    def vcpus_in_shadow(self, vm):
        return tuple(self._call(vcpus_in_shadow, vm))

    def listdir(self, rel):
        return self._call(listdir, rel)

    def exists(self, rel):
        if os.path.exists(os.path.join('/', rel)):
            return True
        try:
            self.read(rel)
        except OSError:
            return False
        return True
