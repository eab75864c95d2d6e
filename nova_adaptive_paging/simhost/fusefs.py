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

"""Serving a simulated host's ABI files under ``<root>/sys`` with FUSE.

A plain directory cannot make a write(2) fail with EINVAL, EPERM or
EOPNOTSUPP, and the interface's contract depends on those errors, so the
files are served by a FUSE file system (``mfusepy`` over libfuse 3 or 2)
whose every read and write goes to the reference model
(:mod:`nova_adaptive_paging.abi.model`) through :class:`.host.SimHost`.
Mounting needs /dev/fuse and the right to mount (root, or fusermount).
"""

import errno
import stat
import time

from nova_adaptive_paging.abi import spec

MOUNT_DIR = 'sys'
READ_ONLY = {spec.PARAM_ABI, spec.PARAM_TDP_MMU, spec.PARAM_SWITCH_SUPPORTED,
             spec.FILE_MODE, spec.FILE_STATS} | {
    param for _, param in spec.VENDOR_TDP_PARAMS}
WRITE_ONLY = {spec.FILE_SWITCH, spec.FILE_GUEST_FAULTS, spec.FILE_INJECT}


def _import_fuse():
    try:
        import mfusepy as fuse
    except ImportError:      # pragma: no cover - depends on the machine
        import fuse
    return fuse


def _dirs(vendor):
    """Every directory of the served tree, relative to the mount."""
    out = {''}
    for rel in (spec.PARAMS_DIR, spec.DEBUGFS_DIR,
                spec.vendor_params_dir(vendor)):
        parts = rel.split('/')[1:]           # below 'sys'
        for i in range(1, len(parts) + 1):
            out.add('/'.join(parts[:i]))
    return out


def make_operations(host):
    """A fuse.Operations object serving ``host`` (a SimHost)."""
    fuse = _import_fuse()
    dirs = _dirs(host.model.vendor)
    debugfs = spec.DEBUGFS_DIR.split('/', 1)[1]
    started = time.time_ns()

    class Operations(fuse.Operations):
        use_ns = True

        def __init__(self):
            self.open_text = {}
            self.next_fh = 1

        # -- helpers ----------------------------------------------------
        @staticmethod
        def _rel(path):
            return path.strip('/')

        def _call(self, fn, *args):
            with host.lock:
                host.tick()
                try:
                    return fn(*args)
                except OSError as exc:
                    raise fuse.FuseOSError(exc.errno or errno.EIO)

        def _is_vm_dir(self, rel):
            head, _, name = rel.rpartition('/')
            return head == debugfs and name in host.model.vms

        # -- metadata --------------------------------------------------
        def getattr(self, path, fh=None):
            rel = self._rel(path)
            base = dict(st_uid=0, st_gid=0, st_atime=started,
                        st_mtime=started, st_ctime=started)
            with host.lock:
                if rel in dirs or self._is_vm_dir(rel):
                    return dict(base, st_mode=stat.S_IFDIR | 0o755,
                                st_nlink=2)
                if not host.model.exists(MOUNT_DIR + '/' + rel):
                    raise fuse.FuseOSError(errno.ENOENT)
            name = rel.rpartition('/')[2]
            mode = (0o444 if name in READ_ONLY else
                    0o200 if name in WRITE_ONLY else 0o644)
            return dict(base, st_mode=stat.S_IFREG | mode, st_nlink=1,
                        st_size=4096)

        def readdir(self, path, fh):
            rel = self._rel(path)
            with host.lock:
                if rel in dirs:
                    below = {d.rpartition('/')[2] for d in dirs
                             if d and d.rpartition('/')[0] == rel}
                    try:
                        below |= set(host.model.listdir(
                            MOUNT_DIR + '/' + rel))
                    except OSError:
                        pass
                elif self._is_vm_dir(rel):
                    below = set(spec.VM_FILES)
                else:
                    raise fuse.FuseOSError(errno.ENOTDIR)
            return ['.', '..'] + sorted(below)

        # -- data --------------------------------------------------------
        def open(self, path, flags):
            self.getattr(path)
            fh, self.next_fh = self.next_fh, self.next_fh + 1
            return fh

        def read(self, path, size, offset, fh):
            if offset == 0 or fh not in self.open_text:
                self.open_text[fh] = self._call(
                    host.model.read, MOUNT_DIR + path).encode('ascii')
            return self.open_text[fh][offset:offset + size]

        def write(self, path, data, offset, fh):
            self._call(host.model.write, MOUNT_DIR + path,
                       data.decode('ascii', 'replace'))
            return len(data)

        def truncate(self, path, length, fh=None):
            self.getattr(path)
            return 0

        def release(self, path, fh):
            self.open_text.pop(fh, None)
            return 0

    return Operations()


def serve(host, mountpoint, foreground=True):
    """Mount and serve until unmounted (blocks when ``foreground``)."""
    fuse = _import_fuse()
    fuse.FUSE(make_operations(host), mountpoint, foreground=foreground,
              direct_io=True, nothreads=True)
