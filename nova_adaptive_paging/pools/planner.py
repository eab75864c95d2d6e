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

"""Which guests to move between the hap and the shadow pool of a fleet
of stock kernels, and where (the decision behind the fleet strategy,
:mod:`nova_adaptive_paging.watcher`; every figure is MODELED).

A guest with ``hw:paging=adaptive`` on a host that cannot switch runs in
the host's mode; its agent models, from the guest's own counters, what
the other mode would have saved (``advisory.Advisor.other_s``).  A move
to the other pool pays when what the guest would gain there outweighs
the live migration's cost (:mod:`nova_adaptive_paging.costmodel.
migration`).  A guest is proposed for a move when all of these hold:

1. its flavor asks for ``adaptive`` (a static ``hw:paging`` is never
   moved for paging reasons), it runs in a pool, and its host's agent
   has modeled it;
2. it has been in its pool for at least ``cooldown_s`` (the agent of the
   host it arrived on started over: its figures are of this pool only),
   or for ``window_s`` if it has not moved within the day (a guest that
   booted in the wrong pool: no move of its can be undone too soon);
3. over the last ``window_s`` the other mode would have saved it at
   least ``margin`` times the migration's cost (evidence, not a
   forecast: the move is paid for by a loss already measured);
4. at that rate, the gain over ``horizon_s`` is also ``margin`` times the
   cost;
5. a host of the other pool has room for it (vCPUs, memory, disk, after
   the moves planned before it), and the audit's ``budget`` of moves is
   not spent (the most profitable moves go first).

Against a guest whose behaviour turns against every move (ping-pong):
between two moves of a guest lie at least ``cooldown_s`` (>= ``window_s``;
its first move of the day needs one ``window_s`` in its pool),
and before each move it has lost, in the pool it leaves, at least
``margin`` times what the move costs, so its migrations never cost more
than 1/``margin`` of the modeled time it lost in the wrong pool.  A move
decided within ``reversal_cooldown_s`` of the end of its previous move,
which it undoes, is a reversal, followed by ``reversal_cooldown_s``
before the next (both ``cooldown_s`` + two audit intervals if longer,
under audits of a known interval: :func:`reversal_s`); no
guest moves more than ``moves_per_day`` times in any 24 h; and a guest
that moved less within the day goes first for the audit's ``budget``
(its fair share), so guests that keep flipping cannot starve the others.
Time lost, against staying put: each trip away and back costs at most
(``cooldown_s`` + an audit interval) of the guest's loss rate, which is
at most its vCPUs, plus two migrations; trips start at most once every
``cooldown_s`` + ``reversal_cooldown_s`` (the first after ``window_s``),
and at most (``moves_per_day`` + 1) // 2 start in any 24 h (a trip
starts only with fewer than ``moves_per_day`` moves in the last 24 h,
two for each trip before it).  doc/source/stock-fleet.rst states the
figures and what they assume (the audits' interval known, or audits
often enough that the way back is a reversal; the way back held by
neither the budget nor the cap; the guest's moves known).

Safe interleavings: a departure's room is not offered to an arrival of
the same audit (Watcher's applier runs a plan's migrations in parallel),
and moves already planned or under way (``pending``) hold their room on
their destination, once per guest however many sources report them,
and keep their guest where it is.

Figures are bounded by what is possible: a window's gain or loss of more
than vCPUs x the window, or a figure that is not a finite number, is
dropped (the guest stays, counted under ``bad-figures``).
"""

import dataclasses
import math

from nova_adaptive_paging import exception
from nova_adaptive_paging import vocabulary
from nova_adaptive_paging.costmodel import migration


class PoolFitError(exception.Error, ValueError):
    pass


