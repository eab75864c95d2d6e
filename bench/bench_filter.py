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

"""Benchmark: AdaptivePagingFilter against Nova's
AggregateInstanceExtraSpecsFilter on the same hosts, in the same run.

Runs both filters' ``filter_all`` (what Nova's filter handler calls) over
10,000 HostStates for 100 requests, for a paired flavor (hw:paging and its
trait) and one with hw:paging only (the request filter adds the trait
first, as the scheduler runs it), and reports the median time of several
repetitions and the ratio to Nova's filter.  Placement is not involved:
it has selected the candidates before either filter runs.

    python bench/bench_filter.py [--hosts 10000] [--requests 100]
"""

from nova import monkey_patch

monkey_patch.patch()

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
import uuid  # noqa: E402

from nova import objects  # noqa: E402
from nova.scheduler.filters import (  # noqa: E402
    aggregate_instance_extra_specs as aies)
from nova.tests.unit.scheduler import fakes  # noqa: E402

from nova_adaptive_paging import capabilities  # noqa: E402
from nova_adaptive_paging import policy  # noqa: E402
from nova_adaptive_paging.scheduler.filters import (  # noqa: E402
    paging_filter)
from nova_adaptive_paging.scheduler import request_filter  # noqa: E402
from nova_adaptive_paging import vocabulary  # noqa: E402

objects.register_all()


def make_hosts(count):
    agg = objects.Aggregate(id=1, name='paging', hosts=[],
                            metadata={'paging': 'adaptive'})
    hosts = []
    for i in range(count):
        hosts.append(fakes.FakeHostState(
            'host%d' % i, 'node%d' % i,
            {'uuid': str(uuid.uuid4()), 'aggregates': [agg]}))
    return hosts


def make_spec(extra_specs):
    spec = objects.RequestSpec(
        flavor=objects.Flavor(name='bench', extra_specs=extra_specs),
        scheduler_hints={}, instance_uuid=str(uuid.uuid4()))
    spec._context = types.SimpleNamespace(request_id='req-' + str(
        uuid.uuid4()))
    return spec


def run(flt, hosts, specs):
    start = time.perf_counter()
    passed = 0
    for spec in specs:
        if isinstance(flt, paging_filter.AdaptivePagingFilter):
            request_filter.require_paging_trait(None, spec)
        passed += len(list(flt.filter_all(hosts, spec)))
    return time.perf_counter() - start, passed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, default=10000)
    parser.add_argument('--requests', type=int, default=100)
    parser.add_argument('--repeat', type=int, default=5)
    args = parser.parse_args()

    hosts = make_hosts(args.hosts)
    # The scheduler as configured with the filter (its request filter
    # acts only then); its state stays out of the machine's node_exporter.
    request_filter.CONF.set_override(
        'enabled_filters', [request_filter.FILTER_NAME], 'filter_scheduler')
    request_filter.CONF.set_override('textfile_collector_dir', '',
                                     'adaptive_paging')
    ours = paging_filter.AdaptivePagingFilter()
    theirs = aies.AggregateInstanceExtraSpecsFilter()
    paired = capabilities.flavor_extra_specs(policy.PagingPolicy(
        vocabulary.Paging.ADAPTIVE))
    cases = {
        # hw:paging with its trait: the filter only checks aggregates.
        'AdaptivePaging, paired flavor': (ours, paired),
        # hw:paging alone: the request filter requires the trait first.
        'AdaptivePaging, hw:paging only': (ours, {'hw:paging': 'adaptive'}),
        'AggregateInstanceExtraSpecs': (theirs, {
            'aggregate_instance_extra_specs:paging': 'adaptive'}),
    }
    times = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, (flt, extra_specs) in cases.items():
            specs = [make_spec(dict(extra_specs))
                     for _ in range(args.requests)]
            took, passed = run(flt, hosts, specs)
            # Every host passes (placement selected; the aggregate allows).
            assert passed == len(hosts) * args.requests, name
            times[name].append(took)

    print('%d hosts x %d requests, median of %d runs'
          % (args.hosts, args.requests, args.repeat))
    medians = {name: statistics.median(values)
               for name, values in times.items()}
    base = medians['AggregateInstanceExtraSpecs']
    for name, median in medians.items():
        print('  %-32s %8.3f s  (%.2f us per host check, %.2fx Nova\'s '
              'filter)' % (name, median,
                           median / (args.hosts * args.requests) * 1e6,
                           median / base))


if __name__ == '__main__':
    main()
