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
    for r in results:
        click.echo(line(r, out))
    click.echo('report: %s' % page)
    failed = [r for r in results if not r.ok]
    if not any(r.ok for r in results) or (generations and failed):
        sys.exit(1)


def line(r, out):
    g = r.telemetry
    head = '%s: %d hosts, %d guests, %d samples' % (
        r.generation, g.hosts, g.guests, g.samples)
    if not r.ok:
        return '%s: too little data, no profile: %s' % (head, r.reason)
    c = r.costs
    t_old = r.active.to_dict()['thresholds']
    t_new = r.profile.to_dict()['thresholds']
    changes = ', '.join('%s %s -> %s' % (k, t_old[k], t_new[k])
                        for k in t_new)
    return ('%s; estimated extra cost per shadow page fault %.3g us, per '
            'hap TLB miss %.3g ns, per switch %.3g us; %s; interval %d -> '
            '%d s, history %d -> %d; worst modeled regret on held-out '
            'traces %+.2f %% -> %+.2f %%; wrote %s'
            % (head, c.fault_s * 1e6, c.miss_s * 1e9, c.switch_s * 1e6,
               changes, r.active.interval_s, r.profile.interval_s,
               r.active.history_samples, r.profile.history_samples,
               r.active_summary.worst_regret * 100,
               r.new_summary.worst_regret * 100,
               os.path.join(out, '%s.yaml' % r.generation)))
