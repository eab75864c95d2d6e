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

"""The agent's own decision for an adaptive guest (``[adaptive_paging]
decision = agent``): for a kernel that has the switching mechanism and
not the in-kernel engine, or an operator who wants the decision in user
space.

Every ``[agent] interval`` the agent reads the guest's guest-only
instructions and TLB misses (:mod:`nova_adaptive_paging.host.perf`, as
advisory mode does) and its balloon page-fault count, turns them into
one interval's counts by the kernel's rules (:mod:`.intervals`) and
feeds them to the same :class:`nova_adaptive_paging.dsp.Engine`, switch
guard included, with the host generation's profile.  When the engine
says switch, the agent writes ``hap`` or ``shadow`` to the VM's
``paging_policy``; the kernel switches the VM and counts the switch in
its statistics (``paging_stats``, each vCPU's ``paging_shadow``).  The
kernel's own engine never runs for such a guest: its policy is fixed.

What differs from the kernel's engine: the samples are the agent's, taken
at its interval on its clock; its counters see the vCPU threads as perf
does for any process (the kernel's are per vCPU thread too).  A write the
kernel refuses (the VM was ruled out of shadow paging meanwhile) leaves
the engine in the VM's real mode, which the next reconcile reads.
"""

import os

from nova_adaptive_paging.agent import intervals
from nova_adaptive_paging import dsp


class Decider:
    def __init__(self, profile, clock, mode):
        self.engine = dsp.Engine(profile.thresholds,
                                 profile.history_samples,
                                 dsp.Mode.parse(mode), profile.guard)
        self.intervals = intervals.Intervals(clock,
                                             profile.interval_s * 10 ** 9)
        self.switches = 0

    @property
    def mode(self):
        """The mode the guest is to run in, as the engine last decided."""
        return str(self.engine.mode)

    def step(self, instructions, tlb_misses, faults):
        """Feed cumulative counts (None where there are none); return the
        mode the guest is to run in from now on."""
        got = self.intervals.read(instructions, tlb_misses, faults)
        if got is None:
            return self.mode
        before = self.mode
        target = str(self.engine.step(dsp.Sample.from_counts(
            got.instructions, got.tlb_misses, got.faults), got.elapsed_ns))
        self.switches += target != before
        return target

    def runs_in(self, mode):
        """The VM runs in ``mode`` whatever the engine said (a refused
        write, a VM ruled out of shadow paging): the engine follows, its
        window empty, its ledger kept."""
        if mode != self.mode:
            self.engine.reset(dsp.Mode.parse(mode))


class SampleFiles:
    """``[adaptive_paging] decision_samples_dir``: each guest's cumulative
    counts from ``<dir>/<domain>``, "instructions tlb_misses faults", for
    hosts without a PMU (emulators), as the kernel's ``dsp_inject`` feeds
    its engine.  A test hook: a production host reads the PMU."""

    def __init__(self, directory):
        self.directory = directory

    def read(self, domain):
        """(instructions, tlb_misses, faults); OSError if the file is
        missing, ValueError if it does not hold three counts."""
        with open(os.path.join(self.directory, domain)) as f:
            words = f.read().split()
        if len(words) != 3 or not all(w.isdigit() for w in words):
            raise ValueError('%s/%s: expected three decimal counts '
                             '(instructions, TLB misses, faults), got %r'
                             % (self.directory, domain, ' '.join(words)))
        return tuple(int(w) for w in words)
