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

"""A guest's own page-fault count, made safe to feed the kernel.

In hap mode the engine's fault rate comes from the guest's virtio-balloon
statistics (``minor_fault``), which the guest itself reports: an attacker
in the guest can report any number.  The agent therefore never passes
the guest's number through.  It keeps its own cumulative count, which it
writes to ``paging_guest_faults``, and adds to it each interval the
guest's increase, bounded by physics:

* an increase larger than the guest's vCPUs could fault in the time
  since the last report (one fault every ``MIN_FAULT_NS`` per vCPU) is
  clamped to that bound;
* a count that went backwards (a reboot, or a lie) adds nothing.

Either is counted (``nova_paging_guest_fault_reports_clamped_total``).
So a lying guest can move only its own mode, with fault rates a real
guest could have, and the count the kernel sums can never wrap.
"""

# No x86 CPU takes a page fault in less: the exception's entry and its
# IRET alone cost more than 100 ns (Linux's minor fault, handler
# included, is 0.5-2 us on the cost model's generations).
MIN_FAULT_NS = 100


class FaultFeed:
    """The count the agent writes for one guest."""

    def __init__(self, vcpus):
        self.vcpus = max(int(vcpus), 1)
        self.fed = 0              # what the kernel was last given
        self.clamped = 0          # reports bounded or ignored
        self._last = None         # (the guest's count, monotonic time)

    def update(self, reported, now):
        """The cumulative count to write after the guest reported
        ``reported`` at monotonic time ``now`` (seconds)."""
        if self._last is None:
            self._last = (reported, now)
            return self.fed       # the first report is the baseline
        last, at = self._last
        self._last = (reported, now)
        increase = reported - last
        bound = int(self.vcpus * max(now - at, 0.0) * 1e9 / MIN_FAULT_NS)
        if increase < 0 or increase > bound:
            self.clamped += 1
            increase = 0 if increase < 0 else bound
        self.fed += increase
        return self.fed
