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

"""Benchmark: one ``paging_fit`` audit on a large fleet, on Watcher's
cluster data model, as Watcher's decision engine runs it.

Builds Watcher's model of ``--hosts`` hosts (half in the hap pool, half
in the shadow pool) with ``--guests`` adaptive guests each, the agents'
figures for every guest (a tenth losing enough to move), a day of move
history for a tenth of them and moves in flight to a fiftieth of the
hosts, then times the strategy's ``execute()`` (the loader's strategy:
its ledger, the planner, the actions, the efficacy indicators; not the
Prometheus queries, whose answers are given) and reports the median of
``--repeat`` audits, with the model's build time beside it.  MODELED
figures: the decision's speed, not a fleet's.

    python bench/bench_strategy.py [--hosts 2000] [--guests 20]
"""

import argparse
import os
import statistics
import sys
import time
import uuid

# The checkout's package, not an installed copy (the loader's entry point
# names the module; the first on the path answers).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from oslo_config import cfg  # noqa: E402
from watcher.common import utils as watcher_utils  # noqa: E402
from watcher.decision_engine.loading import default as loading  # noqa: E402
from watcher.decision_engine.model import element  # noqa: E402
from watcher.decision_engine.model import model_root  # noqa: E402

from nova_adaptive_paging.pools import figures as pool_figures  # noqa: E402
from nova_adaptive_paging.watcher import ledger  # noqa: E402

HOUR = 3600.0
PROJECT = str(uuid.UUID(int=7))


def fleet(hosts, guests):
    model = model_root.ModelRoot()
    # With the flavors' extra specs ([compute_model]
    # enable_extended_attributes), as the strategy needs them.
    model.extended_attributes_enabled = True
    pools, seen, moves = {}, {}, ledger.Recorded()
    now = 100 * HOUR
    for h in range(hosts):
        name = '%s-%05d' % ('hap' if h % 2 == 0 else 'shadow', h)
        pools[name] = 'hap' if h % 2 == 0 else 'shadow'
        node = element.ComputeNode(
            uuid=str(uuid.UUID(int=h + 1)), hostname=name, memory=512 * 1024,
            memory_mb_reserved=0, disk=4000, disk_gb_reserved=0, vcpus=128,
            vcpu_reserved=0, memory_ratio=1.0, vcpu_ratio=1.0,
            disk_ratio=1.0)
        model.add_node(node)
        for g in range(guests):
            k = h * guests + g
            inst = element.Instance(
                uuid=str(uuid.UUID(int=(1 << 64) + k)), name='vm%d' % k,
                memory=4096, disk=20, vcpus=2,
                flavor_extra_specs={'hw:paging': 'adaptive'},
                state=element.InstanceState.ACTIVE.value,
                project_id=PROJECT, host=name)
            model.add_instance(inst)
            model.map_instance(inst, node)
            gain = 600.0 if k % 10 == 0 else -50.0
            seen[inst.uuid] = pool_figures.GuestFigures(name, 10 * HOUR, gain)
            if k % 10 == 3:
                moves.record(inst.uuid, 'elsewhere', name, now - 5 * HOUR)
            if k % (50 * guests) == 1:
                moves.under_way.append((inst.uuid, name, 'shadow-%05d' % (
                    h | 1)))
    return model, pool_figures.Figures(pools, seen), moves, now


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=2000)
    parser.add_argument('--guests', type=int, default=20)
    parser.add_argument('--repeat', type=int, default=5)
    args = parser.parse_args()
    cfg.CONF([], project='watcher', default_config_files=[])
    start = time.perf_counter()
    model, figures, moves, now = fleet(args.hosts, args.guests)
    built = time.perf_counter() - start
    times, plan = [], None
    for _ in range(args.repeat):
        s = loading.DefaultStrategyLoader().load('paging_fit')
        s._compute_model = model
        s.figures, s.figures_at, s.ledger = figures, now, moves
        s.reservations = ledger.Reservations()
        s.input_parameters = watcher_utils.Struct({})
        start = time.perf_counter()
        solution = s.execute()
        times.append(time.perf_counter() - start)
        plan = s.plan
    print('paging_fit, one audit on Watcher\'s model: %d hosts x %d guests '
          '(%d guests), %d moves proposed, %d held' % (
              args.hosts, args.guests, args.hosts * args.guests,
              len(solution.actions), len(plan.holds)))
    print('  model built in %.2f s (Watcher\'s, not the strategy\'s)' % built)
    print('  audit: median %.3f s over %d runs (min %.3f, max %.3f)' % (
        statistics.median(times), len(times), min(times), max(times)))


if __name__ == '__main__':
    main()
