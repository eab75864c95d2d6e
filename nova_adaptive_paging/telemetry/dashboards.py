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

"""Grafana dashboards, built with grafana-foundation-sdk.

Five dashboards (doc/source/telemetry.rst): the fleet, one CPU
generation, one host, one guest, and advisory hosts.  Each is templated
by datasource, generation, host (the scraped ``instance``) and Nova
instance (``uuid``).  Every query is PromQL from :mod:`.queries` and the
recorded names of :mod:`.rules`; ``generate`` writes the JSON to
``dashboards/grafana/`` and a test fails when it is stale.
"""

import enum

from grafana_foundation_sdk.builders import bargauge
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus
from grafana_foundation_sdk.builders import stat
from grafana_foundation_sdk.builders import statetimeline
from grafana_foundation_sdk.builders import table
from grafana_foundation_sdk.builders import timeseries
from grafana_foundation_sdk.cog import encoder
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

from nova_adaptive_paging.telemetry import metrics as M
from nova_adaptive_paging.telemetry import queries as Q
from nova_adaptive_paging.telemetry import rules as R
from nova_adaptive_paging import vocabulary

DS = dm.DataSourceRef(type_val='prometheus', uid='${datasource}')
TAGS = ['nova-adaptive-paging']
# Template variables -> the label each selects on.
GEN = 'generation=~"$generation"'
HOST = '%s=~"$host"' % Q.HOST
GUEST = '%s=~"$instance"' % M.GUEST_LABEL
SHADOW = vocabulary.SHADOW
# Shares and seconds per second (the rate of a seconds counter) are
# ratios: Grafana's unit "s" would show 0.02 s per s as "20 ms".
RATIO = 'percentunit'


def _in_generation(expr, match=GEN):
    """``expr`` restricted to hosts of the selected generation(s)."""
    return Q.with_generation(expr, match=match)


def _query(expr, legend=None, ref='A', instant=False):
    q = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DS)
    if legend:
        q = q.legend_format(legend)
    if instant:
        q = q.instant().format(pm.PromQueryFormat.TABLE)
    return q


def _targets(panel, queries, instant=False):
    for i, (expr, legend) in enumerate(queries):
        panel = panel.with_target(_query(expr, legend, chr(ord('A') + i),
                                         instant))
    return panel.datasource(DS)


def graph(title, queries, unit='short', width=12, height=8,
          description=None):
    p = timeseries.Panel().title(title).unit(unit).span(width) \
        .height(height)
    if description:
        p = p.description(description)
    return _targets(p, queries)


def thresholds_graph(title, sampled, limits, unit='short'):
    """Samples as lines, the thresholds in force as dashed lines."""
    p = graph(title, sampled + limits, unit)
    return p.with_override(
        dm.MatcherConfig(id_val='byRegexp', options='.*threshold.*'),
        [dm.DynamicConfigValue(id_val='custom.lineStyle',
                               value={'fill': 'dash', 'dash': [10, 10]})])


def stat_panel(title, queries, unit='short', width=6):
    return _targets(stat.Panel().title(title).unit(unit).span(width)
                    .height(5), queries)


def bars(title, queries, unit='short', width=12):
    return _targets(bargauge.Panel().title(title).unit(unit).span(width)
                    .height(8), queries)


def timeline(title, queries, width=24):
    return _targets(statetimeline.Panel().title(title).span(width)
                    .height(8), queries)


def table_panel(title, queries, width=12):
    return _targets(table.Panel().title(title).span(width).height(8),
                    queries, instant=True)


def _variables(d, levels):
    d = d.with_variable(
        db.DatasourceVariable('datasource').label('Data source')
        .type('prometheus'))
    chain = [
        ('generation', 'CPU generation',
         'label_values(%s, generation)' % M.HOST_INFO.name),
        ('host', 'Host', 'label_values(%s{%s}, %s)'
         % (M.HOST_INFO.name, GEN, Q.HOST)),
        ('instance', 'Nova instance', 'label_values(%s{%s}, %s)'
         % (M.GUEST_INFO.name, HOST, M.GUEST_LABEL)),
    ]
    refresh = dm.VariableRefresh.ON_TIME_RANGE_CHANGED
    for name, label, query in chain[:levels]:
        d = d.with_variable(
            db.QueryVariable(name).label(label).query(query)
            .datasource(DS).multi(True).include_all(True)
            .all_value('.*').refresh(refresh))
    return d