# Every audit parameter of the decision: (default, lowest, highest).  The
# one table: Params checks it and the Watcher strategy's schema
# publishes it, so Watcher refuses a bad value when the audit is created.
BOUNDS = {
    'horizon_s': (6 * 3600.0, 60.0, 30 * 86400.0),
    'window_s': (3600.0, 60.0, 7 * 86400.0),
    'cooldown_s': (2 * 3600.0, 60.0, 30 * 86400.0),
    # 4 h: set on the modeled day's seeds 100 to 111 (2 to 12 h tried;
    # doc/source/stock-fleet.rst).  With the daily cap it bounds what a
    # guest that turns against every move loses (the module's bound).
    'reversal_cooldown_s': (4 * 3600.0, 60.0, 30 * 86400.0),
    'margin': (2.0, 1.0, 1000.0),
    'budget': (5, 0, 10000),
    'moves_per_day': (4, 1, 48),
    # 1: a full pool's place goes to whoever gains most from it (a guest
    # it suits least moves out so that one it suits more can move in).
    'make_room': (1, 0, 1),
    # The guest's dirty rate when nothing better is known.
    'dirty_mib_s': (50.0, 0.0, 1e6),
}
DAY_S = 86400.0


def check_bounds(obj, bounds, error):
    """Raise ``error`` naming the first field of ``obj`` outside
    ``bounds`` (name -> (default, low, high))."""
    for name, (_, low, high) in bounds.items():
        value = getattr(obj, name)
        if (isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not low <= value <= high
                or (isinstance(low, int) and not isinstance(value, int))):
            raise error('%s: %r: expected a%s from %g to %g' % (
                name, value, 'n integer' if isinstance(low, int)
                else ' number', low, high))


@dataclasses.dataclass(frozen=True)
class Params:
    horizon_s: float = BOUNDS['horizon_s'][0]
    window_s: float = BOUNDS['window_s'][0]
    cooldown_s: float = BOUNDS['cooldown_s'][0]
    reversal_cooldown_s: float = BOUNDS['reversal_cooldown_s'][0]
    margin: float = BOUNDS['margin'][0]
    budget: int = BOUNDS['budget'][0]
    moves_per_day: int = BOUNDS['moves_per_day'][0]
    make_room: int = BOUNDS['make_room'][0]
    dirty_mib_s: float = BOUNDS['dirty_mib_s'][0]
    # Not an audit parameter but the audit's own cadence, when it has one
    # (a continuous audit; 0: none known): seconds between two audits.
    audit_interval_s: float = 0.0

    def __post_init__(self):
        check_bounds(self, BOUNDS, PoolFitError)
        every = self.audit_interval_s
        if (isinstance(every, bool) or not isinstance(every, (int, float))
                or not math.isfinite(every) or every < 0):
            raise PoolFitError('audit_interval_s: %r: expected a number of '
                               'seconds >= 0' % (self.audit_interval_s,))
        if self.cooldown_s < self.window_s:
            raise PoolFitError('cooldown_s: %r: expected at least window_s '
                               '(%r), so that a window covers one pool only'
                               % (self.cooldown_s, self.window_s))
        if self.reversal_cooldown_s < self.cooldown_s:
            raise PoolFitError('reversal_cooldown_s: %r: expected at least '
                               'cooldown_s (%r)' % (self.reversal_cooldown_s,
                                                    self.cooldown_s))
        if self.horizon_s < self.window_s:
            raise PoolFitError('horizon_s: %r: expected at least window_s '
                               '(%r)' % (self.horizon_s, self.window_s))


@dataclasses.dataclass(frozen=True)
class Host:
    name: str
    pool: str               # vocabulary.HAP or SHADOW; None: no pool
    free_vcpus: float
    free_memory_mib: float
    free_disk_gb: float
    enabled: bool = True


# Not frozen: a frozen dataclass sets each field through object.__setattr__,
# and an audit builds one Guest per instance of the fleet (40,000 in
# bench/bench_strategy.py: 0.13 s of its second).  Nothing changes one.
@dataclasses.dataclass(slots=True)
class Guest:
    uuid: str
    host: str
    policy: str             # its flavor's hw:paging ('' if none)
    vcpus: int
    memory_mib: int
    disk_gb: int
    # From its host's agent (None: no figures): seconds in this pool, and
    # the seconds the other mode would have saved over the last window.
    observed_s: float = None
    window_gain_s: float = None
    dirty_mib_s: float = None
    # Its moves of the last 24 h, oldest first: (seconds since it ended,
    # to mode[, seconds since it was decided]), from Watcher's action
    # history; None: not known (it waits cooldown_s in its pool, as after
    # a move).  Without the third, a move was decided when it ended.
    moves: tuple = None


