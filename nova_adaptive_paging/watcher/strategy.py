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
``budget`` a plan.  Before it plans it reads, from Watcher's database,
the moves planned or under way (their room is taken) and each guest's
moves of the last day (hysteresis, the daily cap, the fair share):
:mod:`.ledger`.  Nova's scheduler checks each destination against its
filters (the paging filter, server-group anti-affinity) when Watcher's
applier asks for the move.  Why each other guest stays is logged.

*Requirements*

The project's agent in advisory mode on every stock host, scraped by
the Prometheus Watcher's datasources use (Aetos, or ``[prometheus_client]``,
with their authentication and ``fqdn_label``: :mod:`.source`) or by the
one ``[watcher_strategies.paging_fit] prometheus_url`` names, each host
named as Nova names it: ``instance="<host>:<port>"``, or its
``fqdn_label``.

*Limitations*

The figures are the cost model's, not measurements.

Why the project's PromQL and not Watcher's datasource classes (the same
endpoint, though): they answer a fixed table of host and instance meters (CPU,
memory, ...) and names instances by Nova's UUID only through its own
label mapping; the figures this strategy weighs are the project's own
per-guest series, whose names :mod:`nova_adaptive_paging.telemetry.
metrics` defines once and whose queries the project's rules and
dashboards share.
"""

import collections
import contextlib
import dataclasses
import datetime
import gc
import logging
import math
import time

from oslo_config import cfg
from oslo_log import log
from oslo_utils import strutils

from watcher.common import exception as watcher_exception
from watcher.decision_engine.model import element
from watcher.decision_engine.strategy.strategies import base

from nova_adaptive_paging.costmodel import migration
from nova_adaptive_paging import policy
from nova_adaptive_paging.pools import figures as pool_figures
from nova_adaptive_paging.telemetry import prometheus_api
from nova_adaptive_paging.pools import planner
from nova_adaptive_paging.watcher import goal
from nova_adaptive_paging.watcher import ledger
from nova_adaptive_paging.watcher import source

LOG = log.getLogger(__name__)

# The audit parameters, the decision's and the migration model's.  Their
# defaults and bounds are planner.BOUNDS and migration.BOUNDS: the schema
# publishes them (Watcher refuses a value outside them when the audit is
# created), and planner.Params and migration.Link check them again.
PARAMETERS = {
    'horizon_s': 'Seconds of future a move is weighed over.',
    'window_s': 'Seconds of the past a move must have paid for.',
    'cooldown_s': 'Seconds a guest stays in a pool before it may move '
                  'again (at least window_s).',
    'reversal_cooldown_s': 'Seconds a guest stays after a move that undid '
                           'its previous one within this time (at least '
                           'cooldown_s).',
    'margin': 'How many times its cost a move must gain.',
    'budget': 'Moves an audit proposes at most.',
    'moves_per_day': 'Moves of one guest in any 24 hours at most.',
    'make_room': '1: when a pool is full, a guest it suits least moves '
                 'out so that one it suits more can move in, when the '
                 'pair gains margin times both migrations; 0: never.',
    'dirty_mib_s': 'Memory a guest dirties (MiB/s), for the migration '
                   'model.',
    'bandwidth_mib_s': 'The migration network\'s payload bandwidth '
                       '(MiB/s).',
    'max_downtime_s': 'The pause Nova allows a live migration ([libvirt] '
                      'live_migration_downtime).',
    'slowdown': 'Fraction of its throughput a guest loses while its '
                'memory is copied.',
}
_BOUNDS = dict(planner.BOUNDS, **migration.BOUNDS)
_LINK_KEYS = ('bandwidth_mib_s', 'max_downtime_s', 'slowdown')


def audit_interval_s(audit, now):
    """Seconds between two runs of ``audit``, if it is continuous: its
    interval, or the longest gap of its cron schedule from ``now`` over
    the next 8 days (its first 2,000 runs at most); 0 for a one-shot or
    event audit, which has no cadence.  planner.PoolFitError, one line,
    for an interval that is neither (Watcher checks it when the audit is
    created, but accepts a cron schedule that never runs)."""
    def field(name):
        try:
            return getattr(audit, name, None)
        except NotImplementedError:     # a versioned object's unset field
            return None
    if audit is None:
        return 0.0
    # As Watcher's services import it: once its objects are registered.
    from watcher.objects import audit as watcher_audit
    if field('audit_type') != watcher_audit.AuditType.CONTINUOUS.value:
        return 0.0
    interval = field('interval')
    wanted = 'expected seconds or a cron schedule that runs'
    if strutils.is_int_like(interval):
        if int(interval) < 0:
            raise planner.PoolFitError('audit interval: %r: %s' % (
                interval, wanted))
        return float(int(interval))
    from croniter import croniter       # Watcher's own, for these
    try:
        runs = croniter(interval, datetime.datetime.fromtimestamp(
            now, datetime.timezone.utc))
        last, longest = runs.get_next(float), 0.0
        for _ in range(2000):
            run = runs.get_next(float)
            longest = max(longest, run - last)
            last = run
            if run - now > 8 * planner.DAY_S:
                break
    except (ValueError, TypeError, AttributeError) as exc:
        raise planner.PoolFitError('audit interval: %r: %s (%s)' % (
            interval, wanted, str(exc).splitlines()[0] if str(exc)
            else type(exc).__name__))
    return longest


def _property(key):
    default, low, high = _BOUNDS[key]
    return {'description': PARAMETERS[key], 'default': default,
            'type': 'integer' if isinstance(default, int) else 'number',
            'minimum': low, 'maximum': high}


def _instance(model, uuid):
    if model is None:
        return None
    try:
        return model.get_instance_by_uuid(uuid)
    except watcher_exception.InstanceNotFound:
        return None


@contextlib.contextmanager
def _cyclic_gc_paused():
    """Python's cyclic garbage collector paused while the audit builds
    its guests and holds (one of each per instance: 80,000 objects at
    2,000 hosts x 20 guests, whose allocation makes the collector scan
    Watcher's whole model again and again: a third of the audit, in
    bench/bench_strategy.py).  They hold no cycles; reference counting
    frees them as ever, and the collector resumes after (if it ran
    before), whatever happens."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


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
        # As Watcher's own strategies: an object of bounded properties,
        # checked by Watcher's API when the audit is created.  The
        # relations between them (cooldown_s >= window_s, ...) are not
        # JSON schema: planner.Params checks them when the audit runs.
        return {'type': 'object',
                'properties': {key: _property(key) for key in PARAMETERS},
                'additionalProperties': False}

    @classmethod
    def get_config_opts(cls):
        return super().get_config_opts() + [
            cfg.StrOpt('prometheus_url', default='',
                       help='The Prometheus (or any PromQL endpoint) that '
                            'scrapes the nova-paging agents, unauthenticated. '
                            'Unset: the endpoint Watcher\'s datasources use, '
                            'the first of aetos ([aetos_client]) and '
                            'prometheus ([prometheus_client], its auth, CA, '
                            'client certificate and fqdn_label) in this '
                            'strategy\'s datasources or [watcher_datasources] '
                            'datasources.'),
            cfg.FloatOpt('prometheus_timeout', default=30.0, min=1,
                         help='Seconds a query may take.'),
        ]

    # The moves this decision engine's audits proposed that Watcher's
    # database may not hold yet: shared by every audit of the process.
    reservations = ledger.Reservations()

    def __init__(self, config, osc=None):
        super().__init__(config, osc)
        # The figures' source: Prometheus, unless a caller gives another;
        # read now, unless a caller replaying the past names a time.
        self.figures = None
        self.figures_at = None
        # The moves' source: Watcher's database, unless a caller gives
        # another (ledger.Recorded).
        self.ledger = None
        self.plan = None

    def pre_execute(self):
        # Watcher's _pre_execute, but the model serialized for its debug
        # line only when debug logging is on: seconds at 2,000 hosts.
        LOG.info('Initializing %s', self.get_display_name())
        if not self.compute_model:
            raise watcher_exception.ClusterStateNotDefined()
        # Without them every guest would look static and nothing move,
        # silently: Watcher's Nova collector leaves flavor extra specs
        # out of its model unless this is on.
        if not self.compute_model.extended_attributes_enabled:
            raise watcher_exception.WatcherException(
                'paging_fit: Watcher\'s compute model has no flavor extra '
                'specs, so no guest asks for hw:paging=adaptive: set '
                '[compute_model] enable_extended_attributes = true')
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug(self.compute_model.to_string())

    def _params(self):
        given = self.input_parameters or {}
        value = {k: given.get(k, _BOUNDS[k][0]) for k in PARAMETERS}
        try:
            params = planner.Params(**{k: value[k] for k in planner.BOUNDS})
            link = migration.Link(**{k: value[k] for k in _LINK_KEYS})
        except (planner.PoolFitError, migration.MigrationError) as exc:
            raise watcher_exception.WatcherException('paging_fit: %s' % exc)
        return params, link

    def _read_figures(self, window_s):
        if self.figures is not None:
            return self.figures
        try:
            where = source.for_strategy(self.config, self.osc)
            return pool_figures.read(where.client, '%ds' % window_s,
                                     self.figures_at, where.fqdn_label)
        except prometheus_api.PrometheusError as exc:
            raise watcher_exception.WatcherException(
                'paging_fit: no figures, no move: %s' % exc)

    def _ledger(self, audit):
        if self.ledger is not None:
            return self.ledger
        context = getattr(audit, '_context', None)
        if context is None:
            from watcher.common import context as watcher_context
            context = watcher_context.make_context(is_admin=True)
        return ledger.WatcherLedger(context)

    def _model(self, figures, moves, now):
        """The planner's hosts and guests from Watcher's model, and its
        compute nodes by host name.  One pass, each field read once: at
        2,000 hosts x 20 guests the versioned objects' getters are most
        of an audit (bench/bench_strategy.py)."""
        model = self.compute_model
        hosts, guests, nodes = [], [], {}
        resolve = figures.resolver()
        active = element.InstanceState.ACTIVE.value
        enabled = element.ServiceState.ENABLED.value
        online = element.ServiceState.ONLINE.value
        wanted_by_specs = {}
        for node in model.get_all_compute_nodes().values():
            hostname = node.hostname
            nodes.setdefault(hostname, node)
            named = resolve(hostname)
            # Its free room as Watcher's get_node_free_resources counts
            # it (capacity less every instance mapped to it), from the
            # instances read here once.
            used_vcpus = used_memory = used_disk = 0
            for inst in model.get_node_instances(node):
                size = inst.vcpus, inst.memory, inst.disk
                used_vcpus += size[0]
                used_memory += size[1]
                used_disk += size[2]
                if (inst.state != active or inst.watcher_exclude
                        or inst.locked):
                    continue
                specs = inst.flavor_extra_specs or {}
                try:
                    key = frozenset(specs.items())
                except TypeError:       # a value Nova would not hold
                    key = id(specs)
                if key not in wanted_by_specs:
                    try:
                        wanted = policy.from_extra_specs(specs).paging
                    except policy.PolicyError:
                        wanted = None
                    wanted_by_specs[key] = (wanted.value if wanted
                                            is not None else '')
                uuid = inst.uuid
                seen = figures.guests.get(uuid)
                current = seen is not None and seen.host == named
                history = moves.history.get(uuid, ())
                guests.append(planner.Guest(
                    uuid, hostname, wanted_by_specs[key], *size,
                    observed_s=seen.observed_s if current else None,
                    window_gain_s=seen.window_gain_s if current else None,
                    moves=tuple(
                        (now - at, figures.pools.get(resolve(dest), dest),
                         now - decided)
                        for at, dest, decided in history) if history
                    else ()))
            hosts.append(planner.Host(
                hostname, figures.pools.get(named),
                node.vcpu_capacity - used_vcpus,
                node.memory_mb_capacity - used_memory,
                node.disk_gb_capacity - used_disk,
                enabled=(node.status == enabled and node.state == online)))
        return hosts, guests, nodes

    def _pending(self, moves):
        """Moves planned or under way, sized from the model (the whole
        cluster's when the audit's scope leaves their guest out; unknown
        if neither has it)."""
        out, models = [], [self.compute_model]
        for uuid, src, dest in moves.pending:
            need = None
            for i in range(2):
                if i == len(models):
                    models.append(self._whole_model())
                inst = _instance(models[i], uuid)
                if inst is not None:
                    need = (inst.vcpus, inst.memory, inst.disk)
                    break
            out.append(planner.Pending(uuid, src, dest, need))
        return out

    def _whole_model(self):
        try:
            return self.collector_manager.get_cluster_model_collector(
                'compute', osc=self.osc).get_latest_cluster_data_model()
        except Exception as exc:        # sizes of other scopes unknown
            LOG.debug('paging_fit: no whole compute model: %s', exc)
            return None

    def do_execute(self, audit=None):
        params, link = self._params()
        figures = self._read_figures(params.window_s)
        now = self.figures_at if self.figures_at is not None else time.time()
        # Whether a guest's way back is a reversal depends on how far
        # apart the audits are (planner._cooldown).
        try:
            params = dataclasses.replace(
                params, audit_interval_s=audit_interval_s(audit, now))
        except planner.PoolFitError as exc:
            raise watcher_exception.WatcherException('paging_fit: %s' % exc)
        # One audit of this process plans at a time, and sees the moves
        # the others proposed (Watcher's database, and this process's
        # reservations for what it may not have saved yet: a move in
        # both holds its room once, the planner's rule).
        with self.reservations.lock:
            moves = self._ledger(audit).read(now)
            with _cyclic_gc_paused():
                hosts, guests, nodes = self._model(figures, moves, now)
                self.plan = planner.plan(
                    guests, hosts, params, link,
                    pending=self._pending(moves) + self.reservations.live())
            for move in self.plan.moves:
                self.reservations.add(planner.Pending(
                    move.guest.uuid, move.source, move.destination,
                    (move.guest.vcpus, move.guest.memory_mib,
                     move.guest.disk_gb)))
        model = self.compute_model
        for kind, count in sorted(figures.dropped.items()):
            LOG.warning('paging_fit: %d series dropped: %s', count, kind)
        # Why each guest stays: a count per reason at INFO, and one line
        # per guest at DEBUG (an audit of 40,000 guests holds nearly all
        # of them, every hour).
        held = collections.Counter(hold.kind for hold in self.plan.holds)
        if held:
            LOG.info('paging_fit: guests that stay: %s', ', '.join(
                '%d %s' % (n, kind) for kind, n in sorted(held.items())))
        if LOG.isEnabledFor(logging.DEBUG):
            for hold in self.plan.holds:
                LOG.debug('paging_fit: %s on %s stays: %s', hold.guest.uuid,
                          hold.guest.host, hold.reason)
        for move in self.plan.moves:
            LOG.info('paging_fit: %s moves %s -> %s (%s): %.1f s gained '
                     'over the horizon for %.1f s of migration (modeled)',
                     move.guest.uuid, move.source, move.destination,
                     move.to_mode, move.horizon_gain_s, move.cost_s)
            self.add_action_migrate(
                model.get_instance_by_uuid(move.guest.uuid), 'live',
                nodes[move.source], nodes[move.destination])
        self.solution.set_efficacy_indicators(
            instance_migrations_count=len(self.plan.moves),
            modeled_gain_seconds=round(math.fsum(
                m.horizon_gain_s - m.cost_s for m in self.plan.moves), 3),
            guests_held=sum(1 for h in self.plan.holds
                            if h.kind != planner.STATIC),
            figures_dropped=sum(figures.dropped.values()) + len(
                self.plan.held(planner.BAD_FIGURES)))

    def post_execute(self):
        pass
