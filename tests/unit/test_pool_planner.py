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

"""The fleet strategy's decision (pools.planner) and the live-migration
model it prices moves with (the Watcher strategy that calls them:
test_watcher_strategy.py)."""

import math
import uuid as uuidlib

import pytest


from nova_adaptive_paging.costmodel import migration
from nova_adaptive_paging.pools import planner

HOUR = 3600.0


# -- the migration model ---------------------------------------------------
def test_a_guest_that_dirties_nothing_is_copied_once():
    # 4 GiB at 1,100 MiB/s: the copy, then a last round of nothing.
    est = migration.estimate(4096, 0)
    assert est.copy_s == pytest.approx(4096 / 1100)
    assert est.downtime_s == 0 and est.converges
    assert est.guest_s == pytest.approx(0.1 * 4096 / 1100)


def test_pre_copy_rounds_shrink_geometrically():
    # Each round sends what the previous one's duration dirtied: with a
    # dirty rate of a quarter of the bandwidth, 1/4, 1/16, ... of memory.
    link = migration.Link(bandwidth_mib_s=1000, max_downtime_s=0.01)
    est = migration.estimate(1000, 250, link)
    sent = sum(1000 * 0.25 ** k for k in range(est.rounds - 1))
    assert est.copy_s == pytest.approx(sent / 1000)
    assert est.downtime_s <= 0.01


def test_a_guest_dirtying_faster_than_the_link_never_moves():
    est = migration.estimate(8192, 1200)
    assert not est.converges and math.isinf(est.guest_s)


@pytest.mark.parametrize('field, value', [
    ('bandwidth_mib_s', 0), ('max_downtime_s', -1), ('slowdown', 2),
    ('max_rounds', 0), ('slowdown', True)])
def test_a_bad_link_is_one_line_naming_it(field, value):
    with pytest.raises(migration.MigrationError) as err:
        migration.Link(**{field: value})
    assert str(err.value).startswith(field) and '\n' not in str(err.value)


# -- the decision ------------------------------------------------------------
def host(name, pool, vcpus=64, memory=256 * 1024, disk=2000):
    return planner.Host(name, pool, vcpus, memory, disk)


def guest(host_name, gain_per_hour, observed_h=10, policy='adaptive',
          memory=4096, uid=None):
    return planner.Guest(uid or str(uuidlib.uuid4()), host_name, policy,
                         2, memory, 20, observed_s=observed_h * HOUR,
                         window_gain_s=gain_per_hour, dirty_mib_s=50)


HOSTS = [host('hap-1', 'hap'), host('shadow-1', 'shadow')]


def test_a_guest_losing_to_its_pool_moves_to_the_other():
    g = guest('hap-1', gain_per_hour=120)
    result = planner.plan([g], HOSTS)
    (move,) = result.moves
    assert (move.source, move.destination, move.to_mode) == (
        'hap-1', 'shadow-1', 'shadow')
    assert move.horizon_gain_s == pytest.approx(120 * 6)


def test_a_gain_that_does_not_pay_for_the_migration_stays():
    # 4 GiB dirtying 50 MiB/s costs about 0.4 s of guest time (modeled);
    # 0.5 s an hour is under twice that.
    g = guest('hap-1', gain_per_hour=0.5)
    result = planner.plan([g], HOSTS)
    assert not result.moves
    assert result.held(planner.NOT_WORTH)[0].guest is g


def test_a_full_pool_takes_no_one():
    full = [host('hap-1', 'hap'), host('shadow-1', 'shadow', memory=1024)]
    result = planner.plan([guest('hap-1', 120)], full)
    assert not result.moves and result.held(planner.NO_ROOM)


def test_a_guest_in_cool_down_stays():
    # It arrived by a move an hour ago: cooldown_s (2 h) is not over.
    moved = guest('hap-1', 120, observed_h=1)
    moved.moves = ((HOUR, 'hap'),)
    result = planner.plan([moved], HOSTS)
    assert not result.moves and result.held(planner.COOLDOWN)
    # It booted half an hour ago: not even a window of figures.
    result = planner.plan([guest('hap-1', 120, observed_h=0.5)], HOSTS)
    assert not result.moves and result.held(planner.COOLDOWN)


