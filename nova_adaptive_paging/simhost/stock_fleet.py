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

"""A modeled day of a fleet of stock kernels in a hap and a shadow pool,
with the ``paging_fit`` Watcher strategy moving its adaptive guests
(every figure is MODELED).

Four simulated hosts run stock KVM: two with TDP (the hap pool), two
with ``npt=0`` (the shadow pool), each with the project's real agent in
advisory mode (its libvirt is the real test driver; its guests' page
faults come from the simulated guests, as balloon statistics would:
:class:`.fleet.SimBalloon`).  Every modeled hour:

1. the fleet runs an hour; its agents are scraped every minute into
   OpenMetrics, which ``promtool`` backfills into a real Prometheus
   (:mod:`.prometheus`), restarted on the data so far;
2. Watcher's strategy loader loads ``paging_fit`` (the entry point), and
   the strategy runs on Watcher's cluster data model of the fleet (what
   Watcher's Nova collector would build), reading the agents' figures
   from that Prometheus with the project's PromQL;
3. its action plan's ``migrate`` actions are applied to the simulated
   fleet: the guest goes on, on the destination host, in that host's
   mode, after the migration model's cost.

The guests' day-long workloads are built from the shipped traces: some
favour one mode all day, some change at noon, one alternates every half
hour, two have a static ``hw:paging``.  The same workloads are replayed
by the evaluator as the baselines: every adaptive guest in the hap pool,
every one in the shadow pool, each in the pool that suits its whole day
best, and adaptive paging on the patched kernel (the in-kernel engine,
per guest) with the evaluator's oracle.

With boot placement (``boot_placement=True``), the adaptive guests boot
where Nova's weighers put them, as on the harder day
(:class:`.pool_day.Placement`: the RAM weigher and the paging pool
weigher), given the fleet's history of their images (:func:`history`),
instead of on the hosts the table of guests names.

``python -m nova_adaptive_paging.simhost.stock_fleet OUT.json [HOURS]
[--boot-placement]`` runs it in a process of its own (the agents'
libvirt threads cannot live with eventlet) and writes the figures.
"""

import dataclasses
import json
import math
import os
import sys
import tempfile
import time

from nova_adaptive_paging.costmodel import evaluator
from nova_adaptive_paging.costmodel import traces as tracelib
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.simhost import libvirt_xml
from nova_adaptive_paging.simhost import prometheus
from nova_adaptive_paging import vocabulary

HOUR = 3600
HAP, SHADOW = vocabulary.HAP, vocabulary.SHADOW
# Host: (name, pool).  Capacity as Watcher's model sees it.
HOSTS = (('hap-1', HAP), ('hap-2', HAP), ('shadow-1', SHADOW),
         ('shadow-2', SHADOW))
HOST_VCPUS, HOST_MEMORY_MIB, HOST_DISK_GB = 16, 64 * 1024, 500
GUEST_VCPUS, GUEST_MEMORY_MIB, GUEST_DISK_GB = 2, 4096, 20
# A guest's day: (hours, shipped trace) pieces, repeated in order until
# ``DAY_H`` hours of native time.  The traces' static preferences on the
# fleet's hardware: mcf, spec-int-t1-row07 and -row11 run faster with
# shadow paging (TLB misses), gcc, -row04 and -row08 with hap (faults).
DAY_H = 24
GUESTS = (
    # name, hw:paging, first host, day
    ('tlb-all-day', 'adaptive', 'hap-1', ((24, 'mcf'),)),
    ('faults-all-day', 'adaptive', 'shadow-1', ((24, 'gcc'),)),
    ('tlb-then-faults', 'adaptive', 'hap-2',
     ((12, 'spec-int-t1-row07'), (12, 'spec-int-t1-row04'))),
    ('faults-then-tlb', 'adaptive', 'hap-1',
     ((12, 'spec-int-t1-row08'), (12, 'spec-int-t1-row11'))),
    ('alternating', 'adaptive', 'hap-2', ((0.5, 'mcf'), (0.5, 'gcc'))),
    ('phases', 'adaptive', 'shadow-2', ((24, 'phases-tlb-fault'),)),
    ('pinned-hap', 'hap', 'hap-1', ((24, 'mcf'),)),
    ('pinned-shadow', 'shadow', 'shadow-2', ((24, 'spec-int-t1-row12'),)),
)
ROW_S = 10          # the day's traces in rows of this many seconds
PROJECT = '00000000-0000-4000-8000-00000000abcd'


def image_of(name):
    """The image a guest of the table boots from: one per workload."""
    return '00000000-0000-4000-8000-%012d' % (
        [n for n, _, _, _ in GUESTS].index(name) + 1)