@dataclasses.dataclass(frozen=True)
class Pending:
    """A move already planned (an action plan not yet applied) or under
    way: its room on ``destination`` is taken.  ``need`` is (vCPUs, MiB,
    GB), None when unknown (the destination then takes no arrival)."""
    uuid: str
    source: str
    destination: str
    need: tuple = None


@dataclasses.dataclass(frozen=True)
class Move:
    guest: Guest
    source: str
    destination: str
    to_mode: str
    horizon_gain_s: float
    cost_s: float


@dataclasses.dataclass(frozen=True)
class Hold:
    """Why ``guest`` stays: ``kind`` (one of the words below), and the
    rest, ``detail % args``, formatted only when asked for (an audit of
    40,000 guests holds nearly all of them)."""
    guest: Guest
    kind: str
    detail: str = ''
    args: tuple = ()

    @property
    def reason(self):
        return '%s: %s' % (self.kind, self.detail % self.args
                           if self.args else self.detail)


@dataclasses.dataclass
class Plan:
    moves: list
    holds: list

    def held(self, kind):
        return [h for h in self.holds if h.kind == kind]


# Reasons start with one of these words (the audit's log says the rest).
STATIC, NO_POOL, NO_FIGURES, BAD_FIGURES, IN_FLIGHT, COOLDOWN, \
    DAY_CAP, NOT_WORTH, NO_END, NO_ROOM, BUDGET = (
        'static', 'no-pool', 'no-figures', 'bad-figures', 'in-flight',
        'cool-down', 'day-cap', 'not-worth-it', 'no-end', 'no-room',
        'budget')


def _impossible(g, params):
    """Why ``g``'s figures cannot be true, or None: a gain or loss in a
    window is at most the guest's vCPUs x the window (all of its time)."""
    limit = max(g.vcpus, 1) * params.window_s
    if not (isinstance(g.observed_s, (int, float))
            and math.isfinite(g.observed_s) and g.observed_s >= 0):
        return 'observed %r s' % (g.observed_s,)
    if g.window_gain_s is not None and not (
            math.isfinite(g.window_gain_s)
            and abs(g.window_gain_s) <= limit):
        return ('%r s gained in %.0f s by %d vCPUs (at most %.0f)' % (
            g.window_gain_s, params.window_s, g.vcpus, limit))
    return None


def reversal_s(params):
    """How soon after the move before it a move must be decided to be a
    reversal, and how long the guest then stays: ``reversal_cooldown_s``,
    or, under audits of a known cadence, ``cooldown_s`` + two audit
    intervals if longer.  A way back decided at the first audit that
    could (``cooldown_s`` and at most an interval after the move away
    ended; one interval of slack for Watcher's scheduling) is then a
    reversal however far apart the audits are, and the move after a
    reversal's stay, decided later than that, never is."""
    return max(params.reversal_cooldown_s,
               params.cooldown_s + 2 * params.audit_interval_s)


def _cooldown(g, params):
    """Seconds ``g`` has been in its pool, and the cool-down it needs:
    :func:`reversal_s` after a move that undid the one before it and
    was decided within that time of that one's end (a reversal: the
    earlier move was wrong, or the guest turns against its moves).  The
    move that takes a guest away after a long stay gets the plain
    cool-down, so that a wrong move is undone soon and a right one is
    not repeated soon.  A guest known to have no move within the day (it
    booted where it is, or came a day ago or more) needs one window
    only: there is no move of its to undo, and a window's figures are of
    this pool alone.  One whose moves are not known waits
    ``cooldown_s``."""
    since = g.observed_s
    if g.moves is None:
        return since, params.cooldown_s, False
    if not g.moves:
        return since, params.window_s, False
    last = g.moves[-1]
    since = min(since, last[0])
    hold_s = reversal_s(params)
    reversed_ = (len(g.moves) >= 2 and last[1] != g.moves[-2][1]
                 and g.moves[-2][0] - (last[2] if len(last) > 2
                                       else last[0]) < hold_s)
    return since, hold_s if reversed_ else params.cooldown_s, reversed_