def _switch_annotation(match):
    """Switch events: a guest's mode changed."""
    expr = 'changes(%s{mode="%s",%s}[2m]) > 0' % (
        M.GUEST_MODE.name, SHADOW, match)
    return db.AnnotationQuery().name('Mode switches').datasource(DS) \
        .enable(True).icon_color('orange').expr(expr)


def _dashboard(uid, title, description, levels, panels, annotation=None):
    d = db.Dashboard(title).uid(uid).tags(TAGS).description(description) \
        .time('now-6h', 'now').refresh('1m').timezone('utc')
    d = _variables(d, levels)
    if annotation is not None:
        d = d.annotation(annotation)
    for row, row_panels in panels:
        d = d.with_row(db.Row(row))
        for panel in row_panels:
            d = d.with_panel(panel)
    return d.build()


def fleet():
    per_gen = R.GEN_FLAVOR_SWITCHES
    return _dashboard(
        'nova-paging-fleet', 'Adaptive paging / Fleet overview',
        'Hosts, guests, modes and switches of the whole fleet, and the '
        'time paging overhead costs it.', 1, [
            ('Hosts and guests', [
                bars('Hosts per CPU generation (patched / advisory)',
                     [('%s{%s}' % (R.GEN_HOSTS, GEN),
                       '{{generation}} switching={{switching}}')],
                     width=8),
                bars('Guests per policy',
                     [('sum by (policy) (%s)' % _in_generation(
                         M.GUESTS.name), '{{policy}}')], width=8),
                bars('Guests per current mode',
                     [('sum by (mode) (%s)' % _in_generation(
                         '%s == 1' % M.GUEST_MODE.name), '{{mode}}')],
                     width=8),
                stat_panel('Agent coverage', [
                    ('%s{%s}' % (R.GEN_COVERAGE, GEN), '{{generation}}')],
                    RATIO, width=24),
            ]),
            ('Switches and overhead', [
                graph('Switches per guest-hour, by generation and flavor',
                      [('%s{%s}' % (per_gen, GEN),
                        '{{generation}} {{flavor}}')]),
                graph('Time lost to paging overhead (s per s)', [
                    ('%s{%s}' % (R.GEN_SHADOW_MAINT, GEN),
                     '{{generation}} shadow maintenance'),
                    ('%s{%s}' % (R.GEN_HAP_WALK, GEN),
                     '{{generation}} nested walks'),
                    ('sum by (generation) (%s{%s})'
                     % (R.GEN_FLAVOR_SWITCHING, GEN),
                     '{{generation}} switching')], RATIO,
                      description='Measured by the kernel on patched '
                      'hosts (modeled on simulated hosts).'),
                graph('Time adaptive paging would gain on advisory hosts '
                      '(modeled, s per s)',
                      [('%s{%s}' % (R.GEN_MODELED_GAIN, GEN),
                        '{{generation}}')], RATIO, width=24),
            ]),
        ])


def generation():
    return _dashboard(
        'nova-paging-generation', 'Adaptive paging / CPU generation',
        'Per CPU generation: what the guests\' samples look like against '
        'the thresholds in force, how time splits between the modes, and '
        'which guests thrash.', 1, [
            ('Samples against thresholds', [
                thresholds_graph('FTLB (TLB misses / 1000 instructions)',
                                 *_gen_samples(M.SAMPLED_FTLB, 'tlb')),
                thresholds_graph('FPF (page faults / 1000 instructions '
                                 'x 1e7)',
                                 *_gen_samples(M.SAMPLED_FPF, 'pf')),
                bars('FTLB samples per bucket and mode (range)',
                     [(_bucket_sum(M.SAMPLED_FTLB, 'increase', '$__range'),
                       '{{mode}} le {{le}}')]),
                bars('FPF samples per bucket and mode (range)',
                     [(_bucket_sum(M.SAMPLED_FPF, 'increase', '$__range'),
                       '{{mode}} le {{le}}')]),
            ]),
            ('Modes and switches', [
                graph('Share of time per mode, by flavor',
                      [('%s{%s}' % (R.GEN_FLAVOR_MODE_SHARE, GEN),
                        '{{flavor}} {{mode}}')], RATIO),
                graph('Switches per guest-hour, by flavor',
                      [('%s{%s}' % (R.GEN_FLAVOR_SWITCHES, GEN),
                        '{{flavor}}')]),
                table_panel('Thrash candidates (most switches per hour)',
                            [('topk(10, %s)' % _in_generation(
                                R.SWITCHES_PER_HOUR), None)], width=24),
            ]),
        ])


