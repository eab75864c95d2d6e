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

"""A guest's cumulative counts, read once an interval, as the counts of
each interval: what advisory mode and the agent's decision both feed to
:class:`nova_adaptive_paging.dsp.Engine`, by the kernel's rules.

* An interval the PMU did not count (``instructions`` or ``tlb_misses``
  None, as :class:`~nova_adaptive_paging.host.perf.GuestCounters`
  reports it) has no counts, and the last totals stay for the next.
* Faults None (no balloon statistics) or lower than the last (the guest
  restarted its counter, or lies) make the interval's faults missing.
* The first read, and counters that went back, give no interval.
* The guard's clock runs no faster than time nor than the nominal
  interval, as the kernel's does (``elapsed_ns``).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Interval:
    instructions: int               # None: the PMU did not count
    tlb_misses: int
    faults: int                     # None: no fault count
    elapsed_ns: int


class Intervals:
    def __init__(self, clock, nominal_ns):
        self.clock = clock              # () -> monotonic seconds
        self.nominal_ns = nominal_ns
        self.prev = None
        self.read_at = None
        self.first_at = None

    def read(self, instructions, tlb_misses, faults):
        """Feed the cumulative counts read now; the :class:`Interval`
        since the last read, or None (first read, counters restarted)."""
        prev = self.prev
        counted = instructions is not None and tlb_misses is not None
        if not counted and prev is not None:
            # An uncounted event keeps its last total for the next read.
            instructions = prev[0] if instructions is None else instructions
            tlb_misses = prev[1] if tlb_misses is None else tlb_misses
        self.prev = (instructions, tlb_misses, faults)
        at, last = self.clock(), self.read_at
        self.read_at = at
        if self.first_at is None:
            self.first_at = at
        if (prev is None or None in prev[:2] or None in self.prev[:2]
                or self.prev[0] < prev[0] or self.prev[1] < prev[1]):
            return None
        since = at - last
        return Interval(
            instructions - prev[0] if counted else None,
            tlb_misses - prev[1] if counted else None,
            None if faults is None or prev[2] is None or faults < prev[2]
            else faults - prev[2],
            min(max(int(since * 1e9), 0), self.nominal_ns))
