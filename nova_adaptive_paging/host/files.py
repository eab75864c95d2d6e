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

"""The switching interface's files under a root directory."""

import errno
import os

from nova_adaptive_paging.abi import spec


def decode(data, what):
    """The interface's text is ASCII: anything else is an I/O error of
    the file (EILSEQ) that the callers already handle, not a
    UnicodeDecodeError that none expects."""
    try:
        return data.decode('ascii')
    except UnicodeDecodeError:
        raise OSError(errno.EILSEQ, 'not ASCII text', what)


class FileTransport:
    """Reads and writes the interface's files under ``root``."""

    def __init__(self, root):
        self.root = root

    def _path(self, rel):
        return os.path.join(self.root, rel)

    def read(self, rel):
        # One read(2) of a page: an earlier build of the series made a
        # file's text afresh at each read, so a second read(2) at the
        # first one's end could return the tail of a newer, longer text
        # (paging_stats while its counters grow).  Every file of the
        # interface fits in a page.
        # O_NONBLOCK: a FIFO or a device where a file should be (a
        # simulated host's files are anybody's) reads as what it holds
        # now, never blocks; sysfs and regular files ignore the flag.
        fd = os.open(self._path(rel), os.O_RDONLY | os.O_NONBLOCK)
        try:
            return decode(os.read(fd, spec.IO_READ_MAX), rel)
        finally:
            os.close(fd)

    def write(self, rel, text):
        # One write(2) per value, unbuffered, as the kernel expects.
        fd = os.open(self._path(rel), os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, text.encode('ascii'))
        finally:
            os.close(fd)

    def listdir(self, rel):
        return os.listdir(self._path(rel))

    def exists(self, rel):
        return os.path.exists(self._path(rel))

    def vcpus_in_shadow(self, vm):
        """``(vCPUs in shadow mode, vCPUs)`` of VM ``vm`` as KVM's
        debugfs shows them: a vCPU statistic in the VM's directory is the
        sum over its vCPUs, each of which has a ``vcpu<N>`` directory.
        Read as files also by a transport that serves the per-VM files
        otherwise: KVM answers a vCPU's own ioctls, its statistics
        descriptor included, only to the VM's process (EIO)."""
        rel = '%s/%s' % (spec.DEBUGFS_DIR, vm)
        shadow = int(FileTransport.read(
            self, '%s/%s' % (rel, spec.VCPU_STAT_SHADOW)))
        count = sum(1 for name in FileTransport.listdir(self, rel)
                    if name.startswith('vcpu') and name[4:].isdigit())
        return shadow, count

    def paging_mode_cap(self):
        """Modeled ``KVM_CHECK_EXTENSION(KVM_CAP_PAGING_MODE)`` under a
        root that is not a host's (a simulated host): there is no
        ``/dev/kvm`` to ask, and a simulated host models the whole
        series, whose control is there when its interface is."""
        return self.exists(spec.param_path(spec.PARAM_ABI))

    def set_mode(self, vm, mode):
        """Modeled ``KVM_SET_PAGING_MODE`` on VM ``vm`` (``<pid>-<fd>``)
        under a root that is not a host's (a simulated host): there is no
        VM descriptor, and on a kernel with the text interface the ioctl
        is the write of the mode to the VM's policy, which is what this
        does."""
        self.write(spec.vm_path(vm, spec.FILE_POLICY), mode + '\n')
