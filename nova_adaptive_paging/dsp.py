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

"""The DSP decision algorithm: the one canonical definition of its semantics.

Dynamic Switching Paging (Wang et al., VEE 2011, Section 2.3 and Figure 5)
decides, once per sampling interval, whether a VM should run with hardware
assisted paging (HAP: EPT/NPT) or shadow paging, from three frequencies:

* FTLB: TLB misses per 1000 retired instructions,
* FPF: guest page faults per 1000 retired instructions (the paper scales it
  by 10^7),
* P-to-T: FPF / FTLB, current (CPT) and averaged over the recent history
  (HPT).

Everything here is integer arithmetic in the fixed-point units below, so the
kernel patch (which cannot use floating point) computes bit-identical
results; ``kvm-patch/`` carries the C twin of this module and a test runs
both on random inputs.  Any change of semantics must change both, and the
ABI version in :mod:`nova_adaptive_paging.abi.spec`.

Fixed-point units (each is the paper's unit times 1000, "milli"):

==========  ===================================  ===========================
metric      definition                           from raw counts
==========  ===================================  ===========================
ftlb        TLB misses per 10^6 instructions     tlb * 10^6 // insns
fpf         page faults per 10^13 instructions   pf * 10^13 // insns
pt          fpf / ftlb * 1000                    pf * 10^10 // tlb
==========  ===================================  ===========================

Every metric saturates at :data:`METRIC_MAX` (2^48 - 1) so that the sum of a
full history window (at most :data:`HISTORY_MAX` samples) fits in 64 bits.

Around Figure 5 sits the switch guard (:class:`Guard`, ABI version 6): a
ledger, in nanoseconds, of what the VM's run has cost against what each
static mode would have cost on the same counts, which vetoes switches that
have not been paid for, keeps the run's regret within a budget and caps
the share of time spent switching.  A switch is priced at what the VM's
last switch the same way took, as the kernel measured it, and charged
what it takes; a guest page fault and a TLB miss at the profile's
prices weighed against what the VM's own took; a load of CR3 in shadow
mode at the profile's price.  doc/source/simulation.rst
argues its bound.
"""

import collections
import dataclasses
import enum

METRIC_MAX = (1 << 48) - 1
HISTORY_MAX = 64
U64_MAX = (1 << 64) - 1
# The guard's ledger saturates here (146 years in ns): sums of per-interval
# costs (each at most METRIC_MAX) and their differences fit in an s64.
LEDGER_MAX = 1 << 62
# No switch is modeled cheaper than this (a flush and a root rebuild), so
# the rate cap holds whatever switch cost a threshold set names.
SWITCH_COST_MIN_NS = 1000000
# A switch that did not pay for itself doubles the benefit the next one
# must have accumulated, up to this factor; one that paid halves it.
BACKOFF_MAX = 64
# The regret budget is a share of the run time, and never less than that
# share of this much: the first decisions of a VM's life, each of which
# may be an interval late, fit in it.
BUDGET_FLOOR_NS = 100 * 10 ** 9
PPM = 10 ** 6
# Over budget, the VM goes to the cheaper static mode once that mode leads
# by ``margin`` of its switches; each such move doubles ``margin``, up to
# this (one that ends a visit to measure does not), so a leader that flips
# back and forth is followed fewer and fewer times
# (doc/source/simulation.rst).  A measured switch counts at most
# METRIC_MAX ns, so that MARGIN_MAX switches fit in the ledger.
MARGIN_MAX = 1 << 13
# A price the VM measures weighs as much as the profile's (the prior) once
# the VM has shown this many of the events it prices: guest page faults
# handled in shadow mode, TLB misses walked in each mode.
PRIOR_FAULTS = 10000
PRIOR_MISSES = 1000000
# A measure holds at most this many priors' worth of events: past it, its
# time and count halve, so that it follows what the VM's events take now
# (a boot's first-touch faults do not weigh for the VM's life).
MEASURE_SPAN = 64
# After a change of mode, this many intervals with data measure no event:
# the switch's own, and one in which the vCPUs rebuild what the mode
# needs (shadow pages), which is the switch's cost, not a fault's.  A
# visit to measure the other mode lasts the window and these.
SETTLE_INTERVALS = 2
# The VM's rate of CR3 loads (per instruction) is measured in intervals it
# ran wholly in shadow mode, where each load exits, over at most this many
# instructions (its count and instructions halve past it): minutes of a
# busy vCPU, so that the rate follows what the guest does now.
CR3_SPAN_INSNS = 1 << 40
# In hap mode the guest's loads of CR3 do not exit, so the rate measured
# in shadow mode may go stale: the VM goes to measure it again this long
# (of run time with data) after its last measure, then each time twice
# as long after the visit before, up to CR3_REVISIT_MAX_NS.
CR3_REVISIT_NS = 120 * 10 ** 9
CR3_REVISIT_MAX_NS = 1 << 46

