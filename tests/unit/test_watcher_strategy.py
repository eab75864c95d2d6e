"""The ``paging_fit`` Watcher strategy, loaded by Watcher's own loaders
and run on Watcher's cluster data model (hosts in a hap and a shadow
pool, guests on them), as Watcher's own strategy tests do.  The figures
Prometheus would give are handed to the strategy directly here (the
end-to-end test, tests/functional/test_stock_fleet.py, reads them from a
real Prometheus).

A process of its own (tox.ini): Watcher's options and Nova's share names
in oslo.config's global CONF, and the filter's tests import Nova."""

import uuid as uuidlib

import pytest
from oslo_config import cfg

from watcher.common import exception as watcher_exception
from watcher.common import utils as watcher_utils
from watcher.decision_engine.loading import default as watcher_loading
from watcher.decision_engine.model import element
from watcher.decision_engine.model import model_root

from nova_adaptive_paging.pools import figures as pool_figures
from nova_adaptive_paging.pools import planner
from nova_adaptive_paging.watcher import strategy as strategylib

HOUR = 3600.0


@pytest.fixture(scope='module')
def watcher_conf():
    """Watcher's loaders read their plugins' options from cfg.CONF."""
    cfg.CONF([], project='watcher', default_config_files=[])
    yield cfg.CONF
    cfg.CONF.clear()


def node(model, name, vcpus=64, memory=256 * 1024, disk=2000):
    n = element.ComputeNode(
        uuid=str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, name)), hostname=name,
        memory=memory, memory_mb_reserved=0, disk=disk, disk_gb_reserved=0,
        vcpus=vcpus, vcpu_reserved=0, memory_ratio=1.0, vcpu_ratio=1.0,
        disk_ratio=1.0)
    model.add_node(n)
    return n


def instance(model, n, paging='adaptive', memory=4096):
    i = element.Instance(
        uuid=str(uuidlib.uuid4()), name='vm', memory=memory, disk=20,
        vcpus=2, flavor_extra_specs={'hw:paging': paging} if paging else {},
        state=element.InstanceState.ACTIVE.value, project_id=str(
            uuidlib.uuid4()), host=n.hostname)
    model.add_instance(i)
    model.map_instance(i, n)
    return i


def strategy_for(model, figures, **params):
    loader = watcher_loading.DefaultStrategyLoader()
    s = loader.load(strategylib.goal.NAME)
    s._compute_model = model            # as Watcher's tests set it
    s.figures = figures
    s.input_parameters = watcher_utils.Struct(params)
    return s


def test_watcher_lists_the_goal_and_the_strategy(watcher_conf):
    assert 'paging_fit' in watcher_loading.DefaultGoalLoader(
    ).list_available()
    strategies = watcher_loading.DefaultStrategyLoader().list_available()
    assert strategies['paging_fit'] is strategylib.PagingFit
    s = watcher_loading.DefaultStrategyLoader().load('paging_fit')
    assert s.goal.name == 'paging_fit'
    assert s.config.prometheus_url.startswith('http')


def test_the_strategy_proposes_watchers_live_migrate(watcher_conf):
    model = model_root.ModelRoot()
    hap, shadow = node(model, 'hap-1'), node(model, 'shadow-1')
    moving = instance(model, hap)
    pinned = instance(model, hap, paging='hap')
    fine = instance(model, shadow)
    figures = pool_figures.Figures(
        {'hap-1': 'hap', 'shadow-1': 'shadow'},
        {moving.uuid: pool_figures.GuestFigures('hap-1', 10 * HOUR, 300),
         pinned.uuid: pool_figures.GuestFigures('hap-1', 10 * HOUR, 900),
         fine.uuid: pool_figures.GuestFigures('shadow-1', 10 * HOUR, -50)})
    solution = strategy_for(model, figures).execute()
    (action,) = solution.actions
    assert action['action_type'] == 'migrate'
    assert action['input_parameters']['resource_id'] == moving.uuid
    assert action['input_parameters']['migration_type'] == 'live'
    assert action['input_parameters']['source_node'] == 'hap-1'
    assert action['input_parameters']['destination_node'] == 'shadow-1'
    indicators = {i.name: i.value for i in solution.efficacy_indicators}
    assert indicators['instance_migrations_count'] == 1
    assert indicators['guests_held'] == 1          # the pinned one is static
    assert indicators['modeled_gain_seconds'] > 0


def test_the_strategy_honours_cool_down_and_budget(watcher_conf):
    model = model_root.ModelRoot()
    hap = node(model, 'hap-1')
    node(model, 'shadow-1')
    fresh = instance(model, hap)
    ready = [instance(model, hap) for _ in range(3)]
    guests = {fresh.uuid: pool_figures.GuestFigures('hap-1', 600, 500)}
    guests.update({i.uuid: pool_figures.GuestFigures('hap-1', 5 * HOUR, 400)
                   for i in ready})
    s = strategy_for(model, pool_figures.Figures(
        {'hap-1': 'hap', 'shadow-1': 'shadow'}, guests), budget=2)
    solution = s.execute()
    moved = {a['input_parameters']['resource_id'] for a in solution.actions}
    assert len(moved) == 2 and fresh.uuid not in moved
    assert s.plan.held(planner.COOLDOWN)[0].guest.uuid == fresh.uuid


