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

"""One VM's files of the switching interface, and which VM a libvirt
domain is.  Every refusal names the file, the value and what was
expected."""

import errno
import os

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import dsp
from nova_adaptive_paging import exception
from nova_adaptive_paging import vocabulary

# libvirt's QEMU driver writes <domain>.pid here (under the host root).
LIBVIRT_PID_DIR = 'run/libvirt/qemu'


# How a mode set through the mechanism's control is named in refusals and
# logs: the ioctl's own name.
SET_MODE = 'KVM_SET_PAGING_MODE'


class Refused(exception.Error):
    """The interface or the VM does not allow what the measurement needs;
    ``errno``, the kernel's error where there was one."""

    def __init__(self, rel, value, expected, err=None):
        super().__init__('%s: %s; expected %s' % (rel, value, expected))
        self.errno = err


# The spec's names for the errors it defines (EOPNOTSUPP is ENOTSUP to
# errno.errorcode on Linux).
ERRNO_NAMES = {spec.EINVAL: 'EINVAL', spec.EPERM: 'EPERM',
               spec.EOPNOTSUPP: 'EOPNOTSUPP'}


def _errname(exc):
    return ERRNO_NAMES.get(exc.errno) or errno.errorcode.get(
        exc.errno, str(exc.errno))


def check_abi(transport):
    """Refuse a host without the interface, or with another version."""
    rel = spec.param_path(spec.PARAM_ABI)
    expected = 'ABI version %d (kernel with the paging-switch patch)' % (
        spec.ABI_VERSION)
    if not transport.exists(rel):
        raise Refused(rel, 'missing', expected)
    value = transport.read(rel).strip()
    if value != str(spec.ABI_VERSION):
        raise Refused(rel, value, expected)


def domain_pid(root, domain):
    """The pid (text) of a libvirt domain's QEMU process."""
    pid_file = os.path.join(root, LIBVIRT_PID_DIR, domain + '.pid')
    try:
        with open(pid_file, encoding='ascii') as f:
            pid = f.read().strip()
    except OSError as exc:
        raise Refused(pid_file, 'cannot be read (%s)' % exc.strerror,
                      'the pid file of a running libvirt domain')
    if not pid.isdigit():
        raise Refused(pid_file, repr(pid), 'a process id')
    return pid


def guest_pids(root):
    """The pids libvirt's QEMU driver has written for its running
    guests; a pid file that is not one pid is left out."""
    directory = os.path.join(root, LIBVIRT_PID_DIR)
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    pids = set()
    for name in names:
        if not name.endswith('.pid'):
            continue
        try:
            with open(os.path.join(directory, name), 'rb') as f:
                text = f.read(32).strip()
        except OSError:
            continue
        if text.isdigit():
            pids.add(int(text))
    return pids


def vm_for_domain(root, transport, domain, text_interface=True):
    """The ``<pid>-<fd>`` directory of a libvirt domain's QEMU process:
    with the text interface, the one that has a policy file; on a kernel
    with the mechanism alone, the one VM of the process."""
    pid = domain_pid(root, domain)
    marker = spec.FILE_POLICY if text_interface else None
    found = sorted(
        name for name in transport.listdir(spec.DEBUGFS_DIR)
        if (m := spec.VM_DIR_RE.match(name)) and m.group('pid') == pid
        and (marker is None or transport.exists(spec.vm_path(name,
                                                             marker))))
    if len(found) != 1:
        raise Refused('%s/%s-*' % (spec.DEBUGFS_DIR, pid),
                      '%d VM directories%s' % (
                          len(found), ' with %s' % marker if marker else ''),
                      'exactly one (one VM per QEMU process)')
    return found[0]


