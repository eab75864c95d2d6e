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

"""The per-VM files through the VM file descriptor (host.vmfd), up to the
ioctl.  No machine here has a KVM VM to take a descriptor from (no
/dev/kvm): the ioctl itself runs in the emulated hosts
(tests/kernel, the conformance suite through this transport with the
kernel locked down).  Here: which VMs a /proc lists, and that anything
that is not a VM's descriptor reads as a missing file."""

import os
import subprocess

import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.host import files
from nova_adaptive_paging.host import transport as host_transport
from nova_adaptive_paging.host import vmfd


def vm_rel(pid, fd, name=spec.FILE_POLICY):
    return '%s/%d-%d/%s' % (spec.DEBUGFS_DIR, pid, fd, name)


def test_vms_are_listed_from_proc(tmp_path):
    # /proc/<pid>/fd/<fd> links as the kernel shows them.
    links = {(100, 3): 'anon_inode:kvm', (100, 11): spec.VM_FD_LINK,
             (100, 12): 'anon_inode:kvm-vcpu:0', (200, 9): spec.VM_FD_LINK,
             (200, 10): spec.VM_FD_LINK, (300, 0): '/dev/null'}
    for (pid, fd), target in links.items():
        d = tmp_path / 'proc' / str(pid) / 'fd'
        d.mkdir(parents=True, exist_ok=True)
        os.symlink(target, d / str(fd))
    (tmp_path / 'proc' / 'self').mkdir()
    (tmp_path / 'proc' / '400').mkdir()       # no fd directory to read
    t = vmfd.VmFdTransport(str(tmp_path))
    assert sorted(t.listdir(spec.DEBUGFS_DIR)) == \
        ['100-11', '200-10', '200-9']
    assert t.exists(spec.DEBUGFS_DIR)


def test_other_paths_are_files_under_the_root(tmp_path):
    rel = '%s/%s' % (spec.PARAMS_DIR, spec.PARAM_THRESHOLDS)
    (tmp_path / spec.PARAMS_DIR).mkdir(parents=True)
    (tmp_path / rel).write_text('')
    t = vmfd.VmFdTransport(str(tmp_path))
    t.write(rel, 'history=3\n')
    assert t.read(rel) == 'history=3\n'
    assert t.exists(rel)
    assert t.listdir(spec.PARAMS_DIR) == [spec.PARAM_THRESHOLDS]


def test_a_descriptor_that_is_no_vm_is_no_vm(tmp_path):
    r, w = os.pipe()
    try:
        t = vmfd.VmFdTransport(str(tmp_path))
        rel = vm_rel(os.getpid(), r)
        with pytest.raises(FileNotFoundError):
            t.read(rel)
        with pytest.raises(FileNotFoundError):
            t.write(rel, 'shadow\n')
        assert not t.exists(rel)
        with pytest.raises(FileNotFoundError):
            t.listdir(os.path.dirname(rel))
    finally:
        os.close(r)
        os.close(w)


def test_a_closed_descriptor_or_a_gone_process_is_no_vm(tmp_path):
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    t = vmfd.VmFdTransport(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        t.read(vm_rel(os.getpid(), r))
    gone = subprocess.Popen(['true'])
    gone.wait()
    pid = gone.pid
    with pytest.raises(FileNotFoundError):
        t.read(vm_rel(pid, 3, spec.FILE_STATS))
    assert not t.exists(vm_rel(pid, 3))


def test_only_this_hosts_root_uses_the_descriptor(tmp_path):
    assert isinstance(host_transport.for_root('/'), vmfd.VmFdTransport)
    for privsep in (False, True):
        other = host_transport.for_root(str(tmp_path), privsep=privsep)
        assert type(other) is files.FileTransport
        assert other.root == str(tmp_path)


def test_holds_vm_tells_a_vm_owner_from_any_process(tmp_path):
    """What the privsep daemon asks of a pid before it reaches it."""
    fds = tmp_path / 'proc' / '42' / 'fd'
    fds.mkdir(parents=True)
    (fds / '3').symlink_to('/dev/null')
    assert not vmfd.holds_vm(42, str(tmp_path))
    (fds / '11').symlink_to(spec.VM_FD_LINK)
    assert vmfd.holds_vm(42, str(tmp_path))
    assert not vmfd.holds_vm(43, str(tmp_path))
    assert not vmfd.holds_vm(os.getpid())


def test_the_request_is_the_kernels_struct():
    # struct kvm_paging_switch_io: char name[32]; __u32 flags;
    # __u32 size; __u64 data; no padding: 48 bytes, and _IOWR(KVMIO,
    # 0xf0, it) as <asm-generic/ioctl.h> composes it (dir 3 = read and
    # write in bits 31:30, size in 29:16, type 0xAE in 15:8, nr in 7:0).
    assert spec.IO_STRUCT.size == 32 + 4 + 4 + 8
    assert spec.KVM_PAGING_SWITCH_IO == 0xc030aef0


def test_the_mechanisms_control_is_the_kernels_ioctl():
    # struct kvm_paging_mode: __u32 mode; __u32 flags; 8 bytes, and
    # _IOW(KVMIO, 0xf1, it): dir 1 (write) in bits 31:30.  The modes are
    # api.rst's KVM_PAGING_MODE_TDP 0 and KVM_PAGING_MODE_SHADOW 1; the
    # capability is numbered 1001.
    assert spec.MODE_STRUCT.size == 8
    assert spec.KVM_SET_PAGING_MODE == 0x4008aef1
    assert spec.KVM_PAGING_MODE == {'hap': 0, 'shadow': 1}
    assert spec.KVM_CAP_PAGING_MODE == 1001


def test_the_pid_is_checked_once_a_pidfd_holds_the_process():
    """The privsep daemon's guest check runs on the process the pidfd
    holds, so a pid reused after an earlier check is checked afresh, and
    a refusal takes nothing from the process."""
    seen = []

    def refuse(pid):
        seen.append(pid)
        raise PermissionError(1, 'not a guest', str(pid))

    transport = vmfd.VmFdTransport('/', check_pid=refuse)
    for call in (lambda: transport.read(vm_rel(os.getpid(), 0)),
                 lambda: transport.set_mode('%d-0' % os.getpid(), 'hap')):
        with pytest.raises(PermissionError, match='not a guest'):
            call()
    assert seen == [os.getpid()] * 2
