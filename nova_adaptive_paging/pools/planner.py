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
   host it arrived on started over: its figures are of this pool only);
3. over the last ``window_s`` the other mode would have saved it at
   least ``margin`` times the migration's cost (evidence, not a
   forecast: the move is paid for by a loss already measured);
4. at that rate, the gain over ``horizon_s`` is also ``margin`` times the
   cost;
5. a host of the other pool has room for it (vCPUs, memory, disk, after
   the moves planned before it), and the audit's ``budget`` of moves is
   not spent (the most profitable moves go first).

No ping-pong, by construction: between two moves of a guest lie at least
``cooldown_s`` (>= ``window_s``), and before each move the guest has
lost, in the pool it leaves, at least ``margin`` times what the move
costs.  So the migrations of a guest never cost more than 1/``margin``
of the modeled time it lost to being in the wrong pool, however its
behaviour alternates; and no audit moves more than ``budget`` guests.
"""

import dataclasses

from nova_adaptive_paging import exception
from nova_adaptive_paging import vocabulary
from nova_adaptive_paging.costmodel import migration


class PoolFitError(exception.Error, ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Params:
    horizon_s: float = 6 * 3600.0
    window_s: float = 3600.0
    cooldown_s: float = 2 * 3600.0
    margin: float = 2.0
    budget: int = 5
    # The guest's dirty rate when nothing better is known.
    dirty_mib_s: float = 50.0

    def __post_init__(self):
        for name, low, high in (('horizon_s', 60.0, 30 * 86400.0),
                                ('window_s', 60.0, 7 * 86400.0),
                                ('cooldown_s', 60.0, 30 * 86400.0),
                                ('margin', 1.0, 1000.0),
                                ('budget', 0, 10000),
                                ('dirty_mib_s', 0.0, 1e6)):
            value = getattr(self, name)
            if (isinstance(value, bool)
                    or not isinstance(value, (int, float))
                    or not low <= value <= high):
                raise PoolFitError('%s: %r: expected a number from %g to '
                                   '%g' % (name, value, low, high))
        if self.cooldown_s < self.window_s:
            raise PoolFitError('cooldown_s: %r: expected at least window_s '
                               '(%r), so that a window covers one pool only'
                               % (self.cooldown_s, self.window_s))
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


@dataclasses.dataclass(frozen=True)
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
    guest: Guest
    reason: str


@dataclasses.dataclass
class Plan:
    moves: list
    holds: list

    def held(self, kind):
        return [h for h in self.holds if h.reason.startswith(kind)]


# Reasons start with one of these words (the audit's log says the rest).
STATIC, NO_POOL, NO_FIGURES, COOLDOWN, NOT_WORTH, NO_END, NO_ROOM, \
    BUDGET = ('static', 'no-pool', 'no-figures', 'cool-down',
              'not-worth-it', 'no-end', 'no-room', 'budget')


def plan(guests, hosts, params=Params(), link=migration.Link()):
    """The :class:`Plan` for ``guests`` (Guest) on ``hosts`` (Host)."""
    by_name = {h.name: h for h in hosts}
    room = {h.name: [h.free_vcpus, h.free_memory_mib, h.free_disk_gb]
            for h in hosts if h.enabled and h.pool}
    holds, candidates = [], []
    for g in guests:
        host = by_name.get(g.host)
        if g.policy != vocabulary.ADAPTIVE:
            holds.append(Hold(g, '%s: hw:paging=%s is not adaptive: never '
                              'moved for paging'
                              % (STATIC, g.policy or 'unset')))
        elif host is None or host.pool not in vocabulary.MODES:
            holds.append(Hold(g, '%s: host %s reports no paging pool (no '
                              'agent figures of its mode)'
                              % (NO_POOL, g.host)))
        elif g.observed_s is None:
            holds.append(Hold(g, '%s: no modeled gain for it from %s\'s '
                              'agent' % (NO_FIGURES, g.host)))
        elif g.observed_s < params.cooldown_s:
            holds.append(Hold(g, '%s: %.0f s in the %s pool, %.0f s needed'
                              % (COOLDOWN, g.observed_s, host.pool,
                                 params.cooldown_s)))
        elif g.window_gain_s is None:
            holds.append(Hold(g, '%s: %s\'s agent has no figures of it for '
                              'the whole last %.0f s' % (
                                  NO_FIGURES, g.host, params.window_s)))
        else:
            est = migration.estimate(
                g.memory_mib, params.dirty_mib_s if g.dirty_mib_s is None
                else g.dirty_mib_s, link)
            gain = g.window_gain_s * params.horizon_s / params.window_s
            if not est.converges:
                holds.append(Hold(g, '%s: a live migration of %d MiB would '
                                  'not converge' % (NO_END, g.memory_mib)))
            elif (g.window_gain_s < params.margin * est.guest_s
                  or gain < params.margin * est.guest_s):
                holds.append(Hold(g, '%s: %s would have saved %.1f s in '
                                  'the last %.0f s, %.1f s over the '
                                  'horizon; the move costs %.1f s (x%g '
                                  'needed)' % (
                                      NOT_WORTH,
                                      vocabulary.other_mode(host.pool),
                                      g.window_gain_s, params.window_s, gain,
                                      est.guest_s, params.margin)))
            else:
                candidates.append((gain - est.guest_s, g, host, gain,
                                   est.guest_s))
    moves = []
    candidates.sort(key=lambda c: (-c[0], c[1].uuid))
    for _, g, host, gain, cost in candidates:
        if len(moves) >= params.budget:
            holds.append(Hold(g, '%s: this audit already moves %d guests'
                              % (BUDGET, len(moves))))
            continue
        to_mode = vocabulary.other_mode(host.pool)
        need = (g.vcpus, g.memory_mib, g.disk_gb)
        fits = [name for name, free in sorted(room.items())
                if by_name[name].pool == to_mode
                and all(f >= n for f, n in zip(free, need))]
        if not fits:
            holds.append(Hold(g, '%s: no enabled host of the %s pool has '
                              'room for %d vCPUs, %d MiB'
                              % (NO_ROOM, to_mode, g.vcpus, g.memory_mib)))
            continue
        # The roomiest host: moves of one audit spread out.
        dest = max(fits, key=lambda n: (room[n][1], room[n][0], n))
        room[dest] = [f - n for f, n in zip(room[dest], need)]
        if g.host in room:              # what it leaves, others may take
            room[g.host] = [f + n for f, n in zip(room[g.host], need)]
        moves.append(Move(g, g.host, dest, to_mode, gain, cost))
    return Plan(moves, holds)