def _coarsen(trace, row_s):
    """``trace`` with its rows summed into rows of ``row_s`` seconds."""
    cols = {c: [] for c in ('interval_s', 'instructions', 'tlb_misses',
                            'page_faults', 'cr3_writes', 'working_set_mib')}
    acc = None
    for i in range(len(trace)):
        row = [trace.interval_s[i], trace.instructions[i],
               trace.tlb_misses[i], trace.page_faults[i],
               trace.cr3_writes[i], trace.working_set_mib[i]]
        if acc is None:
            acc = row
        else:
            acc = [a + b for a, b in zip(acc[:5], row[:5])] + [
                max(acc[5], row[5])]
        if acc[0] >= row_s:
            for key, value in zip(cols, acc):
                cols[key].append(value)
            acc = None
    if acc is not None:
        for key, value in zip(cols, acc):
            cols[key].append(value)
    return cols


def day_trace(name, pieces, shipped, hours=DAY_H, row_s=ROW_S):
    """A trace of ``hours`` native hours from (hours, trace) pieces."""
    cols = {c: [] for c in ('interval_s', 'instructions', 'tlb_misses',
                            'page_faults', 'cr3_writes', 'working_set_mib')}
    done, k = 0.0, 0
    coarse = {t: _coarsen(shipped[t], row_s) for _, t in pieces}
    while done < hours * HOUR - 1e-9:
        piece_h, tname = pieces[k % len(pieces)]
        k += 1
        src, want, i = coarse[tname], min(piece_h * HOUR,
                                          hours * HOUR - done), 0
        got = 0.0
        while got < want - 1e-9:
            j = i % len(src['interval_s'])
            for key in cols:
                cols[key].append(src[key][j])
            got += src['interval_s'][j]
            i += 1
        done += got
    return tracelib.Trace(name=name, has_working_set=True,
                          **{k: tuple(v) for k, v in cols.items()})


def shares(fleet):
    """What ``fleet['fleet']`` reached of the gain of adaptive paging on
    the patched kernel over each baseline: the better static pool (all
    guests in one pool), and each guest in its best pool for its whole
    life.  ``fleet``: seconds by policy (hap, shadow, adaptive,
    best_static_per_guest, fleet)."""
    patched = fleet[vocabulary.ADAPTIVE]
    better = min(fleet[HAP], fleet[SHADOW])
    per_guest = fleet['best_static_per_guest']
    return {
        'vs_better_static_pool': (better - fleet['fleet'])
        / (better - patched),
        'vs_best_pool_per_guest': (per_guest - fleet['fleet'])
        / (per_guest - patched),
    }


def summary(fleet, migrations, guests, name='paging_fit'):
    """The day's figures against both baselines, for people (MODELED);
    ``name``: what ran the fleet."""
    share = shares(fleet)
    rows = [('all in the hap pool', fleet[HAP]),
            ('all in the shadow pool', fleet[SHADOW]),
            ('each in its best pool all along',
             fleet['best_static_per_guest']),
            ('%s (%d migrations)' % (name, migrations), fleet['fleet']),
            ('adaptive paging on the patched kernel',
             fleet[vocabulary.ADAPTIVE])]
    lines = ['MODELED: %d adaptive guests\' time for their work' % guests]
    lines += ['  %-48s %12.0f s' % row for row in rows]
    lines.append('  %s reaches %.1f %% of the patched kernel\'s gain '
                 'over the better static pool' % (
                     name, 100 * share['vs_better_static_pool']))
    lines.append('  and %.1f %% of its gain over each guest in its best pool '
                 'all along' % (100 * share['vs_best_pool_per_guest']))
    return '\n'.join(lines)


@dataclasses.dataclass
class Result:
    hours: int
    guests: dict         # name -> per-guest figures
    fleet: dict          # policy -> seconds summed over adaptive guests
    migrations: int
    audits: list
    shares: dict = None  # shares(fleet)
    boot_placement: bool = False

    def to_dict(self):
        return dataclasses.asdict(self)


def _watcher_model(fleet, specs, where):
    """Watcher's cluster data model of the fleet, as its Nova collector
    builds it from Nova: a compute node per host, an instance per guest
    with its flavor's extra specs."""
    from watcher.decision_engine.model import element
    from watcher.decision_engine.model import model_root
    model = model_root.ModelRoot()
    # With each guest's flavor extra specs, as Watcher's collector gives
    # them with [compute_model] enable_extended_attributes.
    model.extended_attributes_enabled = True
    nodes = {}
    for name, _ in HOSTS:
        node = element.ComputeNode(
            uuid='00000000-0000-4000-8000-%012d' % len(nodes),
            hostname=name, memory=HOST_MEMORY_MIB, memory_mb_reserved=0,
            disk=HOST_DISK_GB, disk_gb_reserved=0, vcpus=HOST_VCPUS,
            vcpu_reserved=0, memory_ratio=1.0, vcpu_ratio=1.0,
            disk_ratio=1.0)
        model.add_node(node)
        nodes[name] = node
    for spec_ in specs:
        inst = element.Instance(
            uuid=spec_.uuid, name=spec_.name, memory=spec_.memory_mib,
            disk=GUEST_DISK_GB, vcpus=spec_.vcpus,
            flavor_extra_specs=dict(spec_.extra_specs),
            state=element.InstanceState.ACTIVE.value,
            project_id=PROJECT,
            host=where[spec_.name])
        model.add_instance(inst)
        model.map_instance(inst, nodes[where[spec_.name]])
    return model