def test_a_guest_that_has_not_moved_today_needs_one_window():
    # Booted in the wrong pool a window (1 h) ago: there is no move of
    # its to undo, so it moves now, not after cooldown_s (2 h).
    params = planner.Params()
    assert params.window_s == HOUR < params.cooldown_s
    booted = guest('hap-1', 120, observed_h=1)
    booted.moves = ()           # Watcher's history: none within the day
    (move,) = planner.plan([booted], HOSTS).moves
    assert move.to_mode == 'shadow'
    # Its moves not known (no history given): cooldown_s, as after one.
    result = planner.plan([guest('hap-1', 120, observed_h=1)], HOSTS)
    assert not result.moves and result.held(planner.COOLDOWN)


def test_a_guest_that_reversed_a_move_waits_the_reversal_cool_down():
    # Moved to shadow 5 h ago, back to hap 3 h ago: the second move undid
    # the first within reversal_cooldown_s (4 h), so it stays 4 h, not
    # cooldown_s (2 h), however much shadow would save it now.
    params = planner.Params()
    assert params.cooldown_s < 3 * HOUR < params.reversal_cooldown_s
    back = guest('hap-1', 120, observed_h=3)
    back.moves = ((5 * HOUR, 'shadow'), (3 * HOUR, 'hap'))
    result = planner.plan([back], HOSTS)
    assert not result.moves
    (held,) = result.held(planner.COOLDOWN)
    assert ('%.0f s needed' % params.reversal_cooldown_s in held.reason
            and 'reversal' in held.reason)
    # The same two moves 17 h apart: the second undid nothing recent,
    # so the plain cool-down applies and it moves.
    late = guest('hap-1', 120, observed_h=3)
    late.moves = ((20 * HOUR, 'shadow'), (3 * HOUR, 'hap'))
    (move,) = planner.plan([late], HOSTS).moves
    assert move.to_mode == 'shadow'


def test_a_way_back_at_the_first_audit_that_could_is_a_reversal():
    params = planner.Params()
    minute = 60.0
    # Moved to shadow (ended 7 h 4 min ago), back to hap at the next
    # audit after the cool-down, 2 h apart (decided 3 h 5 min ago, ended
    # 3 h ago).  The moves ended 4 h 4 min apart, but the way back was
    # decided 3 h 59 min after the move away ended: a reversal, however
    # long the migrations took, and the guest, 3 h back, stays 4 h.
    back = guest('hap-1', 120, observed_h=3)
    back.moves = ((7 * HOUR + 4 * minute, 'shadow', 7 * HOUR + 5 * minute),
                  (3 * HOUR, 'hap', 3 * HOUR + 5 * minute))
    result = planner.plan([back], HOSTS, params)
    assert not result.moves
    (held,) = result.held(planner.COOLDOWN)
    assert ('%.0f s needed' % params.reversal_cooldown_s in held.reason
            and 'reversal' in held.reason)
    # Audits 3 h apart: the way back at the first audit after the
    # cool-down was decided 4 h 30 min after the move away ended.  Past
    # reversal_cooldown_s, so without the audits' interval it is no
    # reversal and the guest, 4 h 25 min back, moves again; with it, a
    # reversal is anything decided within cooldown_s + two intervals
    # (8 h), and the guest stays that long.
    late = guest('hap-1', 120, observed_h=5)
    late.moves = ((9 * HOUR, 'shadow'),
                  (4 * HOUR + 25 * minute, 'hap', 4.5 * HOUR))
    (move,) = planner.plan([late], HOSTS, params).moves
    assert move.to_mode == 'shadow'
    every_3h = planner.Params(audit_interval_s=3 * HOUR)
    assert planner.reversal_s(every_3h) == 8 * HOUR
    result = planner.plan([late], HOSTS, every_3h)
    assert not result.moves
    (held,) = result.held(planner.COOLDOWN)
    assert '%.0f s needed' % (8 * HOUR) in held.reason
    # The move after a reversal's stay is decided at least that long
    # after it ended, so it is no reversal: the plain cool-down (2 h on,
    # it moves).
    again = guest('shadow-1', 120, observed_h=2)
    again.moves = ((14 * HOUR, 'shadow'), (10 * HOUR + minute, 'hap'),
                   (2 * HOUR, 'shadow', 2 * HOUR + minute))
    (move,) = planner.plan([again], HOSTS, every_3h).moves
    assert move.to_mode == 'hap'


