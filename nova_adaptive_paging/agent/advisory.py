"""Advisory mode: on a host without the switching patch, what adaptive
paging would do for each guest, and what it would gain (MODELED).

The guest runs in hap, as stock KVM with EPT/NPT runs it.  Every
``[agent] interval`` the agent reads its guest-only instructions and
dTLB misses (:mod:`.perf`) and its own page-fault count (balloon
statistics), feeds the same :class:`nova_adaptive_paging.dsp.Engine` the
kernel runs, with the host generation's thresholds and switch guard (its
clock: the agent's, between two reads), and charges each
interval the cost model's difference between hap and the mode the engine
was in: TLB misses at the hap cost saved, guest page faults at the shadow
cost paid, and each switch at its cost.  CR3 writes are not counted (no
counter gives them to user space), so shadow mode is modeled somewhat
cheaper than it is for guests that switch contexts often.
"""

from nova_adaptive_paging import dsp
from nova_adaptive_paging import vocabulary

HAP, SHADOW = vocabulary.HAP, vocabulary.SHADOW


class Advisor:
    def __init__(self, profile, hw, clock):
        self.engine = dsp.Engine(profile.thresholds,
                                 profile.history_samples, dsp.Mode.HAP,
                                 profile.guard)
        self.nominal_ns = profile.interval_s * 10 ** 9
        self.hw = hw
        self.clock = clock              # () -> monotonic seconds
        self.read_at = None
        self.prev = None
        self.gain_s = 0.0
        self.samples = 0

    @property
    def mode(self):
        return str(self.engine.mode)

    def step(self, instructions, tlb_misses, faults):
        """Feed cumulative counts (``faults`` None when the guest reports
        none); return the mode adaptive paging would run next."""
        now = (instructions, tlb_misses, faults)
        prev, self.prev = self.prev, now
        at, last = self.clock(), self.read_at
        self.read_at = at
        since = at - last if last is not None else 0
        if prev is None or instructions < prev[0] or tlb_misses < prev[1]:
            return self.mode            # first read, or counters restarted
        d_insns, d_tlb = instructions - prev[0], tlb_misses - prev[1]
        d_faults = (None if faults is None or prev[2] is None
                    or faults < prev[2] else faults - prev[2])
        ran_in = self.mode
        # As the kernel: the guard's clock never runs faster than time nor
        # than the nominal interval.
        elapsed = min(max(int(since * 1e9), 0), self.nominal_ns)
        target = str(self.engine.step(dsp.Sample.from_counts(
            d_insns, d_tlb, d_faults), elapsed))
        self.samples += 1
        if ran_in == SHADOW and d_faults is not None:
            for event, count in ((vocabulary.EVENT_TLB_MISS, d_tlb),
                                 (vocabulary.EVENT_PAGE_FAULT, d_faults)):
                self.gain_s += count * self.hw.extra_cost_s(HAP, event)
        if target != ran_in:
            self.gain_s -= self.hw.switch_s(
                target, self.hw.reference_working_set_mib)
        return target
