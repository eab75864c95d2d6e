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

"""Advisory mode: on a host without the switching patch, what adaptive
paging would do for each guest, and what the guest would gain (MODELED).

The guest runs in the host's mode, as stock KVM runs every guest: hap
with EPT/NPT on, shadow with ``kvm_intel ept=0`` or ``kvm_amd npt=0``
(the host's pool, for the fleet strategy of :mod:`nova_adaptive_paging.
watcher`).  Every ``[agent] interval`` the agent reads its guest-only
instructions and dTLB misses (:mod:`.perf`) and its own page-fault count
(balloon statistics), all of which count the same in either mode, and
charges the interval two modeled figures from the host generation's
cost model:

* ``gain_s``: what adaptive paging would have saved.  The counts feed
  the same :class:`nova_adaptive_paging.dsp.Engine` the kernel runs, with
  the host generation's thresholds and switch guard (its clock: the
  agent's, between two reads); an interval the engine spends in the
  other mode saves the cost model's difference for its TLB misses and
  guest page faults, and each switch costs its price.
* ``other_s``: what running in the other mode all along would have
  saved (negative when the host's mode is the better one): the figure
  the fleet strategy weighs against a live migration to the other pool.

Both need the guest's page-fault count; an interval without it adds
nothing.  CR3 writes are not counted (no counter gives them to user
space), so shadow mode is modeled somewhat cheaper than it is for
guests that switch contexts often.
"""

from nova_adaptive_paging.agent import intervals
from nova_adaptive_paging import dsp
from nova_adaptive_paging import vocabulary

HAP, SHADOW = vocabulary.HAP, vocabulary.SHADOW
EVENTS = (vocabulary.EVENT_TLB_MISS, vocabulary.EVENT_PAGE_FAULT)


class Advisor:
    def __init__(self, profile, hw, clock, host_mode=HAP):
        self.host_mode = host_mode
        # It measures no event's price (the model's are the profile's), so
        # its engine does not go to the other mode to measure one.
        self.engine = dsp.Engine(profile.thresholds,
                                 profile.history_samples,
                                 dsp.Mode[host_mode.upper()],
                                 profile.guard, measured=False)
        self.intervals = intervals.Intervals(clock,
                                             profile.interval_s * 10 ** 9)
        self.hw = hw
        self.gain_s = 0.0
        self.other_s = 0.0
        self.samples = 0

    @property
    def mode(self):
        return str(self.engine.mode)

    @property
    def observed_s(self):
        """How long this agent has watched the guest in this pool."""
        first = self.intervals.first_at
        return 0.0 if first is None else self.intervals.read_at - first

    def _saved_s(self, d_tlb, d_faults):
        """Seconds the other mode would have saved on these counts."""
        return sum(count * self.hw.extra_cost_s(self.host_mode, event)
                   for event, count in zip(EVENTS, (d_tlb, d_faults)))

    def step(self, instructions, tlb_misses, faults):
        """Feed cumulative counts (``faults`` None when the guest reports
        none; ``instructions`` or ``tlb_misses`` None for an interval the
        PMU did not count, :mod:`.intervals`); return the mode adaptive
        paging would run next."""
        got = self.intervals.read(instructions, tlb_misses, faults)
        if got is None:
            return self.mode            # first read, or counters restarted
        ran_in = self.mode
        target = str(self.engine.step(dsp.Sample.from_counts(
            got.instructions, got.tlb_misses, got.faults), got.elapsed_ns))
        self.samples += 1
        if got.faults is not None and got.tlb_misses is not None:
            saved = self._saved_s(got.tlb_misses, got.faults)
            self.other_s += saved
            if ran_in != self.host_mode:
                self.gain_s += saved
        if target != ran_in:
            self.gain_s -= self.hw.switch_s(
                target, self.hw.reference_working_set_mib)
        return target