def _bucket_sum(metric, function, window):
    """A sampled histogram's buckets over the selected generations."""
    return 'sum by (le, mode) (%s)' % _in_generation(
        '%s(%s_bucket[%s])' % (function, metric.name, window))


def _gen_samples(metric, prefix):
    sampled = [('histogram_quantile(0.5, %s)'
                % _bucket_sum(metric, 'rate', '10m'), 'median {{mode}}')]
    limits = [('max by (threshold) (%s)' % _in_generation(
        '%s{threshold=~"%s_.*"}' % (M.PROFILE_THRESHOLD.name, prefix)),
        '{{threshold}} threshold')]
    return sampled, limits


def _limits(prefix, match):
    return [('max by (threshold) (%s{threshold=~"%s_.*",%s})'
             % (M.PROFILE_THRESHOLD.name, prefix, match),
             '{{threshold}} threshold')]


def host():
    return _dashboard(
        'nova-paging-host', 'Adaptive paging / Host',
        'One host: its guests\' modes over time, their samples against '
        'the host\'s thresholds, switches, and the agent\'s health.', 2, [
            ('Guests', [
                timeline('Mode of each guest (1 = shadow)', [
                    ('max by (%s) (%s{mode="%s",%s})'
                     % (M.GUEST_LABEL, M.GUEST_MODE.name, SHADOW, HOST),
                     '{{%s}}' % M.GUEST_LABEL)]),
                thresholds_graph('Guests\' last FTLB against the thresholds',
                                 [('%s{%s}' % (M.LAST_FTLB.name, HOST),
                                   '{{%s}}' % M.GUEST_LABEL)],
                                 _limits('tlb', HOST)),
                thresholds_graph('Guests\' last FPF against the thresholds',
                                 [('%s{%s}' % (M.LAST_FPF.name, HOST),
                                   '{{%s}}' % M.GUEST_LABEL)],
                                 _limits('pf', HOST)),
                graph('Switches per hour', [
                    ('3600 * sum by (%s) (rate(%s{%s}[10m]))'
                     % (M.GUEST_LABEL, M.SWITCHES.name, HOST),
                     '{{%s}}' % M.GUEST_LABEL)]),
                graph('Guests per policy', [
                    ('sum by (policy) (%s{%s})' % (M.GUESTS.name, HOST),
                     '{{policy}}')]),
            ]),
            ('Agent', [
                graph('Agent errors per minute, by kind', [
                    ('sum by (kind) (60 * rate(%s{%s}[5m]))'
                     % (M.ERRORS.name, HOST), '{{kind}}')]),
                graph('Collector duration', [
                    ('%s{%s}' % (M.SCRAPE_DURATION.name, HOST),
                     '{{collector}}')], 's'),
                table_panel('Profile in force', [
                    ('%s{%s}' % (M.PROFILE_INFO.name, HOST), None)],
                    width=24),
            ]),
        ], _switch_annotation(HOST))


def guest():
    match = '%s,%s' % (HOST, GUEST)
    return _dashboard(
        'nova-paging-guest', 'Adaptive paging / Guest',
        'One Nova instance: its mode over time, each sample against the '
        'thresholds, switches and the time each mode took.', 3, [
            ('Guest', [
                timeline('Mode (1 = shadow)', [
                    ('max by (%s) (%s{mode="%s",%s})'
                     % (M.GUEST_LABEL, M.GUEST_MODE.name, SHADOW, match),
                     '{{%s}}' % M.GUEST_LABEL)]),
                thresholds_graph('FTLB of each sample', [
                    ('%s{%s}' % (M.LAST_FTLB.name, match), 'FTLB')],
                    _limits('tlb', HOST)),
                thresholds_graph('FPF of each sample', [
                    ('%s{%s}' % (M.LAST_FPF.name, match), 'FPF')],
                    _limits('pf', HOST)),
                graph('Share of time per mode', [
                    ('%s{%s}' % (R.MODE_SHARE, match), '{{mode}}')],
                    RATIO),
                graph('Time switching and maintaining shadow tables '
                      '(s per s)', [
                          ('rate(%s{%s}[5m])' % (M.SWITCHING_SECONDS.name,
                                                 match), 'switching'),
                          ('rate(%s{%s}[5m])'
                           % (M.SHADOW_MAINTENANCE_SECONDS.name, match),
                           'shadow maintenance')], RATIO),
                table_panel('Nova labels', [
                    ('%s{%s}' % (M.GUEST_INFO.name, match), None)],
                    width=24),
            ]),
        ], _switch_annotation(match))