class Vm:
    """One VM's per-VM files, with refusals that name file and value.
    ``text_interface`` False: a kernel with the mechanism alone, where
    the VM has its directory, its vCPUs' statistics and
    ``KVM_SET_PAGING_MODE``, and none of the interface's files."""

    def __init__(self, transport, name, text_interface=True):
        self.t = transport
        self.name = name
        self.text_interface = text_interface

    def rel(self, name):
        return spec.vm_path(self.name, name)

    def read(self, name):
        try:
            return self.t.read(self.rel(name))
        except OSError as exc:
            raise Refused(self.rel(name), 'cannot be read (%s)'
                          % _errname(exc), 'a VM of the ABI')

    def write(self, name, value, expected):
        try:
            self.t.write(self.rel(name), value + '\n')
        except OSError as exc:
            raise Refused(self.rel(name), 'writing %r failed with %s'
                          % (value, _errname(exc)), expected, exc.errno)

    def word(self, name):
        return self.read(name).strip()

    def mode(self):
        """The mode the VM runs in, or None if that cannot be read."""
        if not self.text_interface:
            return self.vcpu_mode()
        try:
            return self.word(spec.FILE_MODE)
        except Refused:
            return None

    def exists(self):
        """Whether the VM is still there (its policy file is; without
        the text interface, its directory)."""
        if not self.text_interface:
            # The listing: a privsep daemon's is the VMs of the guests.
            return self.name in self.t.listdir(spec.DEBUGFS_DIR)
        return self.t.exists(self.rel(spec.FILE_POLICY))

    def vcpu_mode(self):
        """The VM's mode as its vCPUs' ``paging_shadow`` statistics show
        it (a kernel with the mechanism alone has no paging_mode): shadow
        if any vCPU runs in shadow mode, since a vCPU whose guest has
        paging off (an AP never started, a reboot) runs at TDP whatever
        the VM's mode; hap if none does, which is also what a VM in
        shadow mode whose every vCPU has paging off shows.  None where
        they cannot be read."""
        try:
            shadow, count = self.t.vcpus_in_shadow(self.name)
        except (OSError, ValueError):
            return None
        if not count:
            return None
        return vocabulary.SHADOW if shadow else vocabulary.HAP

    def parsed(self, name, parse):
        """``parse`` of the file's text; a bad format names the file."""
        try:
            return parse(self.read(name))
        except spec.AbiFormatError as exc:
            raise Refused(self.rel(name), str(exc),
                          'the format of ABI version %d' % spec.ABI_VERSION)

    def stats(self):
        return self.parsed(spec.FILE_STATS, spec.parse_stats)

    def thresholds(self):
        """The effective set and whether it is a per-VM override."""
        return self.parsed(spec.FILE_THRESHOLDS, spec.parse_vm_thresholds)

    def set_policy(self, policy):
        self.write(spec.FILE_POLICY, policy,
                   'a VM that can run in hap and in shadow mode')

    def switch(self, mode):
        self.write(spec.FILE_SWITCH, mode, 'policy adaptive')

    def set_mode(self, mode):
        """The mechanism's control, ``KVM_SET_PAGING_MODE``: the VM runs
        in ``mode`` (hap or shadow) until told otherwise."""
        try:
            self.t.set_mode(self.name, mode)
        except OSError as exc:
            raise Refused('%s/%s %s' % (spec.DEBUGFS_DIR, self.name,
                                        SET_MODE),
                          'mode %s failed with %s' % (mode, _errname(exc)),
                          'a VM that can run in hap and in shadow mode',
                          exc.errno)


def no_engine_thresholds(current):
    """The VM's thresholds with the longest window and interval: the
    engine cannot decide within ``HISTORY_MAX`` hours."""
    return spec.ThresholdSet(current.thresholds, dsp.HISTORY_MAX,
                             spec.INTERVAL_MS_RANGE[1])


class Saved:
    """A VM's policy, mode and threshold override, and how to restore them."""

    def __init__(self, vm):
        self.vm = vm
        self.policy = vm.word(spec.FILE_POLICY)
        self.mode = vm.word(spec.FILE_MODE)
        self.thresholds, self.override = vm.thresholds()

    def restore(self):
        vm = self.vm
        if self.policy == vocabulary.ADAPTIVE:
            vm.set_policy(self.mode)    # back to its mode, then hand over
        vm.write(spec.FILE_THRESHOLDS,
                 self.thresholds.format().strip() if self.override
                 else 'default', 'a per-VM threshold override')
        vm.set_policy(self.policy)

    def describe(self):
        return 'policy %s, mode %s, thresholds %s' % (
            self.policy, self.mode, 'override' if self.override
            else 'host default')
