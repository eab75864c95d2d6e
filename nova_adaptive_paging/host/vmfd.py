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

"""The per-VM files through the VM's file descriptor (interface version 2).

A kernel in lockdown (Secure Boot hosts) refuses to open any debugfs file
that can be written, so the per-VM files are also served by the
``KVM_PAGING_SWITCH_IO`` ioctl on the VM file descriptor, which works
whatever the lockdown level.  QEMU holds that descriptor; this transport
takes a copy with pidfd_getfd(2), which needs ptrace rights over QEMU
(root's, or ``CAP_SYS_PTRACE``), and issues the ioctl on it.  QEMU is not
involved and need not be changed.

The paths stay those of debugfs, so that everything above the transport
is the same: ``sys/kernel/debug/kvm/<pid>-<fd>/<file>`` names the VM whose
descriptor is ``<fd>`` in process ``<pid>``, and a listing of
``sys/kernel/debug/kvm`` is made from ``/proc``, not from debugfs (which a
host may not mount, and where two VMs of one process can collide).  Any
other path is a file under the root, as with ``files.FileTransport``.
Errors are ``OSError`` with the errno the kernel gave, as a file's write
would.  :meth:`VmFdTransport.set_mode` issues the mechanism's own control,
``KVM_SET_PAGING_MODE``, on the same copy.
"""

import contextlib
import ctypes
import errno
import fcntl
import os

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.host import files

_SYS_PIDFD_GETFD = 438      # x86-64
_libc = ctypes.CDLL(None, use_errno=True)


def _gone(what):
    return FileNotFoundError(errno.ENOENT, 'no such VM', what)


class VmFdTransport(files.FileTransport):
    """The interface under ``root`` (``/``), per-VM files by ioctl.
    ``check_pid``, if given, is called with the pid once a pidfd holds
    the process, and refuses it by raising: a pid checked before would
    name whatever process reused it by the time the pidfd is opened."""

    def __init__(self, root, check_pid=None):
        super().__init__(root)
        self.check_pid = check_pid

    def _vm_path(self, rel):
        """``(pid, fd, file)`` of a per-VM path (file None for the VM's
        directory), or None for any other path."""
        head, _, rest = rel.strip('/').partition(spec.DEBUGFS_DIR + '/')
        if head or not rest:
            return None
        name, _, file = rest.partition('/')
        m = spec.VM_DIR_RE.match(name)
        if not m or '/' in file:
            return None
        return int(m.group('pid')), int(m.group('fd')), file or None

    def _proc(self, *parts):
        return os.path.join(self.root, 'proc', *map(str, parts))

    @contextlib.contextmanager
    def _vm_fd(self, pid, fd, what):
        """A copy of process ``pid``'s VM descriptor ``fd``."""
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            raise _gone(what)
        try:
            if self.check_pid is not None:
                self.check_pid(pid)
            copy = _libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0)
            if copy < 0:
                err = ctypes.get_errno()
                if err == errno.EBADF:
                    raise _gone(what)
                raise OSError(err, os.strerror(err), what)
        finally:
            os.close(pidfd)
        try:
            if os.readlink('/proc/self/fd/%d' % copy) != spec.VM_FD_LINK:
                raise _gone(what)
            yield copy
        finally:
            os.close(copy)

    def _io(self, rel, write, text=''):
        pid, fd, file = self._vm_path(rel)
        # Any other name is the kernel's to refuse (ENOENT).
        if not file or len(file.encode('ascii')) > spec.IO_NAME_MAX:
            raise _gone(rel)
        data = ctypes.create_string_buffer(
            text.encode('ascii') if write else spec.IO_READ_MAX)
        size = len(text) if write else spec.IO_READ_MAX
        arg = bytearray(spec.IO_STRUCT.pack(
            file.encode('ascii'), spec.IO_WRITE if write else 0, size,
            ctypes.addressof(data)))
        with self._vm_fd(pid, fd, rel) as vm:
            try:
                fcntl.ioctl(vm, spec.KVM_PAGING_SWITCH_IO, arg, True)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, rel)
        _, _, size, _ = spec.IO_STRUCT.unpack(arg)
        return files.decode(data.raw[:size], rel)

    def read(self, rel):
        if self._vm_path(rel) is None:
            return super().read(rel)
        return self._io(rel, write=False)

    def write(self, rel, text):
        if self._vm_path(rel) is None:
            return super().write(rel, text)
        self._io(rel, write=True, text=text)

    def set_mode(self, vm, mode):
        """``KVM_SET_PAGING_MODE`` on VM ``vm`` (``<pid>-<fd>``): the
        mechanism's own control, which a kernel without the text
        interface has too."""
        rel = '%s/%s' % (spec.DEBUGFS_DIR, vm)
        pid, fd, _ = self._vm_path(rel)
        arg = spec.MODE_STRUCT.pack(spec.KVM_PAGING_MODE[mode], 0)
        with self._vm_fd(pid, fd, rel) as copy:
            try:
                fcntl.ioctl(copy, spec.KVM_SET_PAGING_MODE, arg)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, rel)

    def paging_mode_cap(self):
        """``KVM_CHECK_EXTENSION(KVM_CAP_PAGING_MODE)`` on ``/dev/kvm``:
        whether the kernel has the mechanism's control, and switches on
        this host (0 where it refuses every switch: AVIC, no TDP)."""
        fd = os.open(os.path.join(self.root, spec.KVM_DEV),
                     os.O_RDWR | os.O_CLOEXEC)
        try:
            return fcntl.ioctl(fd, spec.KVM_CHECK_EXTENSION,
                               spec.KVM_CAP_PAGING_MODE) > 0
        finally:
            os.close(fd)

    def _vms(self):
        """``<pid>-<fd>`` of every VM descriptor of every process."""
        return ['%s-%s' % (pid, fd) for pid in os.listdir(self._proc())
                if pid.isdigit() for fd in vm_fds(pid, self.root)]

    def listdir(self, rel):
        if rel.strip('/') == spec.DEBUGFS_DIR:
            return self._vms()
        vm = self._vm_path(rel)
        if vm is None:
            return super().listdir(rel)
        if vm[2] is not None or not self._is_vm(vm[0], vm[1], rel):
            raise _gone(rel)
        return list(spec.VM_FILES)

    def _is_vm(self, pid, fd, rel):
        try:
            with self._vm_fd(pid, fd, rel):
                return True
        except FileNotFoundError:
            return False

    def exists(self, rel):
        if rel.strip('/') == spec.DEBUGFS_DIR:
            return True
        vm = self._vm_path(rel)
        if vm is None:
            return super().exists(rel)
        return (vm[2] is None or vm[2] in spec.VM_FILES) and \
            self._is_vm(vm[0], vm[1], rel)


def vm_fds(pid, root='/'):
    """The descriptors (text) of process ``pid`` that are KVM VMs; none
    when it has gone or its descriptors are not ours to see."""
    fds = os.path.join(root, 'proc', str(pid), 'fd')
    try:
        names = os.listdir(fds)
    except OSError:
        return []
    found = []
    for fd in names:
        try:
            if os.readlink(os.path.join(fds, fd)) == spec.VM_FD_LINK:
                found.append(fd)
        except OSError:
            continue                    # closed since the listing
    return found


def holds_vm(pid, root='/'):
    """Whether process ``pid`` holds a KVM VM descriptor."""
    return bool(vm_fds(pid, root))