def test_a_guest_whose_figures_are_from_another_host_stays(watcher_conf):
    # Migrated since the agents were scraped: its figures are of its old
    # host's pool, not of where it runs now.
    model = model_root.ModelRoot()
    hap, _ = node(model, 'hap-1'), node(model, 'shadow-1')
    moved = instance(model, hap)
    s = strategy_for(model, pool_figures.Figures(
        {'hap-1': 'hap', 'shadow-1': 'shadow'},
        {moved.uuid: pool_figures.GuestFigures('shadow-1', 9 * HOUR, 400)}))
    assert not s.execute().actions
    assert s.plan.held(planner.NO_FIGURES)


def test_bad_audit_parameters_fail_the_audit_with_one_line(watcher_conf):
    model = model_root.ModelRoot()
    node(model, 'hap-1')
    s = strategy_for(model, pool_figures.Figures({}, {}), cooldown_s=60,
                     window_s=3600)
    with pytest.raises(watcher_exception.WatcherException) as err:
        s.execute()
    assert 'cooldown_s' in str(err.value) and '\n' not in str(err.value)


def test_a_prometheus_that_is_down_fails_the_audit_moving_nothing(
        watcher_conf):
    model = model_root.ModelRoot()
    hap = node(model, 'hap-1')
    instance(model, hap)
    s = strategy_for(model, None)
    s.config = watcher_utils.Struct(prometheus_url='http://127.0.0.1:9',
                                    prometheus_timeout=2.0)
    with pytest.raises(watcher_exception.WatcherException) as err:
        s.execute()
    assert 'no figures, no move' in str(err.value)
    assert '127.0.0.1:9' in str(err.value)
    assert not s.solution.actions


def fleet_model(shadow_memory=256 * 1024):
    model = model_root.ModelRoot()
    hap = node(model, 'hap-1')
    shadow = node(model, 'shadow-1', memory=shadow_memory)
    return model, hap, shadow


POOLS = {'hap-1': 'hap', 'shadow-1': 'shadow'}


def test_a_gain_that_does_not_pay_for_its_migration_moves_nothing(
        watcher_conf):
    model, hap, _ = fleet_model()
    small = instance(model, hap)
    s = strategy_for(model, pool_figures.Figures(POOLS, {
        small.uuid: pool_figures.GuestFigures('hap-1', 10 * HOUR, 0.2)}))
    assert not s.execute().actions
    assert s.plan.held(planner.NOT_WORTH)[0].guest.uuid == small.uuid


def test_a_full_pool_takes_no_guest(watcher_conf):
    model, hap, _ = fleet_model(shadow_memory=2048)
    big = instance(model, hap, memory=4096)
    s = strategy_for(model, pool_figures.Figures(POOLS, {
        big.uuid: pool_figures.GuestFigures('hap-1', 10 * HOUR, 900)}))
    assert not s.execute().actions
    assert s.plan.held(planner.NO_ROOM)[0].guest.uuid == big.uuid


def test_a_host_without_a_pool_keeps_its_guests(watcher_conf):
    # A host that switches (or one outside the pools) reports no pool:
    # its guests stay, and it is no destination.
    model, hap, _ = fleet_model()
    patched = node(model, 'patched-1')
    guest = instance(model, patched)
    s = strategy_for(model, pool_figures.Figures(POOLS, {
        guest.uuid: pool_figures.GuestFigures('patched-1', 10 * HOUR, 900)}))
    assert not s.execute().actions
    assert s.plan.held(planner.NO_POOL)[0].guest.uuid == guest.uuid


def test_an_alternating_guest_is_not_moved_back_and_forth(watcher_conf):
    """Audited every hour while its behaviour flips every 30 minutes
    (the window sees both halves: the figures net out) and then every 3
    hours (each window sees one): it moves at most once per cool-down,
    and only after a window of loss that pays for the move twice."""
    for period_h in (0.5, 3):
        model, hap, shadow = fleet_model()
        guest = instance(model, hap)
        where, arrived, moves = 'hap-1', 0.0, []
        for hour in range(1, 25):
            t = hour * HOUR
            # The window's gain in the other pool: +300 s an hour while
            # the phase favours it, -300 while it favours this pool.
            phase = int(t / (period_h * HOUR)) % 2
            other_better = (phase == 0) == (where == 'hap-1')
            gain = (0 if period_h < 1 else 300 if other_better else -300)
            s = strategy_for(model, pool_figures.Figures(POOLS, {
                guest.uuid: pool_figures.GuestFigures(
                    where, t - arrived, gain)}))
            for action in s.execute().actions:
                dest = action['input_parameters']['destination_node']
                model.migrate_instance(guest, model.get_node_by_name(where),
                                       model.get_node_by_name(dest))
                where, arrived = dest, t
                moves.append(hour)
        gaps = [b - a for a, b in zip(moves, moves[1:])]
        assert all(g * HOUR >= planner.Params().cooldown_s for g in gaps)
        if period_h < 1:
            assert moves == []
