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

"""``nova-paging profile``: thresholds per CPU generation from the
fleet's telemetry."""

import datetime
import os
import re
import sys
import time

import click

from nova_adaptive_paging.cmd import common
from nova_adaptive_paging.telemetry import prometheus_api
from nova_adaptive_paging.tuning import profiler
from nova_adaptive_paging.tuning import report

DURATION = re.compile(r'^([0-9]+(ms|s|m|h|d|w|y))+$')


def _range(ctx, param, value):
    if not DURATION.match(value):
        raise click.BadParameter('%r: expected a PromQL duration such as '
                                 '7d, 12h or 90m' % value)
    return value


def _until(ctx, param, value):
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        stamp = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter('%r: expected Unix time or ISO 8601 '
                                 '(2026-11-25T12:00:00+00:00)' % value)
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.timezone.utc)
    return stamp.timestamp()


@click.command('profile')
@click.option('--prometheus', 'url', required=True, metavar='URL',
              help='Any PromQL endpoint (Prometheus, Thanos, Mimir, ...).')
@click.option('--range', 'window', default='7d', show_default=True,
              callback=_range, help='How far back to read (PromQL '
              'duration).')
@click.option('--generation', 'generations', multiple=True, metavar='KEY',
              help='Only these CPU generations (default: every one seen).')
@click.option('--out', required=True, type=click.Path(file_okay=False),
              help='Directory for the profiles and report.html.')
@click.option('--until', callback=_until, metavar='TIME',
              help='End of the range: Unix time or ISO 8601 (default: '
              'now).')
@click.option('--timeout', default=60.0, show_default=True,
              type=click.FloatRange(min=1), help='Seconds per query.')
def profile(url, window, generations, out, until, timeout):
    """Estimate per-event costs per CPU generation and derive thresholds.

    Writes OUT/<generation>.yaml for each generation with enough data,
    and OUT/report.html with its plots; a generation with too little
    data is reported, never guessed.  Every replay is modeled."""
    at = time.time() if until is None else until
    client = prometheus_api.Client(url, timeout)
    results = profiler.profile_fleet(client, window, at, url, generations)
    try:
        page = report.write(out, results, window, url)
    except ImportError as exc:
        common.fail('the report needs matplotlib (%s): pip install '
                    '"nova-adaptive-paging[sim]"' % exc)
    for text in table(results, out):
        click.echo(text)
    click.echo('report (costs per event, thresholds, plots): %s' % page)
    failed = [r for r in results if not r.ok]
    if not any(r.ok for r in results) or (generations and failed):
        sys.exit(1)


def table(results, out):
    """The profiler's result per generation, as a small table an
    operator reads first (the detail is in the report), then where the
    profiles went and why a generation got none."""
    rows = [('generation', 'data', 'thresholds (active -> recommended)',
             'modeled gain', 'worst regret')]
    notes = []
    for r in results:
        g = r.telemetry
        data = '%d hosts, %d guests' % (g.hosts, g.guests)
        if not r.ok:
            rows.append((r.generation, data, 'kept (too little data)', '-',
                         '-'))
            notes.append('%s: no profile: %s' % (r.generation, r.reason))
            continue
        old = r.active.to_dict()['thresholds']
        new = r.profile.to_dict()['thresholds']
        changed = sum(1 for k in new if new[k] != old[k])
        rows.append((
            r.generation, data,
            '%d of %d changed, interval %d -> %d s' % (
                changed, len(new), r.active.interval_s,
                r.profile.interval_s),
            '%+.2f %%' % (profiler.held_out_gain(r) * 100),
            '%+.2f %% -> %+.2f %%' % (r.active_summary.worst_regret * 100,
                                      r.new_summary.worst_regret * 100)))
        notes.append('%s: wrote %s' % (r.generation, os.path.join(
            out, '%s.yaml' % r.generation)))
        if r.costs.miss_s is None:
            notes.append('%s: %s' % (r.generation, r.costs.miss_note))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ['  '.join(cell.ljust(w) for cell, w in zip(row, widths))
             .rstrip() for row in rows]
    lines.insert(1, '  '.join('-' * w for w in widths))
    lines.append('MODELED: replays of held-out traces through the estimated '
                 'costs.  Gain: of the recommended')
    lines.append('over the active thresholds; regret: time lost against the '
                 'better static mode (lower is better).')
    return lines + notes