def _baselines(hw, profile, day_traces):
    out = {}
    for name, trace in day_traces.items():
        r = evaluator.evaluate(trace, hw, profile)['policies']
        out[name] = {p: r[p]['time_s'] for p in (
            HAP, SHADOW, vocabulary.ADAPTIVE, evaluator.ORACLE)}
    return out


def history(hw, day):
    """What the fleet has learned of the day's images before it (a
    :class:`.pools.boot.History`): two earlier guests of each adaptive
    guest's image, each a whole day of its workload, one in each pool,
    as their agents priced it (at the true costs: the simulated hosts'
    agents know them; no CR3 writes)."""
    from nova_adaptive_paging.pools import boot
    from nova_adaptive_paging.simhost import pool_day
    prices = {m: {e: hw.cost_s(m, e) for e in pool_day.EVENTS}
              for m in pool_day.MODES}
    stints = []
    for name, paging, _, _ in GUESTS:
        if paging != vocabulary.ADAPTIVE:
            continue
        replay = evaluator.Replay(day[name], hw)
        gains = pool_day.priced(day[name], prices)
        for i, mode in enumerate(pool_day.MODES):
            stints.append(boot.Stint(
                '%s-before-%s' % (name, mode), image_of(name), PROJECT,
                mode, math.fsum(replay.rows_time[i]), gains[i][-1]))
    return boot.History(stints, dict(HOSTS), {})


def _boot_hosts(hours):
    """Each guest's first host with boot placement: an adaptive guest's
    is where Nova's weighers put it, in the table's order, given
    :func:`history`; a static guest keeps the table's.  Nova's scheduler
    and Watcher each register ``[DEFAULT] host`` in oslo.config's global
    CONF, so, as in a cloud, they run in processes of their own: this
    one in a process it starts."""
    import concurrent.futures
    import multiprocessing
    with concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context('spawn')) as pool:
        return pool.submit(_weigh_boots, hours).result()


def _weigh_boots(hours):
    import types
    from nova_adaptive_paging.simhost import pool_day
    hw = simfleet.truths()[0]
    shipped = tracelib.builtin()
    day = {name: day_trace(name, pieces, shipped, hours)
           for name, _, _, pieces in GUESTS}
    first = {name: host for name, _, host, _ in GUESTS}
    place = pool_day.Placement(True)
    place.history = history(hw, day)
    used = {name: 0 for name, _ in HOSTS}
    for name, paging, _, _ in GUESTS:
        if paging != vocabulary.ADAPTIVE:
            used[first[name]] += 1
    for k, (name, paging, _, _) in enumerate(GUESTS):
        if paging == vocabulary.ADAPTIVE:
            first[name] = place.choose(types.SimpleNamespace(
                uuid='00000000-0000-4000-8000-1%011d' % k,
                image=image_of(name), project=PROJECT), sorted(used), {
                    h: HOST_MEMORY_MIB - n * GUEST_MEMORY_MIB
                    for h, n in used.items()})
            used[first[name]] += 1
    return first