FTLB_SCALE = 10 ** 6
FPF_SCALE = 10 ** 13
PT_SCALE = 10 ** 10


class Mode(enum.IntEnum):
    """A paging mode; the integer values are the kernel ABI's."""

    HAP = 0
    SHADOW = 1

    def __str__(self):
        return self.name.lower()

    @classmethod
    def parse(cls, text):
        """The mode of a word of the vocabulary (kernel text: surrounding
        whitespace aside, exactly ``hap`` or ``shadow``)."""
        word = text.strip()
        try:
            if word != word.lower():
                raise KeyError(word)
            return cls[word.upper()]
        except KeyError:
            raise ValueError('unknown paging mode %r; expected one of: %s'
                             % (text, ', '.join(str(m) for m in cls)))


class Rule(enum.IntEnum):
    """Which step of Figure 5 made the decision; the values are the ABI's."""

    WARMUP = 0            # history window not full yet: stay
    TLB_HIGH = 1          # FTLB > TLBU and FPF < 0.8 PFU: shadow
    PF_HIGH = 2           # FPF > PFU and FTLB < 0.8 TLBU: HAP
    BOTH_LOW = 3          # FTLB < TLBL and FPF < PFL: stay
    TLB_ZERO = 4          # HTLB == 0 or FTLB == 0: HAP
    PT_HIGH = 5           # HPT > PTU and CPT > PTU: HAP
    PT_LOW = 6            # HPT < PTL and CPT < PTL: shadow
    PT_BETWEEN = 7        # both in [PTL, PTU]: stay
    PT_UNDECIDED = 8      # HPT and CPT in different intervals: stay
    NO_DATA = 9           # no instructions retired, or a counter missing: stay
    # The guard's (ABI version 3): Figure 5's switch was vetoed, or made.
    UNPAID = 10           # the other mode has not yet gained a switch's cost
    OVER_BUDGET = 11      # the switch would take the regret over budget
    RATE_LIMIT = 12       # the VM's switch credit is spent
    REGRET_LEADER = 13    # regret over budget: to the cheaper static mode
    # ABI version 5: a visit to the mode whose prices the VM has not
    # measured (there, held there, and back); version 6 also to shadow
    # mode to count the guest's loads of CR3 again.
    EXPLORE = 14


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """The six DSP thresholds, in the fixed-point units of this module."""

    tlb_upper: int
    tlb_lower: int
    pf_upper: int
    pf_lower: int
    pt_upper: int
    pt_lower: int

    FIELDS = ('tlb_upper', 'tlb_lower', 'pf_upper', 'pf_lower',
              'pt_upper', 'pt_lower')

    def __post_init__(self):
        for name in self.FIELDS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError('%s must be an integer, got %r'
                                 % (name, value))
            if not 0 <= value <= METRIC_MAX:
                raise ValueError('%s must be in [0, %d], got %d'
                                 % (name, METRIC_MAX, value))
        for kind in ('tlb', 'pf', 'pt'):
            lower = getattr(self, kind + '_lower')
            upper = getattr(self, kind + '_upper')
            if lower > upper:
                raise ValueError('%s_lower (%d) must not exceed %s_upper (%d)'
                                 % (kind, lower, kind, upper))

    def as_tuple(self):
        return tuple(getattr(self, name) for name in self.FIELDS)