def plan(guests, hosts, params=Params(), link=migration.Link(),
         pending=()):
    """The :class:`Plan` for ``guests`` (Guest) on ``hosts`` (Host), with
    ``pending`` (Pending) moves of other plans holding their room (a
    guest's once: the last of its given)."""
    by_name = {h.name: h for h in hosts}
    room = {h.name: [h.free_vcpus, h.free_memory_mib, h.free_disk_gb]
            for h in hosts if h.enabled and h.pool}
    where = {g.uuid: g.host for g in guests}
    # One guest, one move in flight, one room taken: a move may be given
    # twice (Watcher's database and the decision engine's reservations
    # both hold it for a while after its plan is saved), and the later
    # one given of a guest stands for it.
    in_flight = {}
    for p in pending:
        if where.get(p.uuid) == p.destination or p.destination not in room:
            continue                # landed (the model shows it) or moot
        in_flight[p.uuid] = p
    for p in in_flight.values():
        if p.need is None:          # its size unknown: the host is closed
            room[p.destination] = [-math.inf] * 3
        else:
            room[p.destination] = [f - n for f, n in zip(
                room[p.destination], p.need)]
    holds, candidates = [], []
    estimates = {}          # (MiB, MiB/s) -> Estimate: guests share sizes
    # Guests free to move that their pool's move would not pay for, by
    # pool: who may make room there.
    stayers = {}
    for g in guests:
        host = by_name.get(g.host)
        since = wait = bad = None
        today = [m for m in g.moves or () if m[0] <= DAY_S]
        if g.policy == vocabulary.ADAPTIVE and g.observed_s is not None:
            bad = _impossible(g, params)
            if bad is None:
                since, wait, reversed_ = _cooldown(g, params)
        if g.policy != vocabulary.ADAPTIVE:
            holds.append(Hold(g, STATIC, 'hw:paging=%s is not adaptive: '
                              'never moved for paging',
                              (g.policy or 'unset',)))
        elif host is None or host.pool not in vocabulary.MODES:
            holds.append(Hold(g, NO_POOL, 'host %s reports no paging pool '
                              '(no agent figures of its mode)', (g.host,)))
        elif g.observed_s is None:
            holds.append(Hold(g, NO_FIGURES, 'no modeled gain for it from '
                              '%s\'s agent', (g.host,)))
        elif bad is not None:
            holds.append(Hold(g, BAD_FIGURES, 'dropped, %s', (bad,)))
        elif g.uuid in in_flight:
            holds.append(Hold(g, IN_FLIGHT, 'a planned move to %s is not '
                              'done', (in_flight[g.uuid].destination,)))
        elif since < wait:
            holds.append(Hold(g, COOLDOWN, '%.0f s in the %s pool, %.0f s '
                              'needed%s', (since, host.pool, wait,
                                           ' (it came back: a reversal)'
                                           if reversed_ else '')))
        elif len(today) >= params.moves_per_day:
            holds.append(Hold(g, DAY_CAP, '%d moves in the last 24 h',
                              (len(today),)))
        elif g.window_gain_s is None:
            holds.append(Hold(g, NO_FIGURES, '%s\'s agent has no figures '
                              'of it for the whole last %.0f s',
                              (g.host, params.window_s)))
        else:
            size = (g.memory_mib, params.dirty_mib_s if g.dirty_mib_s
                    is None else g.dirty_mib_s)
            est = estimates.get(size)
            if est is None:
                est = estimates[size] = migration.estimate(*size, link)
            gain = g.window_gain_s * params.horizon_s / params.window_s
            if not est.converges:
                holds.append(Hold(g, NO_END, 'a live migration of %d MiB '
                                  'would not converge', (g.memory_mib,)))
            elif (g.window_gain_s < params.margin * est.guest_s
                  or gain < params.margin * est.guest_s):
                stayers.setdefault(host.pool, []).append((g, est.guest_s))
                holds.append(Hold(g, NOT_WORTH, '%s would have saved %.1f '
                                  's in the last %.0f s, %.1f s over the '
                                  'horizon; the move costs %.1f s (x%g '
                                  'needed)', (
                                      vocabulary.other_mode(host.pool),
                                      g.window_gain_s, params.window_s, gain,
                                      est.guest_s, params.margin)))
            else:
                candidates.append((len(today), gain - est.guest_s, g,
                                   host, gain, est.guest_s))
    moves, held_for_room = [], []
    # A fair share: who moved less today goes first, then the most
    # profitable.
    candidates.sort(key=lambda c: (c[0], -c[1], c[2].uuid))
    for _, _, g, host, gain, cost in candidates:
        if len(moves) >= params.budget:
            holds.append(Hold(g, BUDGET, 'this audit already moves %d '
                              'guests', (len(moves),)))
            continue
        to_mode = vocabulary.other_mode(host.pool)
        need = (g.vcpus, g.memory_mib, g.disk_gb)
        fits = [name for name, free in sorted(room.items())
                if by_name[name].pool == to_mode
                and all(f >= n for f, n in zip(free, need))]
        if not fits:
            held_for_room.append((g, host, to_mode, cost))
            continue
        # The roomiest host: moves of one audit spread out.
        dest = max(fits, key=lambda n: (room[n][1], room[n][0], n))
        # What it leaves is not offered to this audit's arrivals:
        # Watcher's applier runs the plan's migrations in parallel.
        room[dest] = [f - n for f, n in zip(room[dest], need)]
        moves.append(Move(g, g.host, dest, to_mode, gain, cost))
    _make_room(held_for_room, stayers, room, by_name, moves, holds, params)
    return Plan(moves, holds)


