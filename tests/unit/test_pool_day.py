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

"""The harder modeled day of paging pools (simhost/pool_day.py) on a
small fleet: bounds every guest's time must keep whatever the decisions
(the cost model's per-row times, not the day's code), both baselines
computed as stated, and the levers that must do what they say (no
strategy moves nothing; migrations that all fail move nobody).  The
figures of the full day per seed are in doc/source/stock-fleet.rst."""

import math

import pytest

from nova_adaptive_paging.simhost import pool_day
from nova_adaptive_paging.simhost import stock_fleet

SMALL = dict(hosts_per_pool=1, host_vcpus=8, warmup_h=3, measured_h=3,
             duration_h=(1.0, 3.0), images=3, projects=2)


@pytest.fixture(scope='module')
def drawn():
    return pool_day.Draw(pool_day.Config(11, **SMALL))


def run(drawn, **kw):
    return pool_day.run(pool_day.Config(11, **dict(SMALL, **kw)), drawn)


def test_no_guest_beats_the_best_mode_of_every_row(drawn):
    """However it is placed and moved, a guest needs at least the faster
    mode's time for each row of its trace (migrations only add), and at
    most the slower mode's plus what it paid to migrate."""
    result = run(drawn)
    assert result['measured_guests'] > 0
    by_uuid = {g.uuid: g for g in drawn.drawn}
    for g in result['per_guest']:
        hap, shadow = by_uuid[g['uuid']].rows_time
        rows = [(hap[i + 1] - hap[i], shadow[i + 1] - shadow[i])
                for i in range(len(hap) - 1)]
        lower = math.fsum(min(r) for r in rows)
        assert g['time_s'] >= lower * (1 - 1e-9), g
        assert g['hap'] == pytest.approx(hap[-1])
        assert g['shadow'] == pytest.approx(shadow[-1])
        # Each migration costs a 4 GiB guest well under a minute.
        upper = math.fsum(max(r) for r in rows) + 60 * (g['moves'] + 1)
        assert g['time_s'] <= upper, g


def test_both_baselines_are_the_guests_own(drawn):
    result = run(drawn)
    f, guests = result['fleet'], result['per_guest']
    assert f['hap'] == pytest.approx(math.fsum(g['hap'] for g in guests))
    assert f['best_static_per_guest'] == pytest.approx(math.fsum(
        min(g['hap'], g['shadow']) for g in guests))
    assert f['fleet'] == pytest.approx(math.fsum(
        g['time_s'] for g in guests))
    better = min(f['hap'], f['shadow'])
    assert result['shares']['vs_better_static_pool'] == pytest.approx(
        (better - f['fleet']) / (better - f['adaptive']))
    assert result['shares']['vs_best_pool_per_guest'] == pytest.approx(
        (f['best_static_per_guest'] - f['fleet'])
        / (f['best_static_per_guest'] - f['adaptive']))
    assert result['modeled'] is True


def test_without_the_strategy_nothing_moves(drawn):
    result = run(drawn, strategy=False, boot_placement=False)
    assert result['counts']['moves'] == 0
    assert all(g['moves'] == 0 for g in result['per_guest'])


def test_migrations_that_all_fail_move_nobody_and_cost_time(drawn):
    moved = run(drawn, boot_placement=False)
    failing = run(drawn, boot_placement=False, fail_p=1.0)
    assert moved['counts']['moves'] > 0
    assert failing['counts']['moves'] == 0
    assert failing['counts']['moves_failed'] > 0


def test_the_summary_names_both_baselines_and_says_modeled():
    fleet = {'hap': 100.0, 'shadow': 120.0, 'best_static_per_guest': 95.0,
             'fleet': 94.0, 'adaptive': 90.0}
    text = stock_fleet.summary(fleet, 3, 2)
    assert text.startswith('MODELED')
    # (100 - 94) / (100 - 90) and (95 - 94) / (95 - 90).
    assert '60.0 % of the patched kernel\'s gain over the better static' \
        in text
    assert '20.0 % of its gain over each guest in its best pool' in text


def oracle_guest(uuid, host, hap_row_s, shadow_row_s, rows=100):
    """A guest whose every row takes ``hap_row_s`` in hap and
    ``shadow_row_s`` in shadow (the oracle reads the true times only)."""
    return pool_day._Guest(
        uuid=uuid, image='', project='', workload='', arrival_h=0,
        rows_time=([hap_row_s * i for i in range(rows + 1)],
                   [shadow_row_s * i for i in range(rows + 1)]),
        priced=((), ()), dirty_mib_s=50.0, baselines={}, host=host)


def test_the_oracle_gives_a_full_pool_to_whom_it_saves_most():
    # One shadow host of 2 slots; three guests in hap that shadow paging
    # would speed up, by 40, 30 and 20 % of their hap time, and one in
    # shadow that hap would speed up.  Shadow's two slots go to the 40
    # and 30 % ones; the hap-suited one goes home.
    pools = {'hap-1': 'hap', 'shadow-1': 'shadow'}
    running = [oracle_guest('a', 'hap-1', 100, 60),
               oracle_guest('b', 'hap-1', 100, 70),
               oracle_guest('c', 'hap-1', 100, 80),
               oracle_guest('d', 'shadow-1', 50, 100)]
    moves = sorted(pool_day._oracle(running, pools, slots=2))
    assert moves == [('a', 'shadow-1', 'shadow'), ('b', 'shadow-1', 'shadow'),
                     ('d', 'hap-1', 'hap')]


def test_the_oracle_never_fills_a_pool_past_its_slots():
    # Four guests shadow suits, one on each of four hap hosts of one
    # slot; two shadow hosts of one slot: the two shadow saves most go,
    # one to each.
    pools = {'hap-1': 'hap', 'hap-2': 'hap', 'hap-3': 'hap', 'hap-4': 'hap',
             'shadow-1': 'shadow', 'shadow-2': 'shadow'}
    running = [oracle_guest(u, 'hap-%d' % (k + 1), 100, s)
               for k, (u, s) in enumerate((('a', 50), ('b', 60), ('c', 70),
                                           ('d', 80)))]
    moves = sorted(pool_day._oracle(running, pools, slots=1))
    assert [m[0] for m in moves] == ['a', 'b']
    assert {m[1] for m in moves} == {'shadow-1', 'shadow-2'}


def test_the_oracle_moves_for_free(drawn):
    result = run(drawn, oracle=True)
    assert result['counts']['moves'] > 0
    assert result['counts']['moves_failed'] == 0
