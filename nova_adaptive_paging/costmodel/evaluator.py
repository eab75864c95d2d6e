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

"""Replaying a trace under a paging policy on a modeled host.

The model (doc/source/simulation.rst has the full statement):

* A trace row of native duration ``d`` with ``T`` TLB misses, ``P`` guest
  page faults and ``C`` CR3 writes takes, in mode ``m``,
  ``d + T*c_tlb[m] + P*c_pf[m] + C*c_cr3[m]`` seconds (the hardware
  profile's extra costs over native).  Work inside a row progresses
  uniformly, so a row is split or merged at any point.
* A switch stops the VM for the profile's switching cost (into shadow
  mode: a fixed part plus a part per MiB of the working set at that
  moment).
* ``adaptive`` samples every ``interval`` seconds of *simulated* time (so
  a slower mode covers less of the trace per sample), feeds the counter
  deltas it could observe to :class:`nova_adaptive_paging.dsp.Engine`
  and runs the mode the engine returns from the next interval on.  The
  next sample carries what the switch took, as the kernel measures it
  (``time_switching_ns``), and every sample the guest's memory, which the
  model takes to be the working set (the kernel counts its memslots),
  and what the interval's events took, as the simulated host models the
  kernel's counters: a fault's handling in shadow mode at what a fault
  costs shadow over hap (all of it, exact and noise-free, which the real
  handler's time is not), and, on generations with walk-cycle events,
  each miss's walk (:meth:`.hardware.Hardware.walk_s`), and in shadow
  mode the guest's loads of CR3 (each exits; with TDP none does).
* ``oracle`` knows the whole trace: it cuts the trace into pieces of
  ``interval`` seconds of native time and picks the cheapest sequence of
  modes, switching costs included (dynamic programming).  It may start
  in either mode for free, so it is never worse than a static mode.
"""

import itertools
import math

from nova_adaptive_paging import dsp
from nova_adaptive_paging import exception
from nova_adaptive_paging import pmu_events
from nova_adaptive_paging import vocabulary

HAP, SHADOW = int(dsp.Mode.HAP), int(dsp.Mode.SHADOW)
MODE_NAMES = vocabulary.MODES
EVENTS = vocabulary.COST_EVENTS
# The policies a trace is replayed under; the oracle is the evaluator's
# own (per-interval best mode, free switches): no guest can ask for it.
ORACLE = 'oracle'
POLICIES = vocabulary.POLICIES + (ORACLE,)


def _cumulative(values):
    return list(itertools.accumulate(values, initial=0.0))


