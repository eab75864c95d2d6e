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

"""What a live migration costs a guest (MODELED).

Pre-copy, as QEMU does it under Nova's defaults: the first round sends
the guest's memory, each later round what the guest dirtied during the
one before, until a round is short enough to send with the guest
paused (the downtime); a guest that dirties memory as fast as the link
carries it never gets there.  The guest pays twice: it runs slower
while its memory is tracked and copied (``slowdown``, a fraction of its
throughput), and it stops for the downtime.

Defaults: a 10 GbE migration network (1,100 MiB/s of payload), Nova's
``[libvirt] live_migration_downtime`` of 500 ms, at most 30 rounds, and
a 10 % slowdown while copying (dirty logging and the copy's memory
bandwidth; the guest's own figure varies with its write rate).
"""

import dataclasses
import math

from nova_adaptive_paging import exception


class MigrationError(exception.Error, ValueError):
    pass


# The link's parameters: (default, lowest, highest), the one table (the
# fleet strategy's audit schema publishes it).
BOUNDS = {
    'bandwidth_mib_s': (1100.0, 1e-3, 1e7),
    'max_downtime_s': (0.5, 1e-3, 60.0),
    'max_rounds': (30, 1, 1000),
    'slowdown': (0.1, 0.0, 1.0),
}


@dataclasses.dataclass(frozen=True)
class Link:
    bandwidth_mib_s: float = BOUNDS['bandwidth_mib_s'][0]
    max_downtime_s: float = BOUNDS['max_downtime_s'][0]
    max_rounds: int = BOUNDS['max_rounds'][0]
    slowdown: float = BOUNDS['slowdown'][0]

    def __post_init__(self):
        for name, (_, low, high) in BOUNDS.items():
            value = getattr(self, name)
            if (isinstance(value, bool)
                    or not isinstance(value, (int, float))
                    or not low <= value <= high):
                raise MigrationError('%s: %r: expected a number from %g '
                                     'to %g' % (name, value, low, high))


@dataclasses.dataclass(frozen=True)
class Estimate:
    copy_s: float        # the copy, while the guest runs
    downtime_s: float    # the last round, with the guest paused
    rounds: int
    guest_s: float       # the guest's work it costs (infinite: no end)

    @property
    def converges(self):
        return math.isfinite(self.guest_s)


def estimate(memory_mib, dirty_mib_s, link=Link()):
    """The :class:`Estimate` of one live migration of a guest with
    ``memory_mib`` of memory that dirties ``dirty_mib_s``."""
    if memory_mib <= 0:
        raise MigrationError('memory_mib: %r: expected a positive number'
                             % (memory_mib,))
    if dirty_mib_s < 0:
        raise MigrationError('dirty_mib_s: %r: expected a number >= 0'
                             % (dirty_mib_s,))
    bw = link.bandwidth_mib_s
    left, copy_s = float(memory_mib), 0.0
    for rounds in range(1, link.max_rounds + 1):
        if left / bw <= link.max_downtime_s:
            downtime = left / bw
            return Estimate(copy_s, downtime, rounds,
                            copy_s * link.slowdown + downtime)
        t = left / bw
        copy_s += t
        left = min(float(memory_mib), dirty_mib_s * t)
    return Estimate(math.inf, math.inf, link.max_rounds, math.inf)