@pytest.mark.parametrize('value', [-1, math.inf, math.nan, 'x', True])
def test_a_bad_audit_interval_is_one_line(value):
    with pytest.raises(planner.PoolFitError) as err:
        planner.Params(audit_interval_s=value)
    assert str(err.value).startswith('audit_interval_s') and (
        '\n' not in str(err.value))


def test_the_budget_caps_an_audit_and_keeps_the_best_moves():
    guests = [guest('hap-1', gain, uid='%02d' % gain)
              for gain in (10, 40, 20, 30, 50)]
    result = planner.plan(guests, HOSTS, planner.Params(budget=2))
    assert [m.guest.uuid for m in result.moves] == ['50', '40']
    assert len(result.held(planner.BUDGET)) == 3


def test_a_spent_budget_goes_first_to_guests_that_moved_less_today():
    # A fair share: 'moved' went hap -> shadow -> hap within the day
    # (the last move 13 h ago, past any cool-down) and would gain the
    # most; 'never' has not moved today and gains less.  One move this
    # audit: 'never' gets it.
    moved = guest('hap-1', 500, observed_h=13, uid='moved')
    moved.moves = ((20 * HOUR, 'shadow'), (13 * HOUR, 'hap'))
    never = guest('hap-1', 100, uid='never')
    never.moves = ()
    result = planner.plan([moved, never], HOSTS, planner.Params(budget=1))
    assert [m.guest.uuid for m in result.moves] == ['never']
    assert [h.guest.uuid for h in result.held(planner.BUDGET)] == ['moved']
    # With room in the budget, it moves too.
    assert len(planner.plan([moved, never], HOSTS).moves) == 2


def test_moves_of_one_audit_count_against_the_room_they_take():
    small = [host('hap-1', 'hap'),
             host('shadow-1', 'shadow', memory=6000)]
    result = planner.plan([guest('hap-1', 100), guest('hap-1', 90)],
                          small)
    assert len(result.moves) == 1 and result.held(planner.NO_ROOM)


def test_static_policies_are_never_moved_for_paging():
    for policy in ('hap', 'shadow', ''):
        result = planner.plan([guest('hap-1', 1e6, policy=policy)], HOSTS)
        assert not result.moves and result.held(planner.STATIC)


def test_a_guest_without_figures_or_pool_stays_with_the_reason():
    bare = planner.Guest('u', 'hap-1', 'adaptive', 2, 4096, 20)
    nowhere = guest('lost-1', 500)
    result = planner.plan([bare, nowhere], HOSTS)
    assert not result.moves
    assert result.held(planner.NO_FIGURES)[0].guest is bare
    assert result.held(planner.NO_POOL)[0].guest is nowhere


