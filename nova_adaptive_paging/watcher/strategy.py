"""The ``paging_fit`` strategy: live-migrate adaptive guests between the
hap and the shadow pool of a fleet of stock kernels when it pays.

*Description*

Each audit reads, from Prometheus, every stock host's pool and what the
other mode would have saved each guest over the last window (its
agent's advisory figures, MODELED), and proposes Watcher's standard
``migrate`` actions (live) for the moves
:func:`nova_adaptive_paging.pools.planner.plan` chooses: guests with
``hw:paging=adaptive`` only, each after a cool-down in its pool, paid for
by a loss already seen, to a host of the other pool with room, at most
``budget`` a plan.  Nova's scheduler checks each destination against its
filters (the paging filter, server-group anti-affinity) when Watcher's
applier asks for the move.  Why each other guest stays is logged.

*Requirements*

The project's agent in advisory mode on every stock host, scraped by a
Prometheus this strategy can query (``[watcher_strategies.paging_fit]
prometheus_url``), as ``<Nova's hypervisor host name>:<port>``.

*Limitations*

The figures are the cost model's, not measurements.

Why the project's PromQL and not Watcher's Prometheus datasource: that
datasource answers a fixed table of host and instance meters (CPU,
memory, ...) and names instances by Nova's UUID only through its own
label mapping; the figures this strategy weighs are the project's own
per-guest series, whose names :mod:`nova_adaptive_paging.telemetry.
metrics` defines once and whose queries the project's rules and
dashboards share.
"""

from oslo_config import cfg
from oslo_log import log

from watcher.common import exception as watcher_exception
from watcher.decision_engine.model import element
from watcher.decision_engine.strategy.strategies import base

from nova_adaptive_paging.costmodel import migration
from nova_adaptive_paging import policy
from nova_adaptive_paging.pools import figures as pool_figures
from nova_adaptive_paging.telemetry import prometheus_api
from nova_adaptive_paging.pools import planner
from nova_adaptive_paging.watcher import goal

LOG = log.getLogger(__name__)

_PARAMS, _LINK = planner.Params(), migration.Link()
# The audit parameters, the decision's and the migration model's, with
# their defaults.  Their bounds are checked once, by planner.Params and
# migration.Link: a bad value fails the audit with one line naming it.
PARAMETERS = {
    'horizon_s': ('Seconds of future a move is weighed over.',
                  _PARAMS.horizon_s),
    'window_s': ('Seconds of the past a move must have paid for.',
                 _PARAMS.window_s),
    'cooldown_s': ('Seconds a guest stays in a pool before it may move '
                   'again (at least window_s).', _PARAMS.cooldown_s),
    'margin': ('How many times its cost a move must gain.', _PARAMS.margin),
    'budget': ('Moves an audit proposes at most.', _PARAMS.budget),
    'dirty_mib_s': ('Memory a guest dirties (MiB/s), for the migration '
                    'model.', _PARAMS.dirty_mib_s),
    'bandwidth_mib_s': ('The migration network\'s payload bandwidth '
                        '(MiB/s).', _LINK.bandwidth_mib_s),
    'max_downtime_s': ('The pause Nova allows a live migration ([libvirt] '
                       'live_migration_downtime).', _LINK.max_downtime_s),
    'slowdown': ('Fraction of its throughput a guest loses while its memory '
                 'is copied.', _LINK.slowdown),
}


