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


class Guard(object):
    """The switch guard as doc/source/simulation.rst states it, kept as
    running totals (what static hap, static shadow and this run have cost,
    in whole ns) rather than dsp.Engine's differences, and a switch's
    charge as the larger of its price and what it took, rather than
    dsp.Engine's price owed.  The ledger's saturation at 2^62 ns is not
    modeled: no test runs that long."""

    MIN_SWITCH_NS, FLOOR_NS, BACKOFF_MAX = 10 ** 6, 100 * 10 ** 9, 64
    MARGIN_MAX, MEASURED_MAX = 2 ** 13, 2 ** 48 - 1

    def __init__(self, guard):
        self.g = guard
        self.switch_ns = max(guard.switch_cost_ns, self.MIN_SWITCH_NS)
        self.total = {HAP: 0, SHADOW: 0, 'run': 0}
        self.since = {HAP: 0, SHADOW: 0}   # each mode's cost since a switch
        self.gain = 0
        self.time_ns = 0
        self.credit = 2 * self.switch_ns
        self.backoff = 1
        self.margin = 1
        self.switched = False
        self.took = {HAP: 0, SHADOW: 0}    # the last switch into each mode
        self.by_memory = 0                 # a switch into shadow, by size
        # The last switch, until an interval measured what it took: the
        # price it was charged when the engine made it (0: from outside).
        self.unmeasured = None
        # What the VM's events took, in intervals wholly in one mode:
        # [ns, events] of faults handled in shadow mode, of walks per mode.
        self.faults = [0, 0]
        self.walks = {HAP: [0, 0], SHADOW: [0, 0]}
        # Loads of CR3 and instructions, in intervals wholly in shadow
        # mode: the guest's rate, over at most 2^40 instructions.
        self.cr3 = [0, 0]
        self.cr3_at = 0                    # time_ns at its last measure
        self.cr3_wait = 120 * 10 ** 9      # before a visit to measure again
        self.costs = (0, 0)                # this interval: here, there
        self.explored = False
        self.visit_left = 0                # intervals with data it may hold
        self.modes_with_data = set()
        self.after_change = self.SETTLE    # intervals with data since

    PRIOR_FAULTS, PRIOR_MISSES = 10 ** 4, 10 ** 6
    # A measure keeps at most 64 priors' worth of events; the first two
    # intervals with data after a change of mode measure nothing, and a
    # visit lasts the window and those two.
    SPAN, SETTLE = 64, 2

    @classmethod
    def _add(cls, measure, ns, events, prior):
        while max(ns, events) > cls.MEASURED_MAX:
            ns, events = ns // 2, events // 2
        measure[0] += ns
        measure[1] += events
        while (measure[0] > cls.MEASURED_MAX
               or measure[1] > cls.SPAN * prior):
            measure[0] //= 2
            measure[1] //= 2

    @staticmethod
    def _with_prior(prior, weight, mean, events):
        """The prior counted as ``weight`` events, and ``events`` at their
        ``mean`` (ps), each part floored."""
        return (prior * weight // (weight + events)
                + mean * events // (weight + events))

    def fault_ps(self):
        ns, events = self.faults
        if not events:
            return self.g.pf_cost_ps
        return self._with_prior(self.g.pf_cost_ps, self.PRIOR_FAULTS,
                                ns * 1000 // events, events)

    def miss_ps(self):
        (hap_ns, hap_n), (shadow_ns, shadow_n) = (self.walks[HAP],
                                                  self.walks[SHADOW])
        if not (hap_n and shadow_n):
            return self.g.tlb_cost_ps
        extra = max(hap_ns * 1000 // hap_n - shadow_ns * 1000 // shadow_n, 0)
        n = min(hap_n, shadow_n)
        return self._with_prior(self.g.tlb_cost_ps, self.PRIOR_MISSES,
                                extra, n)

    def measure(self, mode, sample, maint_ns, walk_ns):
        """An interval wholly and settled in ``mode``: what its events
        took."""
        if mode == SHADOW and maint_ns and sample.page_faults:
            self._add(self.faults, maint_ns, sample.page_faults,
                      self.PRIOR_FAULTS)
        if walk_ns and sample.tlb_misses:
            self._add(self.walks[mode], walk_ns, sample.tlb_misses,
                      self.PRIOR_MISSES)

    def explores(self, mode, history):
        """Go to the other mode to measure a price never measured: once,
        if this interval cost something here and at most twice that there,
        with credit for a round trip, within budget for it and the visit's
        intervals at what the other mode cost more this interval."""
        other = SHADOW if mode == HAP else HAP
        learns = ((other == SHADOW and not self.faults[1])
                  or (self.walks[mode][1] and not self.walks[other][1]))
        # Hap mode has data only if someone feeds the faults: a visit
        # there needs to have seen some before.
        if other == HAP and HAP not in self.modes_with_data:
            learns = False
        here, there = self.costs
        return (not self.explored and bool(learns)
                and 0 < here and there <= 2 * here
                and self.credit >= self.round_trip()
                and self.regret() + self.round_trip()
                + (history + self.SETTLE) * max(there - here, 0)
                <= self.budget())

    def revisits(self, mode, sample):
        """Go from hap to shadow mode to count the guest's CR3 loads
        again, not on a visit, the rate having been measured
        ``cr3_wait`` of run time ago or more: if in this interval the
        faults alone would make shadow mode the cheaper and the loads
        make it the dearer, with credit
        for a round trip, within budget for it and the two intervals of
        the visit at what shadow mode cost more in this one.  Each such
        visit doubles the wait, up to 2^46 ns."""
        here, there = self.costs
        faults = sample.page_faults * self.fault_ps() // 1000
        return (mode == HAP and self.cr3[0] > 0 and not self.visit_left
                and self.time_ns - self.cr3_at >= self.cr3_wait
                and faults < here < there
                and self.credit >= self.round_trip()
                and self.regret() + self.round_trip()
                + self.SETTLE * (there - here) <= self.budget())

    def priced(self):
        return self.g.tlb_cost_ps or self.g.pf_cost_ps

    def price(self, mode):
        floor = max(self.switch_ns, self.took[mode])
        return max(floor, self.by_memory) if mode == SHADOW else floor

    def round_trip(self):
        return self.price(HAP) + self.price(SHADOW)

    def tick(self, mode, elapsed_ns, switching_ns, memory_mib):
        self.by_memory = min(memory_mib * self.g.switch_ns_per_gib // 1024,
                             self.MEASURED_MAX)
        if switching_ns and self.unmeasured is not None:
            # The first interval that took any after a switch: what the
            # switch into the mode the VM is in took.  An engine-made
            # switch is charged the larger of its price and that.
            took = min(switching_ns, self.MEASURED_MAX)
            self.took[mode] = took
            if self.unmeasured:
                charge = max(self.unmeasured, took) - self.unmeasured
                self.credit -= charge
                if self.priced():
                    self.total['run'] += charge
            self.unmeasured = None
        self.credit = min(self.credit + elapsed_ns * self.g.budget_ppm
                          // 10 ** 6, 2 * max(self.price(HAP),
                                              self.price(SHADOW)))

    def cr3_loads(self, mode, sample, whole, loads):
        """An interval's loads of CR3: shadow paging intercepts each, so
        an interval wholly in shadow mode counts them (and they add to the
        guest's rate); TDP intercepts none, so any other interval's are
        its instructions at the rate seen in shadow mode."""
        if whole and mode == SHADOW:
            self._add(self.cr3, loads, sample.instructions,
                      2 ** 40 // self.SPAN)
            self.cr3_at = self.time_ns
            return loads
        seen, insns = self.cr3
        return sample.instructions * seen // insns if insns else 0

    def account(self, mode, sample, elapsed_ns, cr3=0):
        cost = {HAP: sample.tlb_misses * self.miss_ps() // 1000,
                SHADOW: (sample.page_faults * self.fault_ps() // 1000
                         + cr3 * self.g.cr3_cost_ps // 1000)}
        other = SHADOW if mode == HAP else HAP
        self.costs = (cost[mode], cost[other])
        for m in (HAP, SHADOW):
            self.total[m] += cost[m]
            self.since[m] += cost[m]
        self.total['run'] += cost[mode]
        # The other mode's saving since the last switch, never below 0.
        self.gain = max(self.gain + cost[mode] - cost[other], 0)
        self.time_ns += elapsed_ns

    def regret(self):
        return self.total['run'] - min(self.total[HAP], self.total[SHADOW])

    def budget(self):
        return (max(self.time_ns, self.FLOOR_NS) * self.g.budget_ppm
                // 10 ** 6)

    def leader(self, margin=1):
        lead = self.total[HAP] - self.total[SHADOW]
        if lead > margin * self.price(SHADOW):
            return SHADOW
        if -lead > margin * self.price(HAP):
            return HAP
        return None

    def needed(self, target):
        """Credit a switch needs: its price to the leader, else the way
        back too."""
        if target == self.leader():
            return self.price(target)
        return self.round_trip()

    def veto(self, target):
        """Rule 10, 11 or 12 of dsp.Rule if the switch is kept, or None."""
        if self.priced():
            if self.gain < self.backoff * self.round_trip():
                return 10
            # Over budget by the switch: kept, unless it goes to the leader.
            if (self.regret() + self.price(target) > self.budget()
                    and target != self.leader()):
                return 11
        if self.credit < self.needed(target):
            return 12
        return None

    def switch(self, old, new, explore=False, visit=0, back=False):
        """A switch the engine makes; one to explore (``explore``), the
        way back from the visit (``back``) and the switch after an
        exploration judge no stay."""
        price = self.price(new)
        self.credit -= price
        if self.priced():
            self.total['run'] += price
            if self.switched and not (explore or back):
                paid = self.since[new] - self.since[old]
                if paid < self.round_trip():
                    self.backoff = min(2 * self.backoff, self.BACKOFF_MAX)
                else:
                    self.backoff = max(self.backoff // 2, 1)
        self.since = {HAP: 0, SHADOW: 0}
        self.gain = 0
        self.switched = not explore
        self.visit_left = visit if explore else 0
        self.after_change = 0
        self.unmeasured = price

    def forced(self):
        """A switch from outside: a new stay; it prices the next switch,
        charges nothing."""
        self.since = {HAP: 0, SHADOW: 0}
        self.gain = 0
        self.unmeasured = 0
        self.visit_left = 0
        self.after_change = 0


class Engine(object):
    """The rules above in the sampling loop dsp.Engine's contract states
    (its docstring): a sample without instructions is no data (rule 9,
    stay); the window holds the last ``history`` samples and decides only
    when full (rule 0 before); the historic values are the window's
    floored means; a switch empties the window.  The decision itself is
    the table's, not dsp.decide; with a guard, :class:`Guard` above."""

    def __init__(self, thresholds, history, mode, guard=None):
        self.t = {'tlbu': thresholds.tlb_upper, 'tlbl': thresholds.tlb_lower,
                  'pfu': thresholds.pf_upper, 'pfl': thresholds.pf_lower,
                  'ptu': thresholds.pt_upper, 'ptl': thresholds.pt_lower}
        self.history = history
        self.mode = str(mode)
        self.window = []
        self.last_rule = 0
        self.guard = Guard(guard) if guard is not None else None

    def _switch(self, mode, explore=False, back=False, visit=None):
        if self.guard is not None:
            self.guard.switch(self.mode, mode, explore,
                              visit or self.history + self.guard.SETTLE,
                              back)
        self.mode, self.window = mode, []

    def _revisit(self):
        g = self.guard
        g.cr3_wait = min(2 * g.cr3_wait, 2 ** 46)
        self._switch(SHADOW, explore=True, visit=g.SETTLE)
        self.last_rule = 14

    def reset(self, mode):
        """A switch from outside (or none, to the same mode): the window
        restarts."""
        if self.guard is not None and str(mode) != self.mode:
            self.guard.forced()
        self.mode, self.window = str(mode), []

    def step(self, sample, elapsed_ns=0, switching_ns=0, memory_mib=0,
             maint_ns=0, walk_ns=0, cr3_loads=0):
        g = self.guard
        whole = False
        if g is not None:
            # Wholly in one mode: no switching time, none still to come.
            whole = not switching_ns and g.unmeasured is None
            g.tick(self.mode, elapsed_ns, switching_ns, memory_mib)
        if not sample.instructions:
            self.last_rule = 9
            return self.mode
        if g is not None:
            g.modes_with_data.add(self.mode)
            settled = g.after_change >= g.SETTLE
            g.after_change += 1
        if g is not None and g.priced():
            on_visit = g.visit_left > 0
            if whole and settled:
                g.measure(self.mode, sample, maint_ns, walk_ns)
            g.visit_left = max(g.visit_left - 1, 0)
            g.account(self.mode, sample, elapsed_ns,
                      g.cr3_loads(self.mode, sample, whole, cr3_loads))
            leader = g.leader(g.margin)
            if (g.regret() > g.budget() and leader is not None
                    and leader != self.mode):
                if g.credit < g.needed(leader):
                    self.last_rule = 12
                    return self.mode
                if not on_visit:           # a visit's end is no flip
                    g.margin = min(2 * g.margin, g.MARGIN_MAX)
                self._switch(leader)
                self.last_rule = 13
                return self.mode
            if on_visit and not g.visit_left:
                # The visit is over: back if the mode it left cost less
                # in this interval, and the credit pays the way.
                back = SHADOW if self.mode == HAP else HAP
                here, there = g.costs
                if there < here and g.credit >= g.price(back):
                    self._switch(back, back=True)
                    self.last_rule = 14
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
        if (mode == self.mode and g is not None and g.priced()
                and g.explores(self.mode, self.history)):
            g.explored = True
            self._switch(SHADOW if mode == HAP else HAP, explore=True)
            self.last_rule = 14
        elif (mode == self.mode and g is not None and g.priced()
              and g.revisits(self.mode, sample)):
            self._revisit()
        elif mode != self.mode and g is not None and g.visit_left:
            self.last_rule = 14
        elif mode != self.mode:
            veto = g.veto(mode) if g is not None else None
            again = (veto is not None and g.priced()
                     and g.revisits(self.mode, sample))
            if again:
                self._revisit()
            elif veto is not None:
                self.last_rule = veto
            else:
                self._switch(mode)
        return self.mode
