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

"""Thresholds per CPU generation from fleet telemetry.

For each generation (its aggregates, which
:mod:`nova_adaptive_paging.telemetry.generation_aggregates` reads):

1. **Per-event costs**, as the agile-paging paper's Table IV estimates
   them: overhead time over events.  The kernel's shadow-maintenance
   time over the page faults sampled in shadow mode is what a fault
   costs shadow paging over hap; the walk time per TLB miss sampled in
   hap mode (two-dimensional walks) less that per miss sampled in shadow
   mode (walks of the shadow tables) is what a miss costs hap over
   shadow; the switching time over the switches is a switch's mean
   cost.  The walk times come from PMU events only some CPU generations
   have (:mod:`nova_adaptive_paging.pmu_events`); a generation without
   them keeps its shipped profile's TLB-miss cost, and the report says
   so.
2. **A cost profile**: the generation's shipped hardware profile (or the
   fallback's) with those three replaced; what telemetry cannot see (CR3
   write costs, instruction rate, working set, the split between the two
   switch directions) stays the shipped profile's, and the report says
   so.
3. **Thresholds**: :func:`.derivation.calibrate`, the same search as
   ``nova-paging calibrate``, on that cost profile.
4. **The change**: the active and the new thresholds replayed with the
   evaluator on the held-out traces under the estimated costs.

A generation without enough data gets no profile, only the reason.
"""

import dataclasses
import datetime

from nova_adaptive_paging.costmodel import hardware as costhw
from nova_adaptive_paging import cpu
from nova_adaptive_paging import dsp
from nova_adaptive_paging import exception
from nova_adaptive_paging import pmu_events
from nova_adaptive_paging import profiles
from nova_adaptive_paging.tuning import assess
from nova_adaptive_paging.tuning import derivation
from nova_adaptive_paging import vocabulary

# Below these, an estimate is noise: a generation needs this many events
# of each kind in the mode that pays for them, and this many samples.
MIN_FAULTS = 10000
MIN_MISSES = 1000000
MIN_SWITCHES = 10
MIN_SAMPLES = 500


class ProfilerError(exception.Error):
    pass


@dataclasses.dataclass(frozen=True)
class Costs:
    """Estimated extra costs per event (seconds)."""
    fault_s: float        # a guest page fault, shadow over hap
    miss_s: float         # a TLB miss, hap over shadow; None: not counted
    switch_s: float       # one switch, either direction (mean)
    # Where miss_s comes from, or why the shipped profile's is kept.
    miss_note: str = ''


@dataclasses.dataclass
class Result:
    generation: str
    telemetry: object                 # generation_aggregates.Generation
    reason: str = None                # set: too little data, no profile
    costs: Costs = None
    hardware: object = None           # the estimated cost profile
    base: object = None               # the shipped one it started from
    profile: object = None            # profiles.Profile, new
    active: object = None             # profiles.Profile, in force
    new_summary: object = None        # assess.Summary on held-out traces
    active_summary: object = None
    new_scores: list = None
    active_scores: list = None

    @property
    def ok(self):
        return self.reason is None


def _miss_cost(g, lacking):
    """(seconds a TLB miss costs hap over shadow or None, note)."""
    tlb = vocabulary.EVENT_TLB_MISS
    misses = {m: g.events[m][tlb] for m in vocabulary.MODES}
    walk_s = {vocabulary.HAP: g.hap_walk_s,
              vocabulary.SHADOW: g.shadow_walk_s}
    events = pmu_events.walk_events(g.key)
    if not events.counted:
        return None, ('no page-walk-cycle event on %s (%s): the TLB-miss '
                      'cost is the shipped profile\'s'
                      % (g.key, events.reason))
    short = [m for m in vocabulary.MODES if misses[m] < MIN_MISSES]
    if short or walk_s[vocabulary.HAP] <= 0:
        lacking.append('%s TLB misses sampled in hap and shadow mode with '
                       '%.3g s of two-dimensional walks (needs %d misses '
                       'in each mode and some walk time, counted by %s)'
                       % (' and '.join('%d' % misses[m]
                                       for m in vocabulary.MODES),
                          walk_s[vocabulary.HAP], MIN_MISSES,
                          events.describe()))
        return None, ''
    per_miss = {m: walk_s[m] / misses[m] for m in vocabulary.MODES}
    return (per_miss[vocabulary.HAP] - per_miss[vocabulary.SHADOW],
            'walk cycles per TLB miss, %.4g ns in hap less %.4g ns in '
            'shadow mode (%s)' % (per_miss[vocabulary.HAP] * 1e9,
                                  per_miss[vocabulary.SHADOW] * 1e9,
                                  events.describe()))


def estimate(g):
    """:class:`Costs` from one generation's telemetry, or a reason why
    there is too little data (str)."""
    faults = g.events[vocabulary.SHADOW][vocabulary.EVENT_PAGE_FAULT]
    lacking = []
    if g.samples < MIN_SAMPLES:
        lacking.append('%d samples (needs %d)' % (g.samples, MIN_SAMPLES))
    if faults < MIN_FAULTS or g.shadow_maint_s <= 0:
        lacking.append('%d page faults sampled in shadow mode with %.3g s '
                       'of shadow maintenance (needs %d faults and some '
                       'time)' % (faults, g.shadow_maint_s, MIN_FAULTS))
    miss_s, note = _miss_cost(g, lacking)
    if g.switches < MIN_SWITCHES:
        lacking.append('%d switches (needs %d)' % (g.switches,
                                                   MIN_SWITCHES))
    if lacking:
        return '; '.join(lacking)
    return Costs(fault_s=g.shadow_maint_s / faults, miss_s=miss_s,
                 switch_s=g.switching_s / g.switches, miss_note=note)