class Replay:
    """One trace on one hardware profile, ready to replay any policy."""

    def __init__(self, trace, hardware):
        self.trace = trace
        self.hw = hardware
        self.dur = trace.interval_s
        self.rows_time = []          # per mode: modeled seconds per row
        self.rate = []               # per mode: modeled s per native s
        for name in MODE_NAMES:
            ct, cp, cc = (hardware.cost_s(name, e) for e in EVENTS)
            rows = [d + t * ct + p * cp + c * cc for d, t, p, c in zip(
                self.dur, trace.tlb_misses, trace.page_faults,
                trace.cr3_writes)]
            self.rows_time.append(rows)
            self.rate.append([r / d for r, d in zip(rows, self.dur)])
        # What the kernel would measure, as the simulated host models it;
        # the walks only where this generation has walk-cycle events.
        self.maint_s = hardware.fault_handling_s()
        self.walk_s = None
        if (hardware.generation
                and pmu_events.walk_events(hardware.generation).counted):
            self.walk_s = [hardware.walk_s(m) for m in MODE_NAMES]
        self.cum_insns = _cumulative(trace.instructions)
        self.cum_tlb = _cumulative(trace.tlb_misses)
        self.cum_pf = _cumulative(trace.page_faults)
        self.cum_cr3 = _cumulative(trace.cr3_writes)

    def static(self, mode):
        return {'time_s': math.fsum(self.rows_time[mode]), 'switches': 0}

    def _working_set_mib(self, row):
        """The working set at ``row`` (the last row's past the end)."""
        return self.trace.working_set_mib[min(row, len(self.dur) - 1)]

    def _switch_s(self, to_mode, row):
        return self.hw.switch_s(MODE_NAMES[to_mode],
                                self._working_set_mib(row))

    @staticmethod
    def _at(cum, i, frac):
        return int(cum[i] + (cum[i + 1] - cum[i]) * frac + 0.5)

    def adaptive(self, thresholds, history, interval, start=HAP,
                 guest_faults=True, timeline=None, guard=None):
        """Replay the DSP engine (with ``guard``, a dsp.Guard, if given);
        ``timeline`` (a list) gets one ``(time_s, mode, sample)`` per
        sampling interval."""
        engine = dsp.Engine(thresholds, history, dsp.Mode(start), guard)
        interval_ns = int(round(interval * 1e9))
        mode = int(start)
        dur, n = self.dur, len(self.dur)
        ci, ct, cp, cc = (self.cum_insns, self.cum_tlb, self.cum_pf,
                          self.cum_cr3)
        in_mode = [0.0, 0.0]
        switching = 0.0
        switches = explorations = 0
        i, off = 0, 0.0                  # row, native seconds into it
        prev = (0, 0, 0, 0)
        switched_ns = 0                  # the last switch, as measured
        while True:
            budget = interval
            rate = self.rate[mode]
            while i < n:
                r = rate[i]
                rem = (dur[i] - off) * r
                if rem > budget:
                    off += budget / r
                    budget = 0.0
                    break
                budget -= rem
                i += 1
                off = 0.0
            in_mode[mode] += interval - budget
            if i >= n:
                break
            f = off / dur[i]
            cur = (self._at(ci, i, f), self._at(ct, i, f),
                   self._at(cp, i, f), self._at(cc, i, f))
            faults = cur[2] - prev[2]
            if not guest_faults and mode == HAP:
                faults = None            # nothing intercepts them in HAP
            sample = dsp.Sample.from_counts(cur[0] - prev[0],
                                            cur[1] - prev[1], faults)
            maint = walk = 0
            if mode == SHADOW and faults:
                maint = int(round(faults * self.maint_s * 1e9))
            if self.walk_s is not None:
                walk = int(round((cur[1] - prev[1]) * self.walk_s[mode]
                                 * 1e9))
            # Shadow paging intercepts every load of CR3, TDP none.
            cr3 = cur[3] - prev[3] if mode == SHADOW else 0
            prev = cur
            target = int(engine.step(sample, interval_ns, switched_ns,
                                     int(self._working_set_mib(i)),
                                     maint, walk, cr3))
            switched_ns = 0
            if timeline is not None:
                timeline.append((in_mode[0] + in_mode[1] + switching,
                                 mode, sample))
            if target != mode:
                took = self._switch_s(target, i)
                switching += took
                switched_ns = int(round(took * 1e9))
                switches += 1
                explorations += engine.last_rule == dsp.Rule.EXPLORE
                mode = target
        return {'time_s': in_mode[0] + in_mode[1] + switching,
                'switches': switches, 'explorations': explorations,
                'time_hap_s': in_mode[HAP],
                'time_shadow_s': in_mode[SHADOW]}

    def _segments(self, interval, extra=()):
        """Per piece of ``interval`` native seconds: (hap s, shadow s,
        row where it starts, then the piece's sum of each per-row series
        of ``extra``), a row split where a piece ends."""
        cum = [_cumulative(rows) for rows in (*self.rows_time, *extra)]
        ends = _cumulative(self.dur)
        total = ends[-1]
        n = len(self.dur)
        pieces = []
        i = 0
        prev = (0.0,) * len(cum) + (0,)
        k = 1
        while prev[-1] < n:
            x = k * interval
            if x >= total:
                cur = tuple(c[-1] for c in cum) + (n,)
            else:
                while ends[i + 1] <= x:
                    i += 1
                f = (x - ends[i]) / self.dur[i]
                cur = tuple(c[i] + (c[i + 1] - c[i]) * f for c in cum) + (
                    i,)
            sums = [c - p for c, p in zip(cur[:-1], prev[:-1])]
            pieces.append((sums[0], sums[1], prev[-1], *sums[2:]))
            prev = cur
            k += 1
            if x >= total:
                break
        return pieces

    def oracle(self, interval, start=None):
        """The cheapest sequence of modes, one per ``interval`` seconds of
        native time; it starts in either mode for free, or in ``start``
        (as a VM does) and pays to leave it."""
        pieces = self._segments(interval)
        best = [0.0, 0.0]
        if start is not None:
            best[1 - start] = math.inf
        choices = []                     # per piece: predecessor per mode
        for cost_hap, cost_shadow, row in pieces:
            costs = (cost_hap, cost_shadow)
            nxt, back = [0.0, 0.0], [0, 0]
            for m in (HAP, SHADOW):
                other = 1 - m
                moved = best[other] + (
                    self._switch_s(m, row)
                    if choices or start is not None else 0.0)
                back[m] = m if best[m] <= moved else other
                nxt[m] = min(best[m], moved) + costs[m]
            best = nxt
            choices.append(back)
        mode = HAP if best[HAP] <= best[SHADOW] else SHADOW
        total = best[mode]
        in_mode, switches = [0.0, 0.0], 0
        for piece, back in zip(reversed(pieces), reversed(choices)):
            in_mode[mode] += piece[mode]
            if back[mode] != mode:
                switches += 1
            mode = back[mode]
        return {'time_s': total, 'switches': switches,
                'time_hap_s': in_mode[HAP], 'time_shadow_s': in_mode[SHADOW]}

    def floor_within_budget(self, interval, guard, start=HAP):
        """A floor under what any rule whose switching keeps within the
        credit of ``guard`` (a dsp.Guard) can reach, starting in
        ``start``: the credit is two switches at the guard's price plus
        ``budget_ppm`` of the time worked so far, and a switch needs
        credit for what the earlier switches took and for its own
        price, which the guard sets at least at ``switch_cost_ns`` and,
        into shadow mode, at ``switch_ns_per_gib`` of the working set.

        Everything is counted in the rule's favour, so that a run no
        rule within the credit can bring below this is out of reach of
        the budget, whatever the rule: it knows the whole trace; time
        worked is taken as if every piece of ``interval`` native seconds
        ran in the dearer mode; switches take the least they take in
        the piece they are made in, earlier ones the least they take in
        the trace; its own price is the least the guard may set; the
        guard's cap on credit is left out; and a piece in which the rule
        switches (once, or there and back) costs what each of its rows
        costs in the cheaper mode for that row, so that a switch
        anywhere inside it, at any rule's sampling instant, is covered.
        Only a time (a floor, not a schedule); the work is pieces x
        affordable switches."""
        share = guard.budget_ppm / dsp.PPM
        initial_s = 2 * guard.switch_ns * 1e-9
        # Per piece, also what its rows cost each in its cheaper mode.
        pieces = self._segments(interval, extra=(
            [min(h, s) for h, s in zip(*self.rows_time)],))
        n = len(self.dur)
        least = [self.hw.switch_s(MODE_NAMES[HAP], 0.0),
                 min(self._switch_s(SHADOW, row) for row in range(n))]
        smallest = min(self._working_set_mib(row) for row in range(n))
        price = [guard.switch_ns * 1e-9,
                 max(guard.switch_ns,
                     guard.switch_ns_per_gib * smallest / 1024) * 1e-9]
        # The least a switch into shadow mode takes in each piece (the
        # rows it starts and ends in).
        into_shadow = [min(self._switch_s(SHADOW, r) for r in range(
            row, pieces[i + 1][2] + 1 if i + 1 < len(pieces) else n))
            for i, (_, _, row, _) in enumerate(pieces)]

        def needs(k):
            # Credit the k-th switch needs: what the k - 1 before it took
            # at the least (they alternate, the first out of start) and
            # its own price (into the other mode if k is odd).
            before = k // 2 * least[1 - start] + (k - 1) // 2 * least[start]
            return before + price[1 - start if k % 2 else start]

        dearest = _cumulative(max(p[0], p[1]) for p in pieces)
        most = initial_s + share * dearest[-1]
        need = [0.0]
        while len(need) <= 2 * len(pieces) and needs(len(need)) <= most:
            need.append(needs(len(need)))
        kmax = len(need) - 1
        inf = math.inf
        best = [[inf, inf] for _ in range(kmax + 1)]
        best[0][start] = 0.0
        for i, (cost_hap, cost_shadow, _, mixed) in enumerate(pieces):
            costs = (cost_hap, cost_shadow)
            switch = (least[HAP], into_shadow[i])
            credit = initial_s + share * dearest[i + 1]
            nxt = [[inf, inf] for _ in range(kmax + 1)]
            for k in range(kmax + 1):
                for m in (HAP, SHADOW):
                    t = best[k][m] + costs[m]
                    if k and need[k] <= credit:
                        t = min(t, best[k - 1][1 - m] + switch[m] + mixed)
                    if k > 1 and max(need[k - 1], need[k]) <= credit:
                        t = min(t, best[k - 2][m] + switch[1 - m]
                                + switch[m] + mixed)
                    nxt[k][m] = t
            best = nxt
        return min(min(b) for b in best)