def advisory():
    adv = '%s,switching="false"' % GEN
    return _dashboard(
        'nova-paging-advisory', 'Adaptive paging / Advisory hosts',
        'Hosts without the switching patch: what adaptive paging would do '
        'and gain there (cost model, not a measurement).', 2, [
            ('Modeled', [
                graph('Modeled gain per host (s per s, modeled)', [
                    ('sum by (%s) (rate(%s{%s}[10m]))'
                     % (Q.HOST, M.MODELED_GAIN_SECONDS.name, HOST)
                     + ' * on (%s) group_left %s' % (
                         Q.HOST, Q.host_info(adv)), '{{%s}}' % Q.HOST)],
                      RATIO),
                graph('Guests adaptive paging would run in shadow mode '
                      '(modeled)', [
                          ('sum by (%s) (%s{mode="%s",%s})'
                           % (Q.HOST, M.ADVISED_MODE.name, SHADOW, HOST),
                           '{{%s}}' % Q.HOST)]),
                graph('Guests whose counters the agent reads', [
                    ('sum by (%s) (%s{%s})' % (Q.HOST, M.GUEST_COUNTERS.name,
                                               HOST), '{{%s}}' % Q.HOST)]),
                timeline('Modeled mode of each guest (1 = shadow)', [
                    ('max by (%s) (%s{mode="%s",%s})'
                     % (M.GUEST_LABEL, M.ADVISED_MODE.name, SHADOW, HOST),
                     '{{%s}}' % M.GUEST_LABEL)], width=12),
            ]),
            # A fleet of hap and shadow pools, and the paging_fit Watcher
            # strategy that moves adaptive guests between them.  The moves
            # it proposes are Watcher's action plans; the ones carried out
            # show here as guests arriving in a pool.
            ('Paging pools', [
                graph('Modeled gain left in each pool (s per hour, '
                      'modeled)', [('3600 * %s' % R.POOL_GAIN_LEFT,
                                    '{{mode}} pool')], 's'),
                graph('Adaptive guests per pool', [
                    (R.POOL_GUESTS, '{{mode}} pool')]),
                graph('Guests that arrived within the hour (migrations '
                      'carried out, new guests)', [
                          (R.POOL_ARRIVED, '{{mode}} pool')]),
                graph('Adaptive guests in cool-down', [
                    (R.POOL_COOLDOWN, '{{mode}} pool')]),
                table_panel('Modeled gain of the other pool per guest '
                            '(s per hour; > 0: it should move)', [
                                ('3600 * %s' % Q.in_pool(
                                    'deriv(%s[1h])'
                                    % M.MODELED_OTHER_MODE_GAIN.name),
                                 None)], width=24),
            ]),
        ])


BUILDERS = (fleet, generation, host, guest, advisory)


def documents():
    """{path relative to dashboards/: JSON-able dict}."""
    enc = encoder.JSONEncoder()
    out = {}
    for build in BUILDERS:
        doc = enc.default(build())
        out['grafana/%s.json' % doc['uid']] = _plain(doc)
    return out


def _plain(value):
    """The SDK's objects as plain dicts and lists, for json.dumps."""
    enc = encoder.JSONEncoder()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, 'to_json'):
        return _plain(enc.default(value))
    if isinstance(value, enum.Enum):
        return value.value
    return value


def queries(doc):
    """Every PromQL expression of a generated dashboard: its panels'
    targets, its variables' queries and its annotations'."""
    exprs = []
    for panel in doc.get('panels', ()):
        for target in panel.get('targets') or ():
            exprs.append((panel.get('title'), target['expr']))
    for ann in doc.get('annotations', {}).get('list', ()):
        if ann.get('target', {}).get('expr'):
            exprs.append(('annotation ' + ann['name'],
                          ann['target']['expr']))
    return exprs