class PagingFit(base.BaseStrategy):
    """Move adaptive guests to the paging pool that suits them."""

    @classmethod
    def get_name(cls):
        return goal.NAME

    @classmethod
    def get_display_name(cls):
        return 'Paging fit across hap and shadow pools'

    @classmethod
    def get_translatable_display_name(cls):
        return 'Paging fit across hap and shadow pools'

    @classmethod
    def get_goal_name(cls):
        return goal.NAME

    @classmethod
    def get_schema(cls):
        return {'properties': {
            key: {'description': text, 'default': default,
                  'type': 'integer' if isinstance(default, int) else 'number'}
            for key, (text, default) in PARAMETERS.items()}}

    @classmethod
    def get_config_opts(cls):
        return super().get_config_opts() + [
            cfg.StrOpt('prometheus_url', default='http://127.0.0.1:9090',
                       help='The Prometheus (or any PromQL endpoint) that '
                            'scrapes the nova-paging agents.'),
            cfg.FloatOpt('prometheus_timeout', default=30.0, min=1,
                         help='Seconds a query may take.'),
        ]

    def __init__(self, config, osc=None):
        super().__init__(config, osc)
        # The figures' source: Prometheus, unless a caller gives another;
        # read now, unless a caller replaying the past names a time.
        self.figures = None
        self.figures_at = None
        self.plan = None

    def pre_execute(self):
        self._pre_execute()

    def _params(self):
        given = self.input_parameters or {}
        value = {k: given.get(k, v[1]) for k, v in PARAMETERS.items()}
        try:
            params = planner.Params(**{k: value[k] for k in (
                'horizon_s', 'window_s', 'cooldown_s', 'margin', 'budget',
                'dirty_mib_s')})
            link = migration.Link(bandwidth_mib_s=value['bandwidth_mib_s'],
                                  max_downtime_s=value['max_downtime_s'],
                                  slowdown=value['slowdown'])
        except (planner.PoolFitError, migration.MigrationError) as exc:
            raise watcher_exception.WatcherException('paging_fit: %s' % exc)
        return params, link

    def _read_figures(self, window_s):
        if self.figures is not None:
            return self.figures
        client = prometheus_api.Client(self.config.prometheus_url,
                                       timeout=self.config.prometheus_timeout)
        try:
            return pool_figures.read(client, '%ds' % window_s,
                                     self.figures_at)
        except prometheus_api.PrometheusError as exc:
            raise watcher_exception.WatcherException(
                'paging_fit: no figures, no move: %s' % exc)

    def do_execute(self, audit=None):
        params, link = self._params()
        figures = self._read_figures(params.window_s)
        model = self.compute_model
        hosts, guests = [], []
        for node in model.get_all_compute_nodes().values():
            free = model.get_node_free_resources(node)
            hosts.append(planner.Host(
                node.hostname, figures.pools.get(node.hostname),
                free['vcpu'], free['memory'], free['disk'],
                enabled=(node.status == element.ServiceState.ENABLED.value
                         and node.state ==
                         element.ServiceState.ONLINE.value)))
            for inst in model.get_node_instances(node):
                if (inst.state != element.InstanceState.ACTIVE.value
                        or inst.watcher_exclude or inst.locked):
                    continue
                try:
                    wanted = policy.from_extra_specs(
                        inst.flavor_extra_specs or {}).paging
                except policy.PolicyError:
                    wanted = None
                seen = figures.guests.get(inst.uuid)
                current = seen is not None and seen.host == node.hostname
                guests.append(planner.Guest(
                    inst.uuid, node.hostname,
                    wanted.value if wanted is not None else '',
                    inst.vcpus, inst.memory, inst.disk,
                    observed_s=seen.observed_s if current else None,
                    window_gain_s=seen.window_gain_s if current else None))
        self.plan = planner.plan(guests, hosts, params, link)
        for hold in self.plan.holds:
            LOG.info('paging_fit: %s on %s stays: %s', hold.guest.uuid,
                     hold.guest.host, hold.reason)
        for move in self.plan.moves:
            LOG.info('paging_fit: %s moves %s -> %s (%s): %.1f s gained '
                     'over the horizon for %.1f s of migration (modeled)',
                     move.guest.uuid, move.source, move.destination,
                     move.to_mode, move.horizon_gain_s, move.cost_s)
            self.add_action_migrate(
                model.get_instance_by_uuid(move.guest.uuid), 'live',
                model.get_node_by_name(move.source),
                model.get_node_by_name(move.destination))
        self.solution.set_efficacy_indicators(
            instance_migrations_count=len(self.plan.moves),
            modeled_gain_seconds=round(sum(
                m.horizon_gain_s - m.cost_s for m in self.plan.moves), 3),
            guests_held=sum(1 for h in self.plan.holds
                            if not h.reason.startswith(planner.STATIC)))

    def post_execute(self):
        pass
