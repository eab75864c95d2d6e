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

"""A harder modeled day of a fleet of paging pools, one seed at a time:
guests arrive and leave, the pools fill, migrations fail or take longer
than the strategy priced them, and the agents' prices are off from the
truth (every figure is MODELED).

Where :mod:`.stock_fleet` runs the real agents, Prometheus and Watcher
on four hosts and eight guests, this day runs the decision alone, on a
fleet that binds: the ``paging_fit`` planner (:func:`nova_adaptive_paging.
pools.planner.plan`, default parameters) every hour, and at every boot
Nova's weigher handler with Nova's RAM weigher and, with boot placement,
:class:`nova_adaptive_paging.scheduler.weights.paging_pool.
PagingPoolWeigher` on real HostStates, given what the agents reported
so far (:mod:`nova_adaptive_paging.pools.boot`).  Time is the cost
model's (:mod:`nova_adaptive_paging.costmodel.evaluator`): a guest's
trace advances, in its host's mode, by the modeled time each hour
gives it.

The model, per seed (:class:`Config` has every figure):

* ``hosts_per_pool`` hosts in each pool of ``host_vcpus`` vCPUs, kept
  ``occupancy`` full: every hour new guests of 2 vCPUs take the room
  the guests that finished left, each running ``duration_h`` native
  hours (a guest that finds no room waits for the next hour, counted).
  Whenever more guests want one pool than it holds, it is full:
  capacity binds (the figures count the holds for no room and the
  boots that found a pool full).
* Each guest is of one of ``images`` images (and ``projects``
  projects).  An image runs one day-long workload drawn from
  :data:`WORKLOADS` (built from the shipped traces as
  :func:`.stock_fleet.day_trace` builds the end-to-end day's); a guest
  runs its image's, from a random hour of it, except with probability
  ``deviant``, when it runs another drawn at random.
* The agents price each guest's counts with per-event costs off from
  the truth by a factor drawn once per seed for each mode and event
  (log-normal, ``price_sigma``), and by ``price_noise`` more per guest
  and hour; they count no CR3 writes (as the real advisory mode).
* A migration the strategy proposes fails with ``fail_p`` (the guest
  pays half its cost and stays); one that goes through runs at a
  ``bandwidth_share`` of the link the strategy assumed, for a guest that
  dirties memory at its own rate (log-normal around the strategy's
  50 MiB/s): the guest pays the true pre-copy cost
  (:mod:`nova_adaptive_paging.costmodel.migration`), and a copy that
  cannot converge fails.
* The first ``warmup_h`` hours fill the fleet and its history; the
  figures are those of the guests that arrive in the ``measured_h``
  hours after.

Baselines, per measured guest, replayed by the evaluator on the same
traces and the true costs, without capacity: all in the hap pool, all
in the shadow pool, each in its best pool for its whole life, and
adaptive paging on the patched kernel.

A placement oracle (``Config.oracle``, ``simulate-pools --oracle``)
runs instead of the strategy: every hour each guest goes, for free, to
the pool that runs its next hour faster on the true costs, within the
pools' room (:func:`_oracle`): a reference of what pool placement can
reach when capacity binds, knowing what no agent knows.

``nova-paging simulate-pools --seed N`` prints one seed's figures.
"""

import dataclasses
import math
import random

from nova_adaptive_paging.costmodel import evaluator
from nova_adaptive_paging.costmodel import migration
from nova_adaptive_paging.costmodel import traces as tracelib
from nova_adaptive_paging.pools import boot
from nova_adaptive_paging.pools import planner
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging.simhost import stock_fleet
from nova_adaptive_paging import vocabulary

HOUR = 3600.0
HAP, SHADOW = vocabulary.HAP, vocabulary.SHADOW
MODES = (HAP, SHADOW)
EVENTS = (vocabulary.EVENT_TLB_MISS, vocabulary.EVENT_PAGE_FAULT)
# Day-long workloads from the shipped traces: (hours, trace) pieces
# repeated (stock_fleet.day_trace).  On the fleet's hardware mcf, -row07
# and -row11 favour shadow (TLB misses); gcc, -row04 and -row08 hap
# (faults); the rest change or hardly care.
WORKLOADS = {
    'tlb-mcf': ((24, 'mcf'),),
    'tlb-row07': ((24, 'spec-int-t1-row07'),),
    'tlb-row11': ((24, 'spec-int-t1-row11'),),
    'faults-gcc': ((24, 'gcc'),),
    'faults-row04': ((24, 'spec-int-t1-row04'),),
    'faults-row08': ((24, 'spec-int-t1-row08'),),
    'tlb-then-faults': ((12, 'spec-int-t1-row07'), (12, 'spec-int-t1-row04')),
    'faults-then-tlb': ((12, 'spec-int-t1-row08'), (12, 'spec-int-t1-row11')),
    'alternating': ((0.5, 'mcf'), (0.5, 'gcc')),
    'phases': ((24, 'phases-tlb-fault'),),
    'irregular': ((24, 'phases-irregular'),),
    'indifferent': ((24, 'spec-int-t1-row01'),),
}


