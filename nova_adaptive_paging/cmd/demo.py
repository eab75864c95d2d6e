"""``nova-paging demo``: a simulated fleet, its telemetry in a real
Prometheus, and the profiler's thresholds per CPU generation."""

import os
import signal
import tempfile
import time

import click

from nova_adaptive_paging.cmd import common
from nova_adaptive_paging.cmd import profile as profile_cmd
from nova_adaptive_paging.simhost import demo as demolib
from nova_adaptive_paging.telemetry import prometheus_api
from nova_adaptive_paging.tuning import profiler
from nova_adaptive_paging.tuning import report


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@click.command('demo')
@click.option('--minutes', default=3.0, show_default=True,
              type=click.FloatRange(0.5, 60), help='Real minutes to run.')
@click.option('--speed', default=20.0, show_default=True,
              type=click.FloatRange(1, 200),
              help='Modeled seconds per real second.')
@click.option('--hosts-per-generation', default=2, show_default=True,
              type=click.IntRange(1, 20))
@click.option('--workdir', type=click.Path(file_okay=False),
              help='Where everything goes (default: a new directory '
              'under the temporary directory).')
@click.option('--keep-running', is_flag=True,
              help='Leave the fleet and Prometheus up after the profile, '
              'until Ctrl-C.')
def demo(minutes, speed, hosts_per_generation, workdir, keep_running):
    """Run a simulated fleet (MODELED) and profile it."""
    workdir = workdir or tempfile.mkdtemp(prefix='nova-paging-demo-')
    os.makedirs(workdir, exist_ok=True)
    signal.signal(signal.SIGTERM, _interrupt)
    run = demolib.Demo(workdir, hosts_per_generation, speed=speed)
    try:
        run.start()
        members = run.fleet.members
        click.echo('simulated fleet (MODELED): %d hosts (%s), %d guests; '
                   'time runs %gx' % (
                       len(members), ', '.join(sorted({
                           m.agent.generation for m in members})),
                       sum(len(m.sim.vms) for m in members), speed))
        click.echo('Prometheus: %s (scraping %d agents)'
                   % (run.url, len(members)))
        seconds = minutes * 60
        with click.progressbar(length=int(seconds), label='running',
                               show_eta=True) as bar:
            last = [0]

            def progress(done):
                now = min(int(done), int(seconds))
                bar.update(now - last[0])
                last[0] = now
            run.run(seconds, progress)
        window = '%dm' % (int(minutes) + 2)
        client = prometheus_api.Client(run.url)
        results = profiler.profile_fleet(client, window, time.time(),
                                         run.url)
        out = os.path.join(workdir, 'profiles')
        page = report.write(out, results, window, run.url)
        for r in results:
            click.echo(profile_cmd.line(r, out))
            if r.ok:
                click.echo('  modeled gain of the new thresholds on the '
                           'held-out traces: %+.2f %% of the better static '
                           'mode\'s time' % (
                               profiler.held_out_gain(r) * 100))
        dashboards = os.path.join(workdir, 'dashboards')
        try:
            from nova_adaptive_paging.telemetry import generate
            generate.write(dashboards)
            where = os.path.join(dashboards, 'grafana')
        except ImportError:
            where = 'dashboards/grafana/ in the source tree'
        click.echo('report: %s' % page)
        click.echo('Prometheus UI: %s (rules and alerts loaded)' % run.url)
        click.echo('dashboards: %s (import into Grafana with a Prometheus '
                   'data source at %s)' % (where, run.url))
        if keep_running:
            click.echo('running; Ctrl-C stops everything')
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        click.echo('stopping', err=True)
    except demolib.DemoError as exc:
        common.fail(str(exc))
    finally:
        run.stop()