def _make_room(wanting, stayers, room, by_name, moves, holds, params):
    """A full pool's place to whoever gains most from it.  For each guest
    Y held because the pool it wants is full (in the fair order), the
    guest X of that pool that the pool suits least (the other mode would
    save it the most, or cost it the least) moves out to Y's pool now,
    and Y follows at a later audit into the room X left, when what Y
    would save over the window, less what X would lose, is ``margin``
    times both migrations (and over the horizon too).  X's move is paid
    for by the pair, not by X: it counts in X's daily cap and cool-down
    like any move, and X's way back is a reversal."""
    if not wanting:
        return
    scale = params.horizon_s / params.window_s
    for pool in stayers:
        # Who the pool suits least first.
        stayers[pool].sort(key=lambda s: (-s[0].window_gain_s, s[0].uuid))
    for g, host, to_mode, cost in wanting:
        why = ('no enabled host of the %s pool has room for %d vCPUs, '
               '%d MiB', (to_mode, g.vcpus, g.memory_mib))
        candidates = stayers.get(to_mode) if params.make_room else None
        if candidates and len(moves) < params.budget:
            x, x_cost = candidates[0]
            net = g.window_gain_s + x.window_gain_s
            need = (x.vcpus, x.memory_mib, x.disk_gb)
            fits = [n for n, free in sorted(room.items())
                    if by_name[n].pool == host.pool
                    and all(f >= q for f, q in zip(free, need))]
            if (fits and net >= params.margin * (cost + x_cost)
                    and net * scale >= params.margin * (cost + x_cost)):
                candidates.pop(0)
                dest = max(fits, key=lambda n: (room[n][1], room[n][0], n))
                room[dest] = [f - q for f, q in zip(room[dest], need)]
                moves.append(Move(x, x.host, dest, host.pool,
                                  x.window_gain_s * scale, x_cost))
                holds[:] = [h for h in holds if h.guest is not x]
                why = ('the %s pool is full: %s moves out to make room '
                       '(%.1f s gained in the last %.0f s by the pair, '
                       'for %.1f s of migrations)', (
                           to_mode, x.uuid, net, params.window_s,
                           cost + x_cost))
        holds.append(Hold(g, NO_ROOM, *why))
