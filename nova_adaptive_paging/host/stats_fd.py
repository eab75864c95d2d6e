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

"""KVM's binary statistics (``KVM_GET_STATS_FD``), the one place a kernel
with the series' part 1 alone shows where each vCPU runs: its
``paging_shadow`` statistic.  KVM's debugfs shows a vCPU statistic only
as the sum over the VM's vCPUs (in the VM's directory), and not at all
when debugfs is not mounted or is locked down; the statistics descriptor
of each vCPU is there whatever the lockdown.

The layout is the uapi's: ``struct kvm_stats_header`` at offset 0, then
``num_desc`` descriptors (``struct kvm_stats_desc`` and a name of
``name_size`` bytes each) at ``desc_offset``, and each statistic's
``size`` u64 values at ``data_offset`` plus its own ``offset``.
"""

import os
import struct

# struct kvm_stats_header {u32 flags, name_size, num_desc, id_offset,
# desc_offset, data_offset;}
HEADER = struct.Struct('=6I')
# struct kvm_stats_desc {u32 flags; s16 exponent; u16 size; u32 offset;
# u32 bucket_size; char name[];}
DESC = struct.Struct('=IhHII')
VALUE = struct.Struct('=Q')
KVM_GET_STATS_FD = (0xAE << 8) | 0xce         # _IO(KVMIO, 0xce)
# readlink of a vCPU descriptor in /proc/<pid>/fd: kvm-vcpu:<vcpu_id>
VCPU_FD_LINK_PREFIX = 'anon_inode:kvm-vcpu:'


class Malformed(OSError):
    """A statistics descriptor whose layout is not the uapi's."""


def parse(read):
    """``{name: (value, ...)}`` of one statistics descriptor, given
    ``read(size, offset) -> bytes`` (os.pread of the descriptor)."""
    head = read(HEADER.size, 0)
    if len(head) != HEADER.size:
        raise Malformed('a short statistics header: %d bytes' % len(head))
    _, name_size, count, _, desc_offset, data_offset = HEADER.unpack(head)
    step = DESC.size + name_size
    table = read(step * count, desc_offset)
    if len(table) != step * count:
        raise Malformed('%d descriptors of %d bytes announced, %d bytes '
                        'read' % (count, step, len(table)))
    descs = []
    for i in range(count):
        _, _, size, offset, _ = DESC.unpack_from(table, i * step)
        name = table[i * step + DESC.size:(i + 1) * step]
        descs.append((name.split(b'\0', 1)[0].decode('ascii', 'replace'),
                      size, offset))
    end = max((offset + size * VALUE.size for _, size, offset in descs),
              default=0)
    data = read(end, data_offset)
    if len(data) != end:
        raise Malformed('%d bytes of values announced, %d read'
                        % (end, len(data)))
    return {name: tuple(VALUE.unpack_from(data, offset + j * VALUE.size)[0]
                        for j in range(size))
            for name, size, offset in descs}


def read_fd(fd):
    """The statistics of a descriptor from ``KVM_GET_STATS_FD``."""
    return parse(lambda size, offset: os.pread(fd, size, offset))