@dataclasses.dataclass(frozen=True)
class Config:
    seed: int
    boot_placement: bool = True
    # False: no paging_fit either (Nova alone: the RAM weigher places
    # guests, nothing moves them), the baseline a fleet has without it.
    strategy: bool = True
    # True: a placement oracle instead of paging_fit (:func:`_oracle`),
    # the reference of what any pool placement could reach in the
    # pools' room.
    oracle: bool = False
    hosts_per_pool: int = 3
    host_vcpus: int = 16
    guest_vcpus: int = 2
    guest_memory_mib: int = 4096
    guest_disk_gb: int = 20
    images: int = 8
    projects: int = 4
    deviant: float = 0.2
    occupancy: float = 0.9
    duration_h: tuple = (4.0, 20.0)
    warmup_h: int = 24
    measured_h: int = 24
    price_sigma: float = 0.3
    price_noise: float = 0.1
    fail_p: float = 0.1
    bandwidth_share: tuple = (0.4, 1.0)
    dirty_sigma: float = 0.8


@dataclasses.dataclass
class _Guest:
    uuid: str
    image: str
    project: str
    workload: str
    arrival_h: int
    rows_time: tuple           # per mode: cumulative true seconds per row
    priced: tuple              # per mode: cumulative priced other-mode gain
    dirty_mib_s: float
    baselines: dict
    host: str = None
    started_s: float = None
    done_s: float = None
    pos: float = 0.0           # rows done (fractional)
    pause_s: float = 0.0       # migration time owed
    stint_s: float = 0.0
    stint_gain_s: float = 0.0
    last_gain_s: float = None  # the last whole hour's, on this host
    stints: list = dataclasses.field(default_factory=list)
    moves: list = dataclasses.field(default_factory=list)  # (at, to mode)


def _cumulative(values):
    out, acc = [0.0], 0.0
    for v in values:
        acc += v
        out.append(acc)
    return out


def _at(cum, pos):
    i = int(pos)
    if i >= len(cum) - 1:
        return cum[-1]
    return cum[i] + (cum[i + 1] - cum[i]) * (pos - i)


def _advance(cum, pos, seconds):
    """The row position after ``seconds`` more of ``cum``'s time from
    ``pos`` (the end when the trace is done first), and the seconds
    used."""
    start = _at(cum, pos)
    goal = start + seconds
    if goal >= cum[-1]:
        return float(len(cum) - 1), cum[-1] - start
    lo, hi = int(pos), len(cum) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cum[mid] <= goal:
            lo = mid
        else:
            hi = mid
    span = cum[lo + 1] - cum[lo]
    return lo + ((goal - cum[lo]) / span if span > 0 else 0.0), seconds


def _slice(trace, first, count):
    cols = ('interval_s', 'instructions', 'tlb_misses', 'page_faults',
            'cr3_writes', 'working_set_mib')
    return tracelib.Trace(
        name=trace.name, has_working_set=True,
        **{c: getattr(trace, c)[first:first + count] for c in cols})


class _Traces:
    """Each workload's trace over two days, built once."""

    def __init__(self):
        self.shipped = tracelib.builtin()
        self.days = {}

    def get(self, workload):
        if workload not in self.days:
            self.days[workload] = stock_fleet.day_trace(
                workload, WORKLOADS[workload], self.shipped, hours=48)
        return self.days[workload]


def _prices(hw, rng, sigma):
    """The agents' per-event prices: the truth times a factor per mode
    and event drawn once (log-normal)."""
    return {m: {e: hw.cost_s(m, e) * math.exp(rng.gauss(0.0, sigma))
                for e in EVENTS} for m in MODES}


def priced(trace, prices):
    """Per mode (MODES' order), what an agent in that mode says the other
    mode would have saved ``trace`` by each of its rows, cumulative:
    its TLB misses and page faults at ``prices`` (mode -> event ->
    seconds), no CR3 writes (as the real advisory mode)."""
    out = []
    for m in MODES:
        o = vocabulary.other_mode(m)
        dt = prices[m][EVENTS[0]] - prices[o][EVENTS[0]]
        dp = prices[m][EVENTS[1]] - prices[o][EVENTS[1]]
        out.append(_cumulative(t * dt + p * dp for t, p in zip(
            trace.tlb_misses, trace.page_faults)))
    return tuple(out)


