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
"""

import collections
import dataclasses
import enum

METRIC_MAX = (1 << 48) - 1
HISTORY_MAX = 64
U64_MAX = (1 << 64) - 1

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


@dataclasses.dataclass(frozen=True)
class Sample:
    """One interval's metrics, computed from the raw counter deltas."""

    instructions: int
    ftlb: int
    fpf: int
    pt: int

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
                   _scaled_ratio(page_faults, PT_SCALE, tlb_misses))


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


class Engine:
    """The per-VM sampling loop around :func:`decide`.

    Keeps the last ``history`` samples.  It decides only on a full window
    (the paper's "most recent three samples"), so a VM stays put for at
    least ``history`` intervals after it starts and after every switch:
    the window restarts on a switch because the samples taken before it
    describe the other mode's transient, and a burst shorter than the
    window cannot make the VM switch back (Section 4.5).  The averages are
    floor(sum / n), the sum of at most HISTORY_MAX saturated metrics.
    """

    def __init__(self, thresholds, history=3, mode=Mode.HAP):
        if not 1 <= history <= HISTORY_MAX:
            raise ValueError('history must be in [1, %d], got %r'
                             % (HISTORY_MAX, history))
        self.thresholds = thresholds
        self.history = history
        self.mode = Mode(mode)
        self.window = collections.deque(maxlen=history)
        self.last_rule = Rule.WARMUP
        self.last_htlb = self.last_hpt = 0

    def reset(self, mode=None):
        """Forget the window, e.g. after a switch forced from outside."""
        if mode is not None:
            self.mode = Mode(mode)
        self.window.clear()

    def step(self, sample):
        """Feed one interval's Sample; return the Mode to run next."""
        if not sample.valid:
            self.last_rule = Rule.NO_DATA
            return self.mode
        self.window.append(sample)
        if len(self.window) < self.history:
            self.last_rule = Rule.WARMUP
            return self.mode
        n = len(self.window)
        self.last_htlb = htlb = sum(s.ftlb for s in self.window) // n
        self.last_hpt = hpt = sum(s.pt for s in self.window) // n
        target, self.last_rule = decide(self.mode, sample.ftlb, sample.fpf,
                                        sample.pt, htlb, hpt,
                                        self.thresholds)
        if target != self.mode:
            self.reset(target)
        return self.mode
