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
says switch, the agent sets the VM's mode through the mechanism's own
control, ``KVM_SET_PAGING_MODE`` on the VM's descriptor (which a kernel
without the text interface has too; with it, the ioctl is a write of the
mode to ``paging_policy``); the kernel switches the VM and counts the
switch in its statistics (each vCPU's ``paging_shadow`` and
``paging_switches``, and ``paging_stats``).  The
kernel's own engine never runs for such a guest: its policy is fixed.

What differs from the kernel's engine, and what an operator should know:

* The agent's samples are its own: counted on the vCPU threads by perf
  (dTLB load misses only, where the kernel adds the store misses a CPU
  counts apart, so FTLB reads somewhat low on such CPUs), with the
  balloon's fault count bounded as the kernel's feed is
  (:mod:`.faults`).  A guest the agent cannot count (no PMU, no balloon
  statistics) runs at hap, said once, until its counts come back: the
  kernel could not count it either.
* The ledger lives in the agent's memory: an agent restart, or a flip
  from ``decision = kernel`` and back, starts it afresh, with the credit
  of two switches.  Switches made through a fixed policy are not charged
  by the kernel's guard.
* The agent does not measure what the guest's switches take (the
  kernel's ``time_switching_ns`` is the text interface's): a switch is
  priced at the guard's ``switch_cost_ns`` and, into shadow mode, at
  ``switch_ns_per_gib`` times the domain's memory, and charged that.
* While the agent is stopped nobody decides: the guests keep the fixed
  policy it last wrote (under ``decision = kernel`` the kernel carries
  on by itself).
* A VM refused shadow paging (ruled out for its life: it may run nested
  guests, say) runs at hap, said once; its engine asks no more.
* The kernel samples a guest under a fixed policy only for its
  statistics, so the FTLB/FPF histograms and ``guest_last_rule`` of such
  a guest say little; the kernel's switch counts and times per mode stay
  exact.
"""

import os

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import intervals
from nova_adaptive_paging import dsp
from nova_adaptive_paging import vocabulary


def settings(target, host_profile):
    """The set the guest's decision runs on: its flavor's override
    (``hw:paging_profile``, ``hw:paging_interval``), else the host's
    profile, as the kernel's engine would take it."""
    if target.override is not None:
        return target.override
    return spec.ThresholdSet.from_profile(host_profile)


class Decider:
    """One adaptive guest's decision.  It steps at most once a nominal
    interval of its set, however often the agent reads (``[agent]
    interval`` is telemetry's cadence): the counts between two steps are
    one interval's, as the kernel's sampler takes them."""

    def __init__(self, ruleset, clock, mode):
        self.clock = clock
        self.ruleset = None
        self.engine = None
        self.intervals = None
        self.retune(ruleset, mode)
        self.switches = 0
        self.ruled_out = None           # why shadow is refused for good
        self.blind = None               # why it cannot count now

    def retune(self, ruleset, mode=None):
        """Run on ``ruleset`` (a spec.ThresholdSet) from now on: a new
        engine, in the guest's mode, with no more switch credit than the
        last one had left (the kernel's rule for a changed set)."""
        if ruleset == self.ruleset:
            return
        old = self.engine
        mode = mode if old is None else str(old.mode)
        self.engine = dsp.Engine(ruleset.thresholds, ruleset.history,
                                 dsp.Mode.parse(mode), ruleset.guard,
                                 measured=False)
        if old is not None:
            self.engine.keep_credit(old.credit)
        self.ruleset = ruleset
        self.intervals = intervals.Intervals(self.clock,
                                             ruleset.interval_ms * 10 ** 6)

    @property
    def policy(self):
        """The mode the guest's VM is set to: the engine's mode,
        or hap while the agent cannot decide (no counts: the kernel
        would have none either) or shadow paging is refused."""
        if self.ruled_out or self.blind:
            return vocabulary.HAP
        return str(self.engine.mode)

    def due(self):
        """Whether a nominal interval has passed since the last step."""
        last = self.intervals.read_at
        return last is None or (
            self.clock() - last) * 1e9 >= self.intervals.nominal_ns

    def step(self, instructions, tlb_misses, faults, memory_mib=0):
        """Feed cumulative counts (None where there are none) and the
        guest's memory; return the policy the guest is to have from now
        on.  What the guest's switches and events take is not measured
        here (a kernel without the text interface does not say): a switch
        is priced by the guard's prices and the guest's memory alone, an
        event at the guard's price, and the engine does not go to the
        other mode to measure it."""
        got = self.intervals.read(instructions, tlb_misses, faults)
        if got is None:
            return self.policy
        before = self.policy
        self.engine.step(dsp.Sample.from_counts(
            got.instructions, got.tlb_misses, got.faults), got.elapsed_ns,
            0, memory_mib)
        self.switches += self.policy != before
        return self.policy

    def refused(self, exc, vm_mode):
        """The kernel refused the mode the engine chose (``exc``, a
        host.vm.Refused).  EOPNOTSUPP is for the VM's life (it cannot run
        with shadow paging: the interface's rule), and the guest stays at
        hap; anything else (no memory for the rmaps, a daemon that did
        not answer in time) is for now: the engine follows the mode the
        VM runs in (``vm_mode``, None if unknown) and may ask again once
        its window is full.  Returns whether it was for good."""
        if exc.errno == spec.EOPNOTSUPP:
            self.ruled_out = str(exc)
            self.runs_in(vocabulary.HAP)
            return True
        if vm_mode in vocabulary.MODES:
            self.runs_in(vm_mode)
        return False

    def runs_in(self, mode):
        """The VM runs in ``mode`` whatever the engine said: the engine
        follows, its window empty, its ledger kept."""
        if mode != str(self.engine.mode):
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