def _scaled_ratio(numerator, scale, denominator):
    """floor(numerator * scale / denominator), saturated at METRIC_MAX."""
    if denominator == 0:
        return METRIC_MAX if numerator else 0
    return min(numerator * scale // denominator, METRIC_MAX)


def counter_delta(prev, now):
    """One interval's count of a perf counter, or None for no count.

    ``prev`` and ``now`` are its readings at the start and the end of the
    interval, each ``(count, time_enabled, time_running)`` as perf reads
    an event with ``PERF_FORMAT_TOTAL_TIME_ENABLED | _RUNNING``, all
    cumulative.  No count when the counter went back (it was reopened),
    or when the event was enabled but never on the PMU: starved by pinned
    events (a vPMU's, say), it read nothing, and nothing is not a count of
    zero.  An event that ran for part of the time it was enabled
    (multiplexed) counts what it saw scaled by this interval's enabled
    over running time, saturating at 2^64 - 1.  A counter without times
    (both 0) gives its increase.
    """
    count, enabled, running = (n - p for n, p in zip(now, prev))
    if count < 0 or enabled < 0 or running < 0:
        return None
    if not running:
        return None if enabled else count
    if running >= enabled:
        return count
    return min(count * enabled // running, U64_MAX)


@dataclasses.dataclass(frozen=True)
class Sample:
    """One interval's metrics, computed from the raw counter deltas."""

    instructions: int
    ftlb: int
    fpf: int
    pt: int
    # The raw counts, which the guard prices (0 in an invalid sample).
    tlb_misses: int = 0
    page_faults: int = 0

    @property
    def valid(self):
        return self.instructions > 0

    @classmethod
    def from_counts(cls, instructions, tlb_misses, page_faults):
        """Build a sample from u64 counter deltas of one interval.

        A counter that could not be read is None (no PMU, no guest page
        fault source in this mode).  Such a sample, or one with no retired
        instructions, has no meaningful frequencies: it is invalid and the
        engine stays on it.  P-to-T with no TLB miss is METRIC_MAX when
        there were page faults (faults dominate) and 0 otherwise.
        """
        for name, value in (('instructions', instructions),
                            ('tlb_misses', tlb_misses),
                            ('page_faults', page_faults)):
            if value is None:
                continue
            if (not isinstance(value, int) or isinstance(value, bool)
                    or not 0 <= value <= U64_MAX):
                raise ValueError('%s must be an integer in [0, 2^64), got %r'
                                 % (name, value))
        if not instructions or tlb_misses is None or page_faults is None:
            return cls(0, 0, 0, 0)
        return cls(instructions,
                   _scaled_ratio(tlb_misses, FTLB_SCALE, instructions),
                   _scaled_ratio(page_faults, FPF_SCALE, instructions),
                   _scaled_ratio(page_faults, PT_SCALE, tlb_misses),
                   tlb_misses, page_faults)


def decide(mode, ftlb, fpf, cpt, htlb, hpt, thresholds):
    """Figure 5: return ``(mode to run next, Rule that decided)``.

    ``mode`` is the current Mode; ``ftlb``, ``fpf`` and ``cpt`` describe the
    current sample, ``htlb`` and ``hpt`` the averages over the history
    window (current sample included).  All are non-negative integers at
    most METRIC_MAX.  Comparisons are strict, as the paper words them
    ("higher than", "lower than"); 80 % is evaluated exactly as
    ``5 * x < 4 * bound``.  Every undecided case returns ``mode``.
    """
    t = thresholds
    if ftlb > t.tlb_upper and 5 * fpf < 4 * t.pf_upper:
        return Mode.SHADOW, Rule.TLB_HIGH
    if fpf > t.pf_upper and 5 * ftlb < 4 * t.tlb_upper:
        return Mode.HAP, Rule.PF_HIGH
    if ftlb < t.tlb_lower and fpf < t.pf_lower:
        return mode, Rule.BOTH_LOW
    if htlb == 0 or ftlb == 0:
        return Mode.HAP, Rule.TLB_ZERO
    if hpt > t.pt_upper and cpt > t.pt_upper:
        return Mode.HAP, Rule.PT_HIGH
    if hpt < t.pt_lower and cpt < t.pt_lower:
        return Mode.SHADOW, Rule.PT_LOW
    if t.pt_lower <= hpt <= t.pt_upper and t.pt_lower <= cpt <= t.pt_upper:
        return mode, Rule.PT_BETWEEN
    return mode, Rule.PT_UNDECIDED


def _halve_past(pair, ns_max, count_max):
    """Halve a pair ``[ns, count]`` while either is past its bound: the
    ratio stays."""
    while pair[0] > ns_max or pair[1] > count_max:
        pair[0] >>= 1
        pair[1] >>= 1


def _add_measure(pair, ns, count, prior):
    """Add ``ns`` over ``count`` events to a measure ``[ns, count]``
    whose prior counts as ``prior`` events: an interval's pair is scaled
    down together to METRIC_MAX, and the measure halves while its count
    is past MEASURE_SPAN priors or its time past METRIC_MAX."""
    one = [ns, count]
    _halve_past(one, METRIC_MAX, METRIC_MAX)
    pair[0] += one[0]
    pair[1] += one[1]
    _halve_past(pair, METRIC_MAX, MEASURE_SPAN * prior)


def _weighted_price(prior, weight, measured, count):
    """``prior`` as if seen ``weight`` times, with ``measured`` (the
    mean of ``count`` events): floor of each part, saturated."""
    return min(_scaled_ratio(prior, weight, weight + count)
               + _scaled_ratio(measured, count, weight + count), METRIC_MAX)


def _clamp(value):
    """Saturate a ledger quantity to [-LEDGER_MAX, LEDGER_MAX]."""
    return max(-LEDGER_MAX, min(value, LEDGER_MAX))


@dataclasses.dataclass(frozen=True)
class Guard:
    """What a switch costs against what it gains (ABI versions 3 to 6).

    ``tlb_cost_ps``: what one TLB miss costs in hap over shadow (the second
    dimension of the walk), in picoseconds; ``pf_cost_ps``: what one guest
    page fault costs in shadow over hap (the exit and the shadow fix-up);
    both the prior that the VM's own measures weigh against (version 5);
    ``switch_cost_ns``: the least a switch is priced at, in either
    direction, before (and whatever) the VM's own switches measure;
    ``budget_ppm``: the regret the guard allows against the cheaper static
    mode, in parts per million of the VM's run time.  The same share of
    wall time is the VM's switch credit: the time switches may take,
    whatever the counts say.  ``switch_ns_per_gib`` (ABI version 4): what
    a switch into shadow mode takes per GiB of the VM's memory (rmaps and
    write tracking for every memslot), so that a big VM's first switch is
    priced near what it will take, before any has been measured.
    ``cr3_cost_ps`` (ABI version 6): what one guest load of CR3 costs in
    shadow over hap (shadow paging intercepts every one; TDP none), in
    picoseconds.

    Without per-event costs (both 0: a threshold set written before version
    3) the guard only caps the switch rate.
    """

    tlb_cost_ps: int = 0
    pf_cost_ps: int = 0
    switch_cost_ns: int = 0
    budget_ppm: int = 5000
    switch_ns_per_gib: int = 0
    cr3_cost_ps: int = 0

    FIELDS = ('tlb_cost_ps', 'pf_cost_ps', 'switch_cost_ns', 'budget_ppm',
              'switch_ns_per_gib', 'cr3_cost_ps')
    LIMITS = {'budget_ppm': PPM}

    def __post_init__(self):
        for name in self.FIELDS:
            value = getattr(self, name)
            high = self.LIMITS.get(name, METRIC_MAX)
            if (not isinstance(value, int) or isinstance(value, bool)
                    or not 0 <= value <= high):
                raise ValueError('%s must be an integer in [0, %d], got %r'
                                 % (name, high, value))

    @property
    def priced(self):
        return bool(self.tlb_cost_ps or self.pf_cost_ps)

    @property
    def switch_ns(self):
        """The least price of a switch (the engine's measured costs may
        raise it, never lower it)."""
        return max(self.switch_cost_ns, SWITCH_COST_MIN_NS)

    def as_tuple(self):
        return tuple(getattr(self, name) for name in self.FIELDS)


class Engine:
    """The per-VM sampling loop around :func:`decide`.

    Keeps the last ``history`` samples.  It decides only on a full window
    (the paper's "most recent three samples"), so a VM stays put for at
    least ``history`` intervals after it starts and after every switch:
    the window restarts on a switch because the samples taken before it
    describe the other mode's transient, and a burst shorter than the
    window cannot make the VM switch back (Section 4.5).  The averages are
    floor(sum / n), the sum of at most HISTORY_MAX saturated metrics.

    With a :class:`Guard` (the kernel always has one) each valid interval
    also updates a ledger, in ns, from its raw counts: ``lead``, what static
    hap would have cost minus what static shadow would have; ``regret``,
    what this run cost (switches included) minus the cheaper of the two;
    ``gain``, how much the other mode would have saved since the last
    switch (never below 0); ``paid``, how much the current mode has saved
    over the one it left.

    A switch into a mode is priced at what the VM's last switch into that
    mode took (``seen``), never below ``switch_ns``: the time the kernel
    measured its vCPUs switching (``switching_ns`` of :meth:`step`) in the
    first interval after the switch in which any switching time was
    measured (``measuring``; what later intervals measure is the guest's
    own paging going off and on, not a switch); into shadow mode, never
    below ``switch_ns_per_gib`` times the VM's memory either (``sized``,
    from ``memory_mib`` of :meth:`step`).  An engine-made switch is
    charged its price when made (``owed``), and what its measured time
    exceeds the price when that comes in: the regret and the credit carry
    what switching took.

    The ledger prices a guest page fault at the guard's ``pf_cost_ps``
    weighed against what the VM's own faults took in shadow mode
    (``maint_ns`` of :meth:`step`, the kernel's shadow_maint_ns), and a
    TLB miss at ``tlb_cost_ps`` weighed against what the VM's own walks
    took in hap mode less in shadow mode (``walk_ns``), once it has
    walked in both: the guard's price counts as PRIOR_FAULTS faults or
    PRIOR_MISSES misses (:meth:`pf_cost_ps`, :meth:`tlb_cost_ps`), and a
    measure spans at most MEASURE_SPAN priors.  Shadow mode also pays
    ``cr3_cost_ps`` for each guest load of CR3 (ABI version 6): in an
    interval the VM ran wholly in shadow mode, each load exits and the
    kernel counts them (``cr3_loads`` of :meth:`step`), which also
    measures the VM's loads per instruction (over at most CR3_SPAN_INSNS
    instructions); in any other interval none exits, and the interval's
    instructions at that rate stand for them (none before the VM has
    run an interval wholly in shadow mode).  Only an interval the VM
    ran wholly and settled in its mode measures: one without switching
    time, after the last switch was measured, and past the first
    SETTLE_INTERVALS intervals with data after a change of mode (what the
    vCPUs rebuild then is the switch's, not a fault's).  Then, in this
    order:

    1. regret over budget (``budget_ppm`` of the run time with data, at
       least of BUDGET_FLOOR_NS) and a static mode cheaper so far by more
       than ``margin`` switches into it (the leader): go there
       (REGRET_LEADER), and double ``margin`` (at most MARGIN_MAX; not
       when the move ends a visit), so that a leader that keeps flipping
       is followed fewer and fewer times;
    2. Figure 5 wants a switch: make it only if ``gain`` has reached
       ``backoff`` round trips (else UNPAID) and the switch keeps the
       regret within budget or goes to the leader (else OVER_BUDGET);
    3. a switch needs its price in credit, and a switch away from the
       *leader* (the static mode cheaper by more than a switch) the way
       back too, so that the way back is always paid for (else
       RATE_LIMIT).  Credit starts at two switches at ``switch_ns``,
       accrues at the budget rate over wall time, up to two of the dearer
       switch, and pays for what the engine's switches took: it goes below
       zero by what a switch took over its price, and a switch needs credit
       of at least its price, so only the last switch's overshoot can be
       unpaid.  So the time the engine's switches take (forced ones are not
       the engine's) is at most ``budget_ppm`` of the wall time, plus two
       switches at ``switch_ns``, plus what the last switch took over its
       price.  A new engine (:meth:`keep_credit`) does not charge the
       overshoot of a switch the old one had not measured yet;
    4. once in the engine's life, when Figure 5 keeps the mode, go to the
       other one to measure a price the VM has not (EXPLORE,
       :meth:`_explores`): a visit of ``history`` + SETTLE_INTERVALS
       intervals with data (the switch's, the settling one, then the
       window's, which measure), which keeps every switch Figure 5 wants
       (EXPLORE) in all but the last; in the last the VM goes back
       (EXPLORE) if the mode it left cost less in it at the prices then
       and the credit holds the way back, else Figure 5 decides as
       usual;
    5. in hap mode, when the guest's rate of CR3 loads was measured
       ``cr3_wait`` of run time ago or more (CR3_REVISIT_NS at first,
       doubling with each such visit up to CR3_REVISIT_MAX_NS), Figure 5
       keeps the mode or the guard keeps it, and only the loads make
       shadow mode the dearer in this interval, go to shadow mode to
       count them again (EXPLORE, :meth:`_revisits`): a visit as in 4,
       of SETTLE_INTERVALS intervals with data (the switch's, then one
       wholly in shadow mode, which counts them), with credit for the
       round trip and within budget for it and the visit at what shadow
       mode cost more in this interval.

    A switch whose stay did not save a round trip doubles ``backoff`` (at
    most BACKOFF_MAX); one that did halves it; a visit to measure, and the
    switch after it, leave it as it was.  Without a guard the engine
    is the paper's rule alone (tests of Figure 5 and the "before" figures).
    """

    def __init__(self, thresholds, history=3, mode=Mode.HAP, guard=None,
                 measured=True):
        if not 1 <= history <= HISTORY_MAX:
            raise ValueError('history must be in [1, %d], got %r'
                             % (HISTORY_MAX, history))
        self.thresholds = thresholds
        self.history = history
        self.guard = guard
        self.mode = Mode(mode)
        self.window = collections.deque(maxlen=history)
        self.last_rule = Rule.WARMUP
        self.last_htlb = self.last_hpt = 0
        self.lead = self.regret = self.gain = self.paid = 0
        self.run_ns = 0
        self.backoff = 1
        self.margin = 1
        self.switched = False
        self.seen = [0, 0]               # per mode: the last switch into it
        self.measuring = False           # the last switch: not yet measured
        self.owed = 0                    # its price, if the engine made it
        self.sized = 0                   # into shadow, by the VM's memory
        self.maint = [0, 0]              # shadow faults: ns handling, count
        # A caller that gives no measures (``measured`` False: the agent's
        # own decision on a kernel that says nothing of what events took)
        # has nothing to explore for.
        self.explored = not measured     # the engine has explored
        self.exploring = 0               # intervals the visit may still hold
        self.had_data = [False, False]   # per mode: a sample with data
        # Intervals with data since the mode changed, up to SETTLE_INTERVALS:
        # the first ones after a change do not measure events.
        self.since_change = SETTLE_INTERVALS
        self.walk = [[0, 0], [0, 0]]     # per mode: ns walking, TLB misses
        self.cr3 = [0, 0]                # in shadow mode: loads, insns
        self.cr3_at = 0                  # run_ns at its last measure
        self.cr3_wait = CR3_REVISIT_NS   # before the next visit for it
        self.credit = 2 * guard.switch_ns if guard else 0

    def keep_credit(self, credit):
        """Replacing an engine (new thresholds or prices) starts a new
        ledger but not new credit: keep at most the ``credit`` the old one
        had left.  Credit is what bounds the VM's switches, and whoever may
        change the set would otherwise buy two switches with each change.
        (What the VM's switches took is measured anew: a switch into shadow
        mode is priced by the VM's memory meanwhile.)"""
        self.credit = min(self.credit, credit)

    def reset(self, mode=None):
        """Forget the window, e.g. after a switch forced from outside.
        A switch from outside starts a new stay (``gain`` and ``paid``
        from 0); what it takes prices the next switch the same way, but
        is not charged: the credit and the regret are the engine's."""
        if mode is not None and Mode(mode) != self.mode:
            self.mode = Mode(mode)
            self.measuring = True
            self.exploring = 0
            self.since_change = 0
            self.owed = 0
            self.gain = self.paid = 0
        self.window.clear()

    def _account(self, sample, elapsed_ns, cr3):
        """The ledger's update for one interval with data and ``cr3``
        loads of CR3; returns what the interval cost in this mode and
        would have in the other."""
        hap = _scaled_ratio(sample.tlb_misses, self.tlb_cost_ps(), 1000)
        shadow = min(_scaled_ratio(sample.page_faults, self.pf_cost_ps(),
                                   1000)
                     + _scaled_ratio(cr3, self.guard.cr3_cost_ps, 1000),
                     METRIC_MAX)
        if self.lead <= 0:
            cheaper = min(hap, shadow - self.lead)
        else:
            cheaper = min(hap + self.lead, shadow)
        here, there = ((hap, shadow) if self.mode == Mode.HAP
                       else (shadow, hap))
        self.regret = _clamp(self.regret + here - cheaper)
        self.lead = _clamp(self.lead + hap - shadow)
        self.gain = min(max(self.gain + here - there, 0), LEDGER_MAX)
        self.paid = _clamp(self.paid + there - here)
        self.run_ns = min(self.run_ns + elapsed_ns, LEDGER_MAX)
        return here, there

    def _measured(self, switching_ns):
        """What switching took since the last step, the first time it took
        any after a switch: what the switch into the current mode costs,
        and, if the engine made it, charged past its price."""
        if not self.measuring:
            return
        took = min(switching_ns, METRIC_MAX)
        self.seen[self.mode] = took
        extra = max(took - self.owed, 0) if self.owed else 0
        self.measuring = False
        self.owed = 0
        self.credit = _clamp(self.credit - extra)
        if self.guard.priced:
            self.regret = _clamp(self.regret + extra)

    def _measure_events(self, sample, maint_ns, walk_ns):
        """What the interval's events took the VM, as measured, in an
        interval it ran wholly and settled in its mode: the time its vCPUs
        spent handling shadow page faults (``maint_ns``) over its guest
        page faults, and the time they spent walking page tables
        (``walk_ns``) over its TLB misses.  0 is no measure (no walk
        counter; a fault takes some time to handle)."""
        if maint_ns and self.mode == Mode.SHADOW and sample.page_faults:
            _add_measure(self.maint, maint_ns, sample.page_faults,
                         PRIOR_FAULTS)
        if walk_ns and sample.tlb_misses:
            _add_measure(self.walk[self.mode], walk_ns, sample.tlb_misses,
                         PRIOR_MISSES)

    def _cr3_count(self, sample, whole, loads):
        """The interval's guest loads of CR3: in an interval the VM ran
        wholly in shadow mode, the ``loads`` the kernel intercepted, which
        add to the VM's rate; in any other, none exits, and the interval's
        instructions at that rate stand for them (0 before any rate)."""
        if whole and self.mode == Mode.SHADOW:
            _add_measure(self.cr3, loads, sample.instructions,
                         CR3_SPAN_INSNS // MEASURE_SPAN)
            self.cr3_at = self.run_ns
            return loads
        n, insns = self.cr3
        return _scaled_ratio(sample.instructions, n, insns) if insns else 0

    def _learns(self, other):
        """Whether an interval in ``other`` would measure a price the VM
        has not: a fault's in shadow mode, a walk's in a mode it has not
        walked in while it has walked in this one.  Into hap mode only if
        a sample there had data before: in shadow mode the kernel counts
        the guest's faults itself, in hap mode only what is fed to it,
        and a visit to a mode without data could measure nothing, nor
        decide to leave."""
        if other == Mode.HAP and not self.had_data[Mode.HAP]:
            return False
        if other == Mode.SHADOW and not self.maint[1]:
            return True
        return bool(self.walk[self.mode][1]) and not self.walk[other][1]

    def _explores(self, here, there):
        """Whether to go to the other mode to measure it, given what this
        interval cost here and would have there at the ledger's prices:
        once in the engine's life; only if there is at most twice here,
        which prices off by a third each way could reverse (and here is
        not nothing); with credit for the round trip; and if the round
        trip and ``history`` + SETTLE_INTERVALS intervals (the visit) at what
        there costs over here keep the regret within budget."""
        other = Mode(1 - self.mode)
        return (not self.explored and 0 < here and there <= 2 * here
                and self._learns(other)
                and self.credit >= self.round_trip()
                and self.regret + self.round_trip()
                + (self.history + SETTLE_INTERVALS) * max(there - here, 0)
                <= self.budget_ns())

    def _revisits(self, sample, here, there):
        """Whether to go from hap mode to shadow mode to measure the
        guest's loads of CR3 again: not on a visit, its rate was
        measured ``cr3_wait`` of run time ago or more, only those loads
        make shadow mode the dearer in this interval, and the credit and
        budget hold the visit as :meth:`_explores` asks."""
        faults = _scaled_ratio(sample.page_faults, self.pf_cost_ps(), 1000)
        return (self.mode == Mode.HAP and self.cr3[0] > 0
                and not self.exploring
                and self.run_ns - self.cr3_at >= self.cr3_wait
                and faults < here < there
                and self.credit >= self.round_trip()
                and self.regret + self.round_trip()
                + SETTLE_INTERVALS * (there - here) <= self.budget_ns())

    def _revisit(self):
        """Go to shadow mode to measure the guest's loads of CR3 again,
        for SETTLE_INTERVALS intervals with data (the switch's, then one
        wholly in shadow mode, which counts them); the next such visit
        waits twice as long."""
        self.cr3_wait = min(2 * self.cr3_wait, CR3_REVISIT_MAX_NS)
        return self._visit(SETTLE_INTERVALS)

    def _visit(self, intervals):
        """Go to the other mode to measure it.  A stay to measure is
        not judged by what it paid: the way back leaves the backoff as it
        was.  It holds for as many intervals with data as its budget
        reserved."""
        self._switch(Mode(1 - self.mode), Rule.EXPLORE)
        self.switched = False
        self.exploring = intervals
        return self.mode

    def pf_cost_ps(self):
        """What a guest page fault costs shadow mode over hap: the
        profile's, weighed against what the VM's own took."""
        ns, faults = self.maint
        return _weighted_price(self.guard.pf_cost_ps, PRIOR_FAULTS,
                               _scaled_ratio(ns, 1000, faults), faults)

    def tlb_cost_ps(self):
        """What a TLB miss costs hap mode over shadow: the profile's,
        weighed against the VM's own walks in hap mode less those in
        shadow mode, once it has walked in both."""
        (hap_ns, hap_n), (shadow_ns, shadow_n) = self.walk
        n = min(hap_n, shadow_n)
        if not n:
            return self.guard.tlb_cost_ps
        extra = max(_scaled_ratio(hap_ns, 1000, hap_n)
                    - _scaled_ratio(shadow_ns, 1000, shadow_n), 0)
        return _weighted_price(self.guard.tlb_cost_ps, PRIOR_MISSES, extra, n)

    def price(self, mode):
        """What a switch into ``mode`` is priced at."""
        price = max(self.guard.switch_ns, self.seen[mode])
        return max(price, self.sized) if mode == Mode.SHADOW else price

    def round_trip(self):
        """A switch each way, at their prices."""
        return self.price(Mode.HAP) + self.price(Mode.SHADOW)

    def _switch(self, target, rule):
        g = self.guard
        if g is not None:
            price = self.price(target)
            self.credit = _clamp(self.credit - price)
            if g.priced:
                self.regret = _clamp(self.regret + price)
                if self.switched and rule != Rule.EXPLORE:
                    if self.paid < self.round_trip():
                        self.backoff = min(2 * self.backoff, BACKOFF_MAX)
                    else:
                        self.backoff = max(self.backoff // 2, 1)
            self.gain = self.paid = 0
            self.switched = True
        self.last_rule = rule
        self.reset(target)
        if g is not None:
            self.owed = price
        return self.mode

    def _vetoed(self, target):
        """Why the guard keeps a switch Figure 5 wants, or None."""
        g = self.guard
        if g.priced:
            if self.gain < self.backoff * self.round_trip():
                return Rule.UNPAID
            # A switch to the leader is what rule 1 makes over budget:
            # keeping the VM from it keeps it where it loses.
            if (self.regret + self.price(target) > self.budget_ns()
                    and target != self.leader()):
                return Rule.OVER_BUDGET
        if self.credit < self._credit_needed(target):
            return Rule.RATE_LIMIT
        return None

    def _credit_needed(self, target):
        """Credit a switch to ``target`` needs: a switch away from the
        cheaper static mode keeps enough for the way back to it."""
        if target == self.leader():
            return self.price(target)
        return self.round_trip()

    def budget_ns(self):
        return _scaled_ratio(max(self.run_ns, BUDGET_FLOOR_NS),
                             self.guard.budget_ppm, PPM)

    def leader(self, margin=1):
        """The static mode cheaper so far by more than ``margin`` switches
        into it, or None."""
        if self.lead > margin * self.price(Mode.SHADOW):
            return Mode.SHADOW
        if -self.lead > margin * self.price(Mode.HAP):
            return Mode.HAP
        return None

    def step(self, sample, elapsed_ns=0, switching_ns=0, memory_mib=0,
             maint_ns=0, walk_ns=0, cr3_loads=0):
        """Feed one interval's Sample, the interval's length in ns (the
        guard's clock), the time the VM's switches took in it, as
        measured (ns), the VM's memory (MiB), the time its vCPUs
        spent handling shadow page faults and walking page tables in it
        (ns, 0 for not measured), and the guest's loads of CR3 that
        exited in it (the count of an interval wholly in shadow mode is
        all of them); return the Mode to run next."""
        g = self.guard
        whole = False
        if g is not None:
            for name, value in (('elapsed_ns', elapsed_ns),
                                ('switching_ns', switching_ns),
                                ('memory_mib', memory_mib),
                                ('maint_ns', maint_ns),
                                ('walk_ns', walk_ns),
                                ('cr3_loads', cr3_loads)):
                if not (isinstance(value, int) and 0 <= value <= U64_MAX):
                    raise ValueError('%s must be a u64, got %r'
                                     % (name, value))
            # An interval with no switching time, after the last switch
            # was measured, ran wholly in this mode.
            whole = not switching_ns and not self.measuring
            self.sized = _scaled_ratio(memory_mib, g.switch_ns_per_gib, 1024)
            if switching_ns:
                self._measured(switching_ns)
            cap = 2 * max(self.price(Mode.HAP), self.price(Mode.SHADOW))
            self.credit = min(self.credit + _scaled_ratio(
                elapsed_ns, g.budget_ppm, PPM), cap)
        if not sample.valid:
            self.last_rule = Rule.NO_DATA
            return self.mode
        self.had_data[self.mode] = True
        settled = self.since_change >= SETTLE_INTERVALS
        self.since_change = min(self.since_change + 1, SETTLE_INTERVALS)
        costs = None
        if g is not None and g.priced:
            visiting = self.exploring > 0
            if whole and settled:
                self._measure_events(sample, maint_ns, walk_ns)
            if visiting:
                self.exploring -= 1
            costs = self._account(sample, elapsed_ns,
                                  self._cr3_count(sample, whole, cr3_loads))
            if self.regret > self.budget_ns():
                leader = self.leader(self.margin)
                if leader is not None and leader != self.mode:
                    if self.credit < self._credit_needed(leader):
                        self.last_rule = Rule.RATE_LIMIT
                        return self.mode
                    # Back from a visit is not following a flipping leader.
                    if not visiting:
                        self.margin = min(2 * self.margin, MARGIN_MAX)
                    return self._switch(leader, Rule.REGRET_LEADER)
            if visiting and not self.exploring:
                # The visit is over: back to the mode it left if that one
                # cost less in this interval, at the prices now measured.
                back = Mode(1 - self.mode)
                here, there = costs
                if there < here and self.credit >= self.price(back):
                    return self._switch(back, Rule.EXPLORE)
        self.window.append(sample)
        if len(self.window) < self.history:
            self.last_rule = Rule.WARMUP
            return self.mode
        n = len(self.window)
        self.last_htlb = htlb = sum(s.ftlb for s in self.window) // n
        self.last_hpt = hpt = sum(s.pt for s in self.window) // n
        target, rule = decide(self.mode, sample.ftlb, sample.fpf,
                              sample.pt, htlb, hpt, self.thresholds)
        self.last_rule = rule
        if target == self.mode:
            if costs is not None and self._explores(*costs):
                self.explored = True
                return self._visit(self.history + SETTLE_INTERVALS)
            if costs is not None and self._revisits(sample, *costs):
                return self._revisit()
            return self.mode
        if self.exploring:
            self.last_rule = Rule.EXPLORE
            return self.mode
        veto = self._vetoed(target) if g is not None else None
        if veto is not None:
            self.last_rule = veto
            if costs is not None and self._revisits(sample, *costs):
                return self._revisit()
            return self.mode
        return self._switch(target, rule)
