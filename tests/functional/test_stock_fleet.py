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

"""Adaptive paging on stock kernels, end to end over a modeled day: real
agents in advisory mode on simulated stock hosts of a hap and a shadow
pool, a real Prometheus, Watcher's loader and the ``paging_fit``
strategy on Watcher's cluster data model, and its action plans applied
to the simulated fleet (nova_adaptive_paging.simhost.stock_fleet; every
figure is MODELED).  The baselines are the evaluator's replays of the
same day-long workloads: independent of the agents, Prometheus and the
strategy."""

import json
import subprocess
import sys

import pytest

from nova_adaptive_paging.simhost import stock_fleet
from nova_adaptive_paging.pools import planner
from tests.functional import prometheus

HOUR = 3600


def run_day(tmp_path_factory, *args):
    prometheus.binaries()
    out = tmp_path_factory.mktemp('stock') / 'day.json'
    # A process of its own: the agents' libvirt threads cannot live with
    # the eventlet that Nova's functional framework patches in here.
    run = subprocess.run([sys.executable, '-W', 'ignore', '-m',
                          'nova_adaptive_paging.simhost.stock_fleet',
                          str(out)] + list(args), capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope='module')
def day(tmp_path_factory):
    return run_day(tmp_path_factory)


@pytest.fixture(scope='module')
def placed_day(tmp_path_factory):
    """The same day, its adaptive guests booted where Nova's weighers,
    with the paging pool weigher, put them."""
    return run_day(tmp_path_factory, '--boot-placement')


def test_the_fleet_beats_both_static_pools(day):
    f = day['fleet']
    assert f['fleet'] < f['hap'] and f['fleet'] < f['shadow'], f
    # Both baselines, as the day reports them (worked out here).
    better_static = min(f['hap'], f['shadow'])
    per_guest = f['best_static_per_guest']
    assert day['shares']['vs_better_static_pool'] == pytest.approx(
        (better_static - f['fleet']) / (better_static - f['adaptive']))
    assert day['shares']['vs_best_pool_per_guest'] == pytest.approx(
        (per_guest - f['fleet']) / (per_guest - f['adaptive']))
    print(stock_fleet.summary(f, day['migrations'], sum(
        1 for g in day['guests'].values() if g['policy'] == 'adaptive')))
    print('  the evaluator\'s oracle: %.0f s' % f['oracle'])
    # Never better than the per-guest oracle (a sanity bound on the
    # simulation), and what it gains comes at a handful of moves.
    assert f['fleet'] >= f['oracle']
    assert 0 < day['migrations'] <= 2 * len(day['guests'])


def moves_of(day, name):
    return [a['hour'] for a in day['audits']
            for m in a['moves'] if m[0] == name]


def test_static_guests_are_never_moved(day):
    for name, guest in day['guests'].items():
        if guest['policy'] != 'adaptive':
            assert not moves_of(day, name)
            first = {n: h for n, _, h, _ in stock_fleet.GUESTS}[name]
            assert guest['host'] == first
            for audit in day['audits']:
                assert audit['held'][name].startswith(planner.STATIC)


def test_no_guest_ping_pongs(day):
    params = planner.Params()
    for name in day['guests']:
        hours = moves_of(day, name)
        gaps = [b - a for a, b in zip(hours, hours[1:])]
        assert all(g * HOUR >= params.cooldown_s for g in gaps), \
            (name, hours)
    # The half-hourly alternating guest stays in the pool that suits its
    # day as a whole (hap on this hardware).
    assert not moves_of(day, 'alternating')
    assert day['guests']['alternating']['host'].startswith('hap')


def test_guests_end_in_the_pool_their_last_phase_wants(day):
    where = {n: g['host'].split('-')[0] for n, g in day['guests'].items()}
    assert where['tlb-all-day'] == 'shadow'
    assert where['faults-all-day'] == 'hap'
    assert where['tlb-then-faults'] == 'hap'      # moved there and back
    assert len(moves_of(day, 'tlb-then-faults')) == 2
    assert where['faults-then-tlb'] == 'shadow'


def test_every_audit_says_why_a_guest_stays(day):
    first = day['audits'][0]['held']
    for name, guest in day['guests'].items():
        kind = (planner.COOLDOWN if guest['policy'] == 'adaptive'
                else planner.STATIC)
        assert first[name].startswith(kind), (name, first[name])


def test_boot_placement_boots_each_guest_in_its_best_pool(day, placed_day):
    # Three adaptive guests start in the wrong pool of the table
    # (tlb-all-day, faults-all-day, phases); with the weigher and the
    # history of their images every adaptive guest boots in the pool
    # that suits its whole day, and the static ones where they were.
    wrong = 0
    for name, guest in placed_day['guests'].items():
        first = {n: h for n, _, h, _ in stock_fleet.GUESTS}[name]
        if guest['policy'] != 'adaptive':
            assert guest['booted'] == first
            continue
        best = 'hap' if guest['hap'] <= guest['shadow'] else 'shadow'
        assert guest['booted'].startswith(best), (name, guest['booted'])
        wrong += not first.startswith(best)
    assert wrong == 3
    assert placed_day['boot_placement'] and not day['boot_placement']


def test_boot_placement_gains_against_both_baselines(day, placed_day):
    f = placed_day['fleet']
    print(stock_fleet.summary(f, placed_day['migrations'], sum(
        1 for g in placed_day['guests'].values()
        if g['policy'] == 'adaptive'), name='paging_fit with boot '
        'placement'))
    for key in ('vs_better_static_pool', 'vs_best_pool_per_guest'):
        assert placed_day['shares'][key] > day['shares'][key], key
    assert placed_day['migrations'] < day['migrations']
    assert f['fleet'] >= f['oracle']
    params = planner.Params()
    for name in placed_day['guests']:
        hours = moves_of(placed_day, name)
        gaps = [b - a for a, b in zip(hours, hours[1:])]
        assert all(g * HOUR >= params.cooldown_s for g in gaps), (
            name, hours)