def cost_profile(base, costs, generation):
    """``base`` with the estimated costs in place (see the module doc)."""
    hap, shadow = vocabulary.HAP, vocabulary.SHADOW
    miss, fault = vocabulary.EVENT_TLB_MISS, vocabulary.EVENT_PAGE_FAULT
    events = {m: dict(base.event_cost_ns[m]) for m in vocabulary.MODES}
    if costs.miss_s is not None:
        events[hap][miss] = (base.event_cost_ns[shadow][miss]
                             + costs.miss_s * 1e9)
    events[shadow][fault] = (base.event_cost_ns[hap][fault]
                             + costs.fault_s * 1e9)
    ws = base.reference_working_set_mib
    base_mean = (base.switch_s(shadow, ws) + base.switch_s(hap, ws)) / 2
    scale = costs.switch_s / base_mean if base_mean > 0 else 1.0
    switches = {k: v * scale for k, v in base.switch_cost_ns.items()}
    return dataclasses.replace(
        base, name='%s (profiled)' % generation,
        description='Estimated from fleet telemetry, on %s' % base.name,
        event_cost_ns=events, switch_cost_ns=switches,
        generation=generation)


def calibrated(key, costs, traces=None):
    """(base, hw, profile, report): ``costs`` put into the generation's
    shipped cost profile, and the thresholds ``calibrate`` derives from
    it (ValueError where the costs give no break-even)."""
    base = costhw.for_generation(key)
    hw = cost_profile(base, costs, key)
    new, report = derivation.calibrate(
        hw, traces or derivation.tuning_traces(), generation=key)
    return base, hw, new, report


def _active(g, fallback):
    """The profile in force on the generation's hosts, as a Profile."""
    if not g.thresholds or g.history is None:
        return fallback
    try:
        values = dsp.Thresholds(**{
            k: profiles.to_milli(round(g.thresholds[k], 3))
            for k in dsp.Thresholds.FIELDS})
    except (KeyError, ValueError):
        return fallback
    return profiles.Profile(g.key, values, g.history, g.interval_s,
                            profiles.Provenance(method='manual',
                                                source='in force'))


def profile_generation(g, window, url, traces=None):
    """A :class:`Result` for one generation's telemetry."""
    result = Result(g.key, g)
    if not cpu.is_generation_key(g.key):
        # A label value from the fleet: it names files, so it must be a
        # key a host can have, never a path.
        result.reason = ('%r is not a CPU generation key (as "nova-paging '
                         'cpu-generation" prints them)' % g.key)
        return result
    costs = estimate(g)
    if isinstance(costs, str):
        result.reason = costs
        return result
    try:
        base, hw, new, report = calibrated(g.key, costs, traces)
    except ValueError as exc:      # break-even needs positive differences
        result.reason = str(exc)
        return result
    confidence = _confidence(g)
    source = ('nova-paging profile, %s over %s: %d hosts, %d guests, %d '
              'samples; estimated extra cost per page fault in shadow mode '
              '%.4g us, per TLB miss in hap mode %.4g ns (%s), per switch '
              '%.4g us (%s); other costs from hardware profile %s '
              '(modeled); calibrated as nova-paging calibrate: interval %d '
              's, history %d' % (
                  url, window, g.hosts, g.guests, g.samples,
                  costs.fault_s * 1e6, extra_miss_s(hw) * 1e9,
                  costs.miss_note, costs.switch_s * 1e6, confidence,
                  base.name, report['interval_s'], report['history']))
    result.profile = dataclasses.replace(
        new, provenance=profiles.Provenance(
            method='profiled', source=source,
            obtained=datetime.date.today().isoformat(), hosts=g.hosts,
            samples=int(g.samples)))
    result.costs, result.hardware, result.base = costs, hw, base
    result.active = _active(g, profiles.builtin())
    held_out = derivation.held_out_traces()
    result.new_scores, result.new_summary = assess.assess(
        hw, result.profile, held_out)
    result.active_scores, result.active_summary = assess.assess(
        hw, result.active, held_out)
    return result


def extra_miss_s(hw):
    """What a TLB miss costs hap over shadow in cost profile ``hw``."""
    return hw.extra_cost_s(vocabulary.HAP, vocabulary.EVENT_TLB_MISS)


def _confidence(g):
    parts = []
    for name, cv in (('fault cost', g.fault_cost_spread),
                     ('miss cost', g.miss_cost_spread)):
        if cv is not None and g.hosts > 1:
            parts.append('%s spread %.0f %% across hosts' % (name, cv * 100))
    return ', '.join(parts) or 'one host: no spread'


def profile_fleet(client, window, at, url, generations=()):
    """A :class:`Result` per generation seen (or asked for); raises
    ProfilerError when no host reported at all."""
    from nova_adaptive_paging.telemetry import generation_aggregates
    seen = generation_aggregates.read(client, window, at)
    if not seen:
        raise ProfilerError(
            '--prometheus %s: no nova-paging host reported over the last %s '
            '(is it scraping the agents, job "nova-paging-agent"?)'
            % (url, window))
    results = []
    for key in list(generations) or sorted(seen):
        if key not in seen:
            results.append(Result(
                key, generation_aggregates.Generation(key), reason=(
                    'no host of this generation reported over the last %s'
                    % window)))
        else:
            results.append(profile_generation(seen[key], window, url))
    return results


def held_out_gain(result):
    """Mean modeled gain of the new thresholds over the active ones on
    the held-out traces (share of the better static mode's time)."""
    active = {s.trace: s.regret for s in result.active_scores}
    gains = [active[s.trace] - s.regret for s in result.new_scores]
    return sum(gains) / len(gains)
