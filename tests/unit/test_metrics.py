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

"""The metric names' one definition against the Prometheus conventions
and the kernel's paging_stats keys."""

import re

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import vocabulary

# Prometheus' metric and label name grammar.
NAME = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*$')
LABEL = re.compile(r'^[a-zA-Z_][a-zA-Z0-9_]*$')


def test_names_follow_the_prometheus_conventions():
    assert len(metrics.BY_NAME) == len(metrics.ALL) >= 10
    for m in metrics.ALL:
        assert NAME.match(m.name) and m.name.startswith('nova_paging_'), m
        assert all(LABEL.match(label) and not label.startswith('__')
                   for label in m.labels), m
        # Counters end in _total; nothing is exported in nanoseconds.
        assert m.name.endswith('_total') == (m.kind == metrics.COUNTER), m
        assert '_ns' not in m.name and m.help.endswith('.'), m


def test_sources_are_paging_stats_keys_in_base_units():
    for m in metrics.ALL:
        for source in m.sources():
            assert source in spec.STATS_KEYS, m
            assert (m.scale == 1e-9) == source.endswith('_ns'), m
            # Cycles become seconds with the host's clock (at scrape).
            assert m.name.endswith('seconds_total') == source.endswith(
                ('_ns', '_cycles')), m
        if isinstance(m.source, dict):
            # One family per quantity: the variants are its last label.
            assert set(m.source) == set(vocabulary.MODES), m
    # Every counter the kernel keeps per guest is exported once.
    counters = [k for k in spec.STATS_KEYS
                if k.startswith(('switches_', 'time_', 'shadow_maint',
                                 'hap_walk'))
                or k == 'samples']
    sources = [s for m in metrics.ALL for s in m.sources()]
    assert sorted(set(counters) - set(sources)) == []
    assert len(sources) == len(set(sources))
