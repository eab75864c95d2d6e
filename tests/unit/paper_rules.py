"""The seed paper's decision (Wang et al., VEE 2011, Section 2.3 and
Figure 5) written out as a table, as an oracle independent of dsp.py.

Each rule is the paper's sentence, a condition on the metrics and what it
decides; the first rule whose condition holds decides, and "stay" keeps
the current mode.  Quantities are exact fractions: "lower than 80
percent of" is ``x < 4/5 * bound`` with no rounding.  Metrics and
thresholds may be in any unit as long as both are in the same one.
"""

from fractions import Fraction

HAP, SHADOW, STAY = 'hap', 'shadow', 'stay'

RULES = [
    (1, 'TLB frequency above its upper bound and page fault frequency '
        'below 80 % of its upper bound: SP',
     lambda m, t: m['ftlb'] > t['tlbu'] and
     m['fpf'] < Fraction(4, 5) * t['pfu'], SHADOW),
    (2, 'page fault frequency above its upper bound and TLB frequency '
        'below 80 % of its upper bound: HAP',
     lambda m, t: m['fpf'] > t['pfu'] and
     m['ftlb'] < Fraction(4, 5) * t['tlbu'], HAP),
    (3, 'both frequencies below their lower bounds: stay',
     lambda m, t: m['ftlb'] < t['tlbl'] and m['fpf'] < t['pfl'], STAY),
    (4, 'historic or current TLB frequency zero: HAP',
     lambda m, t: m['htlb'] == 0 or m['ftlb'] == 0, HAP),
    (5, 'historic and current P-to-T above the upper bound: HAP',
     lambda m, t: m['hpt'] > t['ptu'] and m['cpt'] > t['ptu'], HAP),
    (6, 'historic and current P-to-T below the lower bound: SP',
     lambda m, t: m['hpt'] < t['ptl'] and m['cpt'] < t['ptl'], SHADOW),
    (7, 'historic and current P-to-T between the bounds: stay',
     lambda m, t: t['ptl'] <= m['hpt'] <= t['ptu'] and
     t['ptl'] <= m['cpt'] <= t['ptu'], STAY),
    (8, 'otherwise (the two P-to-T ratios in different intervals): stay',
     lambda m, t: True, STAY),
]


def decide(mode, metrics, thresholds):
    """``(mode, rule number)`` by the paper's table; ``mode`` is 'hap' or
    'shadow', ``metrics`` has ftlb, fpf, cpt, htlb, hpt, ``thresholds``
    tlbu, tlbl, pfu, pfl, ptu, ptl."""
    m = {k: Fraction(v) for k, v in metrics.items()}
    t = {k: Fraction(v) for k, v in thresholds.items()}
    for number, _, holds, decision in RULES:
        if holds(m, t):
            return (mode if decision == STAY else decision), number


class Engine(object):
    """The rules above in the sampling loop dsp.Engine's contract states
    (its docstring): a sample without instructions is no data (rule 9,
    stay); the window holds the last ``history`` samples and decides only
    when full (rule 0 before); the historic values are the window's
    floored means; a switch empties the window.  The decision itself is
    the table's, not dsp.decide."""

    def __init__(self, thresholds, history, mode):
        self.t = {'tlbu': thresholds.tlb_upper, 'tlbl': thresholds.tlb_lower,
                  'pfu': thresholds.pf_upper, 'pfl': thresholds.pf_lower,
                  'ptu': thresholds.pt_upper, 'ptl': thresholds.pt_lower}
        self.history = history
        self.mode = str(mode)
        self.window = []
        self.last_rule = 0

    def step(self, sample):
        if not sample.instructions:
            self.last_rule = 9
            return self.mode
        self.window = (self.window + [sample])[-self.history:]
        if len(self.window) < self.history:
            self.last_rule = 0
            return self.mode
        n = len(self.window)
        metrics = {'ftlb': sample.ftlb, 'fpf': sample.fpf, 'cpt': sample.pt,
                   'htlb': sum(s.ftlb for s in self.window) // n,
                   'hpt': sum(s.pt for s in self.window) // n}
        mode, self.last_rule = decide(self.mode, metrics, self.t)
        if mode != self.mode:
            self.mode, self.window = mode, []
        return self.mode