def _guest(cfg, k, rng, traces, hw, profile, prices, images):
    image = rng.randrange(cfg.images)
    workload = images[image]
    if rng.random() < cfg.deviant:
        workload = rng.choice(sorted(WORKLOADS))
    day = traces.get(workload)
    rows_h = int(HOUR / stock_fleet.ROW_S)
    first = rng.randrange(24) * rows_h
    count = int(rng.uniform(*cfg.duration_h) * rows_h)
    trace = _slice(day, first, count)
    replay = evaluator.Replay(trace, hw)
    rows_time = tuple(_cumulative(replay.rows_time[i]) for i in range(2))
    result = evaluator.evaluate(trace, hw, profile,
                                policies=(HAP, SHADOW, vocabulary.ADAPTIVE))
    base = {p: r['time_s'] for p, r in result['policies'].items()}
    return _Guest(
        uuid='%08x-0000-4000-8000-%012x' % (cfg.seed, k),
        image='%08x-0000-4000-8000-00000000%04x' % (cfg.seed, image),
        project='%08x-0000-4000-8000-0000ffff%04x' % (
            cfg.seed, rng.randrange(cfg.projects)),
        workload=workload, arrival_h=None, rows_time=rows_time,
        priced=priced(trace, prices),
        dirty_mib_s=50.0 * math.exp(rng.gauss(0.0, cfg.dirty_sigma)
                                    - cfg.dirty_sigma ** 2 / 2),
        baselines=base)


class Placement:
    """Nova's weigher handler on real HostStates: the RAM weigher, and
    with boot placement the paging pool weigher given the fleet's
    history so far."""

    def __init__(self, on):
        from nova import objects
        from nova.scheduler import host_manager
        from nova.scheduler import weights
        from nova.scheduler.weights import ram
        from nova_adaptive_paging.scheduler.weights import paging_pool
        objects.register_all()
        self.objects, self.host_manager = objects, host_manager
        self.handler = weights.HostWeightHandler()
        self.weighers = [ram.RAMWeigher()]
        self.history = None
        if on:
            pool = paging_pool.PagingPoolWeigher()
            pool.history = boot.Cached(lambda: self.history, refresh_s=0)
            self.weighers.append(pool)

    def choose(self, g, candidates, free_mib):
        states = []
        for name in candidates:
            state = self.host_manager.HostState(name, name, 'cell')
            state.free_ram_mb = free_mib[name]
            states.append(state)
        o = self.objects
        spec = o.RequestSpec(
            flavor=o.Flavor(name='m1.adaptive',
                            extra_specs={'hw:paging': 'adaptive'}),
            image=o.ImageMeta(id=g.image, properties=o.ImageMetaProps()),
            project_id=g.project, scheduler_hints={}, instance_uuid=g.uuid)
        return self.handler.get_weighed_objects(
            self.weighers, states, spec)[0].obj.host


class Draw:
    """The seed's guests, drawn one at a time in arrival order, each from
    its own random stream, so that the k-th guest is the same whether
    boot placement is on or off (and its baselines are computed once)."""

    def __init__(self, cfg):
        rng = random.Random(cfg.seed)
        self.cfg = cfg
        self.hw = simfleet.truths()[0]
        self.profile = profiles.builtin()
        self.traces = _Traces()
        self.prices = _prices(self.hw, rng, cfg.price_sigma)
        self.images = [rng.choice(sorted(WORKLOADS))
                       for _ in range(cfg.images)]
        self.drawn = []

    def guest(self, k, arrival_h):
        while len(self.drawn) <= k:
            n = len(self.drawn)
            self.drawn.append(_guest(
                self.cfg, n, random.Random(self.cfg.seed * 1000003 + n),
                self.traces, self.hw, self.profile, self.prices,
                self.images))
        return dataclasses.replace(self.drawn[k], arrival_h=arrival_h,
                                   stints=[], moves=[])


def _next_hour_shadow_saves(g):
    """What shadow paging saves ``g`` over hap on the rows it runs next
    (those the faster mode gets through in an hour), on the true
    costs; negative when hap is faster."""
    hap, shadow = g.rows_time
    end = max(_advance(hap, g.pos, HOUR)[0], _advance(shadow, g.pos, HOUR)[0])
    return ((_at(hap, end) - _at(hap, g.pos))
            - (_at(shadow, end) - _at(shadow, g.pos)))


