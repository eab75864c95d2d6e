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

"""What the profiler reads of the fleet: per-generation aggregates.

Every query sums on the server (PromQL ``sum by (generation)``), so the
answer has one series per generation (per mode, per bucket) whatever the
fleet's size, and any PromQL endpoint serves it.  The queries are built
by :mod:`.queries` from :mod:`.metrics`' names.
"""

import collections
import dataclasses

from nova_adaptive_paging.telemetry import metrics as M
from nova_adaptive_paging.telemetry import queries as Q
from nova_adaptive_paging import vocabulary


@dataclasses.dataclass
class Generation:
    """One CPU generation's telemetry over the range."""
    key: str
    hosts: int = 0
    guests: int = 0
    samples: float = 0.0
    # mode -> event -> count (metrics.EVENTS)
    events: dict = dataclasses.field(default_factory=lambda: {
        m: dict.fromkeys(M.EVENTS, 0.0) for m in vocabulary.MODES})
    shadow_maint_s: float = 0.0
    hap_walk_s: float = 0.0
    shadow_walk_s: float = 0.0
    switching_s: float = 0.0
    switches: float = 0.0
    # Spread of the per-host estimates (coefficient of variation).
    fault_cost_spread: float = None
    miss_cost_spread: float = None
    # The thresholds in force (paper units, median over the hosts) and
    # the most common history and interval.
    thresholds: dict = dataclasses.field(default_factory=dict)
    history: int = None
    interval_s: int = None
    # metric name -> mode -> [(upper bound, cumulative count)]
    histograms: dict = dataclasses.field(default_factory=dict)


def _one(client, expr, at, keys=('generation',)):
    """{label tuple: value} of a query."""
    return {tuple(labels.get(k, '') for k in keys): value
            for labels, value in client.query(expr, at)}


def _cost_spread(client, overhead, events, window, at, **match):
    """Coefficient of variation, across hosts, of overhead / events."""
    ratio = '(%s / %s)' % (Q.per_host_increase(overhead, window),
                           Q.per_host_increase(events, window, **match))
    joined = Q.with_generation(ratio, window=window)
    expr = ('stddev by (generation) (%s) / avg by (generation) (%s)'
            % (joined, joined))
    return _one(client, expr, at)


def read(client, window, at):
    """{generation key: Generation} over ``window`` (a PromQL duration)
    ending at ``at`` (Unix time)."""
    gens = {}

    def gen(key):
        if key not in gens:
            gens[key] = Generation(key)
        return gens[key]

    # Hosts that can switch: advisory ones report no kernel counters.
    for (key,), n in _one(client, Q.per_generation_hosts(
            window, switching='true'), at).items():
        gen(key).hosts = int(n)
    for (key,), n in _one(client, Q.per_generation_guests(window),
                          at).items():
        gen(key).guests = int(n)
    for (key,), n in _one(client, Q.per_generation_increase(
            M.SAMPLES, window), at).items():
        gen(key).samples = n
    for (key, mode, event), n in _one(
            client, Q.per_generation_increase(M.SAMPLED_EVENTS, window,
                                              keep=('mode', 'event')),
            at, ('generation', 'mode', 'event')).items():
        if mode in vocabulary.MODES and event in M.EVENTS:
            gen(key).events[mode][event] = n
    for attr, metric in (('shadow_maint_s', M.SHADOW_MAINTENANCE_SECONDS),
                         ('hap_walk_s', M.HAP_WALK_SECONDS),
                         ('shadow_walk_s', M.SHADOW_WALK_SECONDS),
                         ('switching_s', M.SWITCHING_SECONDS),
                         ('switches', M.SWITCHES)):
        for (key,), n in _one(client, Q.per_generation_increase(
                metric, window), at).items():
            setattr(gen(key), attr, n)
    for attr, overhead, mode, event in (
            ('fault_cost_spread', M.SHADOW_MAINTENANCE_SECONDS,
             vocabulary.SHADOW, vocabulary.EVENT_PAGE_FAULT),
            ('miss_cost_spread', M.HAP_WALK_SECONDS, vocabulary.HAP,
             vocabulary.EVENT_TLB_MISS)):
        for (key,), cv in _cost_spread(client, overhead, M.SAMPLED_EVENTS,
                                       window, at, mode=mode,
                                       event=event).items():
            setattr(gen(key), attr, cv)
    _read_profiles(client, gen, window, at)
    _read_histograms(client, gen, window, at)
    return gens


def _read_profiles(client, gen, window, at):
    # Each threshold's median over the generation's hosts now (they agree
    # unless NovaPagingProfileDrift fires); history and interval: the
    # most common pair.
    limits = Q.with_generation(M.PROFILE_THRESHOLD.name)
    for key_threshold, value in _one(
            client, 'quantile by (generation, threshold) (0.5, %s)'
            % limits, at, ('generation', 'threshold')).items():
        key, threshold = key_threshold
        gen(key).thresholds[threshold] = value
    info = Q.with_generation(
        'max by (%s, history, interval_s) (%s)' % (Q.HOST,
                                                   M.PROFILE_INFO.name))
    votes = collections.defaultdict(collections.Counter)
    for labels, n in client.query(
            'count by (generation, history, interval_s) (%s)' % info, at):
        try:
            votes[labels['generation']][(int(labels['history']),
                                         int(labels['interval_s']))] += n
        except (KeyError, ValueError):
            continue
    for key, counter in votes.items():
        (history, interval), _ = counter.most_common(1)[0]
        gen(key).history, gen(key).interval_s = history, interval


def _read_histograms(client, gen, window, at):
    for metric in (M.SAMPLED_FTLB, M.SAMPLED_FPF):
        expr = Q.per_generation_increase(metric, window, ('mode', 'le'),
                                         '_bucket')
        rows = _one(client, expr, at, ('generation', 'mode', 'le'))
        for (key, mode, le), n in rows.items():
            bound = float('inf') if le == '+Inf' else float(le)
            gen(key).histograms.setdefault(metric.name, {}).setdefault(
                mode, []).append((bound, n))
        for g in [gen(k) for (k, _, _) in rows]:
            for mode in g.histograms.get(metric.name, {}):
                g.histograms[metric.name][mode].sort()
