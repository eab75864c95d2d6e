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

"""Guest-only hardware counters of a QEMU process's vCPU threads, for
advisory mode on hosts without the switching patch.

``perf_event_open(2)`` with ``exclude_host`` counts what the vCPU thread
retires while it runs guest code: instructions and data-TLB load misses
(the page walks the guest's accesses cause, which is what HAP makes dear).
Opening them on another user's threads needs ``CAP_PERFMON`` and ptrace
access: the agent does it through its privsep daemon
(:mod:`.privileged`).  A host whose CPU or hypervisor exposes no PMU (as
in most VMs, and on the machines this project is tested on) has no such
counters: :class:`Unavailable` says why, once.

Each event is read with the times it was enabled and on the PMU, and an
interval counts as the kernel's sampler counts it
(:func:`nova_adaptive_paging.dsp.counter_delta`): an event starved of
PMU time by pinned events (a vPMU's) has no count for the interval, not
a count of zero, and a multiplexed one is scaled for its time off.
"""

import ctypes
import errno
import os
import re
import struct

from nova_adaptive_paging import dsp

_NR_PERF_EVENT_OPEN = 298          # x86_64
PERF_TYPE_HARDWARE = 0
PERF_TYPE_HW_CACHE = 3
PERF_COUNT_HW_INSTRUCTIONS = 1
# dTLB, read access, miss: id | (op << 8) | (result << 16).
PERF_COUNT_HW_CACHE_DTLB_READ_MISS = 3 | (0 << 8) | (1 << 16)
_ATTR_SIZE = 128                   # PERF_ATTR_SIZE_VER7 and later
_DISABLED, _EXCLUDE_HV, _EXCLUDE_HOST = 1 << 0, 1 << 6, 1 << 19
# read(2) gives (count, time enabled, time running), each a u64.
_FORMAT_TOTAL_TIME_ENABLED, _FORMAT_TOTAL_TIME_RUNNING = 1 << 0, 1 << 1
_READING = struct.Struct('=QQQ')
EVENTS = ((PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
          (PERF_TYPE_HW_CACHE, PERF_COUNT_HW_CACHE_DTLB_READ_MISS))
# QEMU names its vCPU threads "CPU <n>/KVM".
VCPU_COMM = re.compile(r'CPU \d+/KVM')

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class Unavailable(Exception):
    """``reason`` is the same for every guest of a host that lacks the
    counters, so that it is reported once."""

    def __init__(self, message, reason):
        super().__init__(message)
        self.reason = reason


def _attr(kind, config):
    buf = bytearray(_ATTR_SIZE)
    struct.pack_into('=IIQ', buf, 0, kind, _ATTR_SIZE, config)
    struct.pack_into('=Q', buf, 32, _FORMAT_TOTAL_TIME_ENABLED
                     | _FORMAT_TOTAL_TIME_RUNNING)
    struct.pack_into('=Q', buf, 40, _EXCLUDE_HV | _EXCLUDE_HOST)
    return (ctypes.c_char * _ATTR_SIZE).from_buffer(buf)


def _open(kind, config, tid):
    attr = _attr(kind, config)
    fd = _libc.syscall(_NR_PERF_EVENT_OPEN, ctypes.byref(attr),
                       ctypes.c_int(tid), ctypes.c_int(-1),
                       ctypes.c_int(-1), ctypes.c_ulong(0))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return fd


def vcpu_threads(pid, proc='/proc'):
    """The thread ids of a QEMU process's vCPUs."""
    out = []
    task = os.path.join(proc, str(pid), 'task')
    for tid in os.listdir(task):
        try:
            with open(os.path.join(task, tid, 'comm')) as f:
                if VCPU_COMM.fullmatch(f.read().strip()):
                    out.append(int(tid))
        except OSError:
            continue                    # the thread ended
    return sorted(out)


class GuestCounters:
    """Instructions and dTLB misses of one guest, summed over its vCPUs."""

    def __init__(self, pid, proc='/proc'):
        tids = vcpu_threads(pid, proc)
        if not tids:
            raise Unavailable('process %d has no vCPU threads' % pid,
                              'a QEMU process without vCPU threads')
        self.fds = []
        self._start_counting()
        try:
            for tid in tids:
                self.fds.append(tuple(_open(k, c, tid) for k, c in EVENTS))
        except OSError as exc:
            self.close()
            reason = {errno.ENOENT: 'no such hardware event (no PMU)',
                      errno.EOPNOTSUPP: 'the PMU cannot count guest-only',
                      errno.EACCES: 'not permitted (CAP_PERFMON, ptrace)',
                      errno.EPERM: 'not permitted (CAP_PERFMON, ptrace)'}
            why = '%s (%s)' % (reason.get(exc.errno, exc.strerror),
                               exc.strerror)
            raise Unavailable('perf_event_open of process %d: %s'
                              % (pid, why), 'perf_event_open: ' + why)

    def _start_counting(self):
        """No reading yet of any event, nothing counted."""
        self.last = {}
        self.totals = [0] * len(EVENTS)

    def read(self):
        """(instructions, dTLB misses) since the open, each the sum of
        the intervals between two reads that had a count; None for an
        event some vCPU's interval since the last read has no count of
        (its sum then leaves that interval out)."""
        deltas = [0] * len(EVENTS)
        for group in self.fds:
            for i, fd in enumerate(group):
                now = _READING.unpack(os.read(fd, _READING.size))
                delta = dsp.counter_delta(self.last.get(fd, (0, 0, 0)), now)
                self.last[fd] = now
                if delta is None or deltas[i] is None:
                    deltas[i] = None
                else:
                    deltas[i] += delta
        for i, delta in enumerate(deltas):
            if delta is not None:
                self.totals[i] += delta
        return tuple(None if d is None else t
                     for d, t in zip(deltas, self.totals))

    def close(self):
        for group in self.fds:
            for fd in group:
                os.close(fd)
        self.fds = []