def run(workdir, hours=DAY_H, agent_interval_s=30, scrape_s=60,
        strategy_params=None, log=None, boot_placement=False):
    """The modeled day under ``workdir``; a :class:`Result`.
    ``boot_placement``: the adaptive guests boot where Nova's weighers,
    with the paging pool weigher, put them (:func:`_boot_hosts`)."""
    from oslo_config import cfg
    from watcher.common import utils as watcher_utils
    from watcher.decision_engine.loading import default as loading
    cfg.CONF([], project='watcher', default_config_files=[])
    libvirt_xml.USE_NOVA = False

    log = log or (lambda text: None)
    shipped = tracelib.builtin()
    hw = simfleet.truths()[0]
    profile = profiles.builtin()
    day = {name: day_trace(name, pieces, shipped, hours)
           for name, _, _, pieces in GUESTS}
    specs = [simhost.VmSpec(name, day[name], {'hw:paging': paging},
                            flavor='m1.%s' % paging,
                            memory_mib=GUEST_MEMORY_MIB, vcpus=GUEST_VCPUS,
                            balloon=True, guest_faults=False)
             for name, paging, _, _ in GUESTS]
    first = ({name: host for name, _, host, _ in GUESTS}
             if not boot_placement else _boot_hosts(hours))
    fleet = simfleet.Fleet(os.path.join(workdir, 'fleet'))
    for name, pool in HOSTS:
        fleet.add_host(name, hw, hw.generation,
                       [s for s in specs if first[s.name] == name],
                       stock=True, tdp=(pool == HAP), balloon=True,
                       pool=True)
    where = dict(first)
    by_uuid = {s.uuid: s.name for s in specs}
    end = math.floor(time.time()) - 60
    epoch = end - (hours + 8) * HOUR    # room for the day's overrun
    tsdb = os.path.join(workdir, 'prometheus')
    os.makedirs(tsdb, exist_ok=True)
    audits, migrations = [], 0
    # Watcher's action history, as its database would hold it: the
    # strategy's hysteresis and daily cap read it.
    from nova_adaptive_paging.watcher import ledger
    moves = ledger.Recorded()
    reservations = ledger.Reservations()
    for hour in range(1, hours + 8):
        scrapes = []
        fleet.run(HOUR, agent_interval_s=agent_interval_s,
                  scrape_s=scrape_s, epoch=epoch, sink=scrapes.append)
        at = epoch + fleet.clock.ns / 1e9
        server = prometheus.Server(tsdb, openmetrics=simfleet.openmetrics(
            scrapes))
        try:
            strategy = loading.DefaultStrategyLoader().load('paging_fit')
            strategy.config = watcher_utils.Struct(
                prometheus_url=server.url, prometheus_timeout=30.0)
            strategy.figures_at = at
            strategy.ledger = moves
            strategy.reservations = reservations
            strategy._compute_model = _watcher_model(fleet, specs, where)
            strategy.input_parameters = watcher_utils.Struct(
                strategy_params or {})
            solution = strategy.execute()
        finally:
            server.stop()
        # The migration costs the guest what the strategy priced it at.
        cost_s = {m.guest.uuid: m.cost_s for m in strategy.plan.moves}
        moved = []
        for action in solution.actions:
            if action['action_type'] != 'migrate':
                continue
            p = action['input_parameters']
            name = by_uuid[p['resource_id']]
            fleet.migrate(name, p['source_node'], p['destination_node'],
                          int(cost_s[p['resource_id']] * 1e9))
            where[name] = p['destination_node']
            moves.record(p['resource_id'], p['source_node'],
                         p['destination_node'], at)
            moved.append((name, p['source_node'], p['destination_node']))
            migrations += 1
        held = {h.guest.uuid: h.reason for h in strategy.plan.holds}
        audits.append({'hour': hour, 'moves': moved,
                       'held': {by_uuid[u]: r for u, r in held.items()}})
        log('hour %d: %s' % (hour, ', '.join(
            '%s %s->%s' % m for m in moved) or 'no move'))
        vms = {n: vm for m in fleet.members for n, vm in m.sim.vms.items()}
        if all(vm.finished for vm in vms.values()):
            break
    vms = {n: vm for m in fleet.members for n, vm in m.sim.vms.items()}
    base = _baselines(hw, profile, day)
    guests = {}
    for name, paging, _, _ in GUESTS:
        vm = vms[name]
        done = (vm.finished_at_ns / 1e9 if vm.finished_at_ns is not None
                else math.inf)
        guests[name] = dict(base[name], policy=paging, fleet=done,
                            host=where[name], booted=first[name])
    adaptive = [n for n, p, _, _ in GUESTS if p == vocabulary.ADAPTIVE]
    fleet_sum = {key: math.fsum(guests[n][key] for n in adaptive)
                 for key in (HAP, SHADOW, vocabulary.ADAPTIVE,
                             evaluator.ORACLE, 'fleet')}
    fleet_sum['best_static_per_guest'] = math.fsum(
        min(guests[n][HAP], guests[n][SHADOW]) for n in adaptive)
    return Result(hours, guests, fleet_sum, migrations, audits,
                  shares(fleet_sum), boot_placement)


def main(argv=None):
    args = (argv or sys.argv)[1:]
    boot_placement = '--boot-placement' in args
    args = [a for a in args if a != '--boot-placement']
    out = args[0]
    hours = int(args[1]) if len(args) > 1 else DAY_H
    with tempfile.TemporaryDirectory() as work:
        result = run(work, hours, log=lambda t: print(t, flush=True),
                     boot_placement=boot_placement)
    with open(out, 'w', encoding='utf-8') as f:
        json.dump(result.to_dict(), f, indent=1)
    print(summary(result.fleet, result.migrations, sum(
        1 for g in result.guests.values()
        if g['policy'] == vocabulary.ADAPTIVE)))


if __name__ == '__main__':
    main()