def test_an_alternating_guest_does_not_ping_pong():
    """A guest whose behaviour flips every ``period`` between favouring
    shadow (+rate) and hap (-rate): audited hourly, for every period and
    phase, it moves at most once per cool-down, and its migrations cost
    at most 1/margin of the time it lost in the wrong pool (the
    guarantee the module states)."""
    params = planner.Params()
    rate = 200.0 / HOUR                 # seconds saved per second
    for period_h in (0.5, 1, 2, 3, 5, 8, 13):
        for phase in (0.0, 0.25, 0.5):
            pool, arrived, lost, moves, cost = 'hap', -10 * HOUR, 0.0, [], 0
            gain_log = []               # (t, other-mode gain per second)
            t = 0.0
            while t < 48 * HOUR:
                flip = math.floor(t / (period_h * HOUR) + phase) % 2
                favours = 'shadow' if flip == 0 else 'hap'
                g_rate = rate if favours != pool else -rate
                gain_log.append((t, g_rate))
                lost += max(g_rate, 0) * 60
                t += 60
                if t % HOUR:
                    continue
                window = sum(r * 60 for (s, r) in gain_log
                             if s >= t - params.window_s and s >= arrived)
                g = planner.Guest('x', pool + '-1', 'adaptive', 2, 4096, 20,
                                  observed_s=t - arrived,
                                  window_gain_s=window, dirty_mib_s=50)
                result = planner.plan(
                    [g], [host('hap-1', 'hap'), host('shadow-1', 'shadow')],
                    params)
                if result.moves:
                    (m,) = result.moves
                    moves.append(t)
                    cost += m.cost_s
                    pool, arrived = m.to_mode, t
            if period_h >= 8:           # long phases: moving pays
                assert moves, (period_h, phase)
            gaps = [b - a for a, b in zip(moves, moves[1:])]
            assert all(gap >= params.cooldown_s for gap in gaps), (
                period_h, phase, moves)
            assert cost <= lost / params.margin + 1e-9


@pytest.mark.parametrize('kwargs, key', [
    ({'cooldown_s': 600, 'window_s': 3600}, 'cooldown_s'),
    ({'horizon_s': 600, 'window_s': 3600}, 'horizon_s'),
    ({'margin': 0.5}, 'margin'), ({'budget': -1}, 'budget'),
    ({'reversal_cooldown_s': 3600}, 'reversal_cooldown_s'),
    ({'moves_per_day': 0}, 'moves_per_day'), ({'budget': 2.5}, 'budget'),
    ({'window_s': 'x'}, 'window_s')])
def test_bad_parameters_are_one_line_naming_them(kwargs, key):
    with pytest.raises(planner.PoolFitError) as err:
        planner.Params(**kwargs)
    assert str(err.value).startswith(key) and '\n' not in str(err.value)


# -- a full pool's place goes to whoever gains most from it -----------------
def full_shadow_pool():
    return [host('hap-1', 'hap'), host('shadow-1', 'shadow', vcpus=0,
                                       memory=0)]


def test_a_full_pool_makes_room_for_a_guest_it_suits_more():
    # X in the full shadow pool: hap would cost it 10 s an hour more.  Y
    # in hap: shadow would save it 300 s an hour.  The pair gains 290 s
    # an hour for two migrations of ~0.4 s (the model above): X moves out
    # now, Y waits for the room.
    x = guest('shadow-1', gain_per_hour=-10, uid='x')
    y = guest('hap-1', gain_per_hour=300, uid='y')
    cost = migration.estimate(4096, 50).guest_s
    assert 290 >= 2 * (2 * cost)
    result = planner.plan([x, y], full_shadow_pool())
    (move,) = result.moves
    assert (move.guest.uuid, move.destination, move.to_mode) == (
        'x', 'hap-1', 'hap')
    (held,) = result.held(planner.NO_ROOM)
    assert held.guest.uuid == 'y' and 'make room' in held.reason
    assert not [h for h in result.holds if h.guest.uuid == 'x']
    # Off: nobody moves, Y waits.
    off = planner.plan([x, y], full_shadow_pool(),
                       planner.Params(make_room=0))
    assert off.moves == [] and len(off.held(planner.NO_ROOM)) == 1


def test_no_room_is_made_when_the_pair_would_not_pay_twice_over():
    # X loses 299.5 s an hour in hap, Y gains 300 in shadow: 0.5 s for two
    # migrations of ~0.4 s each is not margin (2) times their cost.
    x = guest('shadow-1', gain_per_hour=-299.5, uid='x')
    y = guest('hap-1', gain_per_hour=300, uid='y')
    result = planner.plan([x, y], full_shadow_pool())
    assert result.moves == []
    assert 'make room' not in result.held(planner.NO_ROOM)[0].reason


def test_a_guest_in_cool_down_is_not_moved_out_to_make_room():
    x = guest('shadow-1', gain_per_hour=-10, observed_h=1, uid='x')
    y = guest('hap-1', gain_per_hour=300, uid='y')
    result = planner.plan([x, y], full_shadow_pool())
    assert result.moves == []
