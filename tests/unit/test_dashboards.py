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

"""The Grafana dashboards generated with grafana-foundation-sdk."""

import json
import os
import re

from nova_adaptive_paging.telemetry import dashboards
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging.telemetry import rules

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', 'dashboards')


def _committed():
    out = {}
    for path in dashboards.documents():
        with open(os.path.join(ROOT, path), encoding='utf-8') as f:
            out[path] = json.load(f)
    return out


def test_five_dashboards_templated_by_datasource_generation_host_guest():
    docs = _committed()
    assert sorted(d['uid'] for d in docs.values()) == [
        'nova-paging-advisory', 'nova-paging-fleet', 'nova-paging-generation',
        'nova-paging-guest', 'nova-paging-host']
    names = {d['uid']: [v['name'] for v in d['templating']['list']]
             for d in docs.values()}
    assert names['nova-paging-fleet'] == ['datasource', 'generation']
    assert names['nova-paging-guest'] == ['datasource', 'generation', 'host',
                                          'instance']
    for doc in docs.values():
        for panel in doc['panels']:
            if panel['type'] == 'row':
                continue
            assert panel['targets'], panel['title']
            for target in panel['targets']:
                assert target['datasource']['uid'] == '${datasource}'


def test_the_host_and_guest_dashboards_mark_switches():
    docs = _committed()
    for uid in ('nova-paging-host', 'nova-paging-guest'):
        doc = docs['grafana/%s.json' % uid]
        assert [a['name'] for a in doc['annotations']['list']] == [
            'Mode switches']


def test_the_queries_name_only_defined_metrics_and_recorded_rules():
    recorded = set(rules.RECORDED)
    known = set(metrics.BY_NAME) | recorded | {
        m.name + suffix for m in metrics.ALL
        if m.kind == metrics.HISTOGRAM for suffix in ('_bucket',)}
    for doc in _committed().values():
        for title, expr in dashboards.queries(doc):
            named = {t for t in re.findall(r'[A-Za-z_:][A-Za-z0-9_:]*', expr)
                     if 'nova_paging' in t}
            assert named, (title, expr)
            assert named <= known, (title, named - known)


def _seconds_per_second(expr):
    # The rate of a seconds counter, or a recorded rate of one, not
    # scaled to another period (``3600 * ...`` is seconds per hour).
    return (not re.match(r'\s*\d', expr) and bool(re.search(
        r'rate\(\w+_seconds(_total)?\b|_seconds:rate\w*\b', expr)))


def test_a_rate_of_seconds_is_shown_as_a_ratio_not_a_duration():
    # Grafana shows unit "s" as a duration: 0.02 s per s would read
    # "20 ms".  Every panel plotting seconds per second uses a ratio.
    checked = []
    for doc in _committed().values():
        for panel in doc['panels']:
            exprs = [t['expr'] for t in panel.get('targets') or ()]
            if 's per s' in panel['title'] or (
                    exprs and all(_seconds_per_second(e) for e in exprs)):
                checked.append(panel['title'])
                assert panel['fieldConfig']['defaults']['unit'] == \
                    'percentunit', panel['title']
    assert len([t for t in checked if 's per s' in t]) >= 4, checked