def _oracle(running, pools, slots):
    """The moves (uuid, destination, mode) of a placement oracle: every
    hour each running guest goes to the pool that runs its next hour
    faster on the true costs, within each pool's slots; the shadow
    pool's to those it saves most, those hap suits best first to the
    hap pool's.  It knows what no agent knows (the next hour, the true
    costs) and its moves are free and never fail: a reference of what
    any pool placement could reach in the pools' room, not a bound
    (an hour at a time, and guests boot where the weighers put them)."""
    cap = {m: slots * sum(1 for p in pools.values() if p == m)
           for m in MODES}
    order = sorted(running, key=lambda g: (-_next_hour_shadow_saves(g),
                                           g.uuid))
    n_shadow = min(cap[SHADOW], sum(1 for g in order
                                    if _next_hour_shadow_saves(g) > 0))
    n_shadow = max(n_shadow, len(order) - cap[HAP])
    want = {g.uuid: SHADOW if i < n_shadow else HAP
            for i, g in enumerate(order)}
    used = dict.fromkeys(pools, 0)
    for g in running:
        used[g.host] += pools[g.host] == want[g.uuid]
    moves = []
    for g in running:
        mode = want[g.uuid]
        if pools[g.host] != mode:
            dest = min((n for n in sorted(pools)
                        if pools[n] == mode and used[n] < slots),
                       key=lambda n: used[n])
            used[dest] += 1
            moves.append((g.uuid, dest, mode))
    return moves