# The replays step once per sampling interval of modeled time; a trace
# and hardware profile that model more intervals than this would run for
# hours, and describe no guest anyone runs (a day at 0.1 s is 864,000).
MAX_INTERVALS = 10 ** 6


class EvaluationError(exception.Error):
    pass


def evaluate(trace, hardware, profile, interval=None, guest_faults=True,
             policies=POLICIES, timeline=None):
    """Every policy on one trace: the JSON object ``simulate`` prints."""
    replay = Replay(trace, hardware)
    interval = float(interval or profile.interval_s)
    longest = max(replay.static(m)['time_s'] for m in (HAP, SHADOW))
    if longest / interval > MAX_INTERVALS:
        raise EvaluationError(
            '%s on hardware %s: %.3g s modeled is %.3g sampling intervals of '
            '%g s; expected at most %d (check the trace\'s counts)' % (
                trace.name, hardware.name, longest, longest / interval,
                interval, MAX_INTERVALS))
    result = {}
    for name in policies:
        if name in MODE_NAMES:
            result[name] = replay.static(MODE_NAMES.index(name))
        elif name == vocabulary.ADAPTIVE:
            result[name] = replay.adaptive(
                profile.thresholds, profile.history_samples, interval,
                guest_faults=guest_faults, timeline=timeline,
                guard=profile.guard)
        elif name == ORACLE:
            result[name] = replay.oracle(interval)
        else:
            raise ValueError('unknown policy %r' % name)
    return {'trace': trace.name, 'hardware': hardware.name,
            'policies': result}


def regret(result, policy=vocabulary.ADAPTIVE):
    """(policy / best static - 1, policy / oracle - 1) of one result."""
    p = result['policies']
    best = min(p[vocabulary.HAP]['time_s'], p[vocabulary.SHADOW]['time_s'])
    mine = p[policy]['time_s']
    out = [mine / best - 1.0]
    if ORACLE in p:
        out.append(mine / p[ORACLE]['time_s'] - 1.0)
    return tuple(out)