def run(cfg, drawn=None, log=None):
    """One seed's day: a dict of figures (MODELED).  ``drawn``: a
    :class:`Draw` of the seed, to share between runs."""
    log = log or (lambda text: None)
    drawn = drawn or Draw(cfg)
    rng = random.Random(cfg.seed * 7919 + 2)       # the agents' noise
    pools = {'%s-%d' % (m, i + 1): m for m in MODES
             for i in range(cfg.hosts_per_pool)}
    slots = cfg.host_vcpus // cfg.guest_vcpus
    target = int(cfg.occupancy * slots * len(pools))
    end_h = cfg.warmup_h + cfg.measured_h
    outcome = random.Random(cfg.seed * 7919 + 1)   # migrations' fate
    guests = []
    place = Placement(cfg.boot_placement)
    link = migration.Link()
    params = planner.Params() if cfg.strategy else planner.Params(
        budget=0)
    waiting, running = [], []
    counts = dict(boots=0, boots_waited=0, moves=0, moves_failed=0,
                  no_room=0, boots_with_a_pool_full=0,
                  booted_in=dict.fromkeys(MODES, 0),
                  measured_in_right_pool_at_boot=0)
    h = 0
    while True:
        now = h * HOUR
        if h < end_h:
            # New guests keep the fleet at its occupancy.
            for _ in range(target - len(running) - len(waiting)):
                g = drawn.guest(len(guests), h)
                guests.append(g)
                waiting.append(g)
        if h >= end_h and not waiting and not any(
                g.arrival_h >= cfg.warmup_h and g.done_s is None
                for g in guests):
            break
        # Boots, in arrival order, each where the weighers put it.
        used = {name: sum(1 for g in running if g.host == name)
                for name in pools}
        place.history = boot.History(
            [boot.Stint(g.uuid, g.image, g.project, m, s, gain)
             for g in guests for (m, s, gain) in g.stints + (
                 [(pools[g.host], g.stint_s, g.stint_gain_s)]
                 if g.host and g.done_s is None and g.stint_s > 0 else [])],
            dict(pools), {})
        still = []
        for g in waiting:
            free = [n for n in sorted(pools) if used[n] < slots]
            if {pools[n] for n in free} != set(MODES):
                counts['boots_with_a_pool_full'] += 1
            if not free:
                still.append(g)
                counts['boots_waited'] += 1
                continue
            name = place.choose(g, free, {
                n: (slots - used[n]) * cfg.guest_memory_mib for n in free})
            used[name] += 1
            g.host, g.started_s = name, now
            running.append(g)
            counts['boots'] += 1
            counts['booted_in'][pools[name]] += 1
            if g.arrival_h >= cfg.warmup_h:
                b = g.baselines
                best = HAP if b[HAP] <= b[SHADOW] else SHADOW
                counts['measured_in_right_pool_at_boot'] += (
                    pools[name] == best)
        waiting = still
        # An hour of work, in each host's mode.
        for g in running:
            m = MODES.index(pools[g.host])
            wall = HOUR - min(g.pause_s, HOUR)
            g.pause_s = max(0.0, g.pause_s - HOUR)
            pos, spent = _advance(g.rows_time[m], g.pos, wall)
            gain = _at(g.priced[m], pos) - _at(g.priced[m], g.pos)
            gain *= 1.0 + rng.gauss(0.0, cfg.price_noise)
            g.pos = pos
            # Guests move only between hours: the whole hour was on this
            # host, and its agent has a window's figures once the guest
            # has been there an hour.
            g.stint_s += spent + (HOUR - wall)
            g.stint_gain_s += gain
            g.last_gain_s = gain if g.stint_s >= HOUR - 1e-6 else None
            if pos >= len(g.rows_time[m]) - 1:
                g.done_s = now + (HOUR - wall) + spent
        for g in [g for g in running if g.done_s is not None]:
            g.stints.append((pools[g.host], g.stint_s, g.stint_gain_s))
        running = [g for g in running if g.done_s is None]
        # The audit at the end of the hour.
        at = now + HOUR
        vcpus = {n: cfg.host_vcpus - cfg.guest_vcpus * sum(
            1 for g in running if g.host == n) for n in pools}
        hosts = [planner.Host(n, pools[n], vcpus[n],
                              vcpus[n] // cfg.guest_vcpus
                              * cfg.guest_memory_mib, 10000)
                 for n in sorted(pools)]
        pguests = [planner.Guest(
            g.uuid, g.host, vocabulary.ADAPTIVE, cfg.guest_vcpus,
            cfg.guest_memory_mib, cfg.guest_disk_gb,
            observed_s=g.stint_s, window_gain_s=g.last_gain_s,
            moves=tuple((at - t, m) for t, m in g.moves if at - t <= 86400))
            for g in running]
        if cfg.oracle:
            moves = _oracle(running, pools, slots)
        else:
            plan = planner.plan(pguests, hosts, params, link)
            counts['no_room'] += len(plan.held(planner.NO_ROOM))
            moves = [(m.guest.uuid, m.destination, m.to_mode)
                     for m in plan.moves]
        by_uuid = {g.uuid: g for g in running}
        for uuid, destination, to_mode in moves:
            g = by_uuid[uuid]
            if cfg.oracle:          # free, and it never fails
                g.stints.append((pools[g.host], g.stint_s, g.stint_gain_s))
                g.host = destination
                g.stint_s = g.stint_gain_s = 0.0
                g.last_gain_s = None
                g.moves.append((at, to_mode))
                counts['moves'] += 1
                continue
            true_link = migration.Link(
                bandwidth_mib_s=link.bandwidth_mib_s * outcome.uniform(
                    *cfg.bandwidth_share))
            est = migration.estimate(cfg.guest_memory_mib, g.dirty_mib_s,
                                     true_link)
            failed = outcome.random() < cfg.fail_p or not est.converges
            if failed:
                counts['moves_failed'] += 1
                g.pause_s += 0.5 * (est.guest_s if est.converges else (
                    link.slowdown * 10 * cfg.guest_memory_mib
                    / true_link.bandwidth_mib_s))
                continue
            counts['moves'] += 1
            g.pause_s += est.guest_s
            g.stints.append((pools[g.host], g.stint_s, g.stint_gain_s))
            g.host = destination
            g.stint_s = g.stint_gain_s = 0.0
            g.last_gain_s = None
            g.moves.append((at, to_mode))
        log('hour %d: %d running, %d waiting, %d moves' % (
            h, len(running), len(waiting), len(moves)))
        h += 1
    measured = [g for g in guests if g.arrival_h >= cfg.warmup_h]
    fleet = {p: math.fsum(g.baselines[p] for g in measured)
             for p in (HAP, SHADOW, vocabulary.ADAPTIVE)}
    fleet['best_static_per_guest'] = math.fsum(
        min(g.baselines[HAP], g.baselines[SHADOW]) for g in measured)
    fleet['fleet'] = math.fsum(g.done_s - g.started_s for g in measured)
    return {'seed': cfg.seed, 'boot_placement': cfg.boot_placement,
            'strategy': cfg.strategy, 'oracle': cfg.oracle,
            'guests': len(guests), 'measured_guests': len(measured),
            'capacity_guests': 2 * cfg.hosts_per_pool * slots,
            'fleet': fleet, 'counts': counts,
            'per_guest': [dict(uuid=g.uuid, workload=g.workload,
                               time_s=g.done_s - g.started_s,
                               moves=len(g.moves), **g.baselines)
                          for g in measured],
            'shares': stock_fleet.shares(fleet),
            'modeled': True}
