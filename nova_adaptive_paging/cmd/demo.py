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

"""``nova-paging demo``: a simulated fleet, its telemetry in a real
Prometheus, and the profiler's thresholds per CPU generation."""

import os
import signal
import sys
import tempfile

import click

from nova_adaptive_paging.cmd import common
from nova_adaptive_paging.cmd import profile as profile_cmd


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
@click.option('--keep-running/--no-keep-running', default=None,
              help='After the profile, keep the fleet, its Prometheus and '
              'its /metrics up until Ctrl-C (default: when run from a '
              'terminal).')
def demo(minutes, speed, hosts_per_generation, workdir, keep_running):
    """Run a simulated fleet (MODELED) and profile it."""
    from nova_adaptive_paging.simhost import demo as demolib
    if keep_running is None:
        keep_running = sys.stdin.isatty() and sys.stdout.isatty()
    if workdir:
        # Only the last component is made: a mistyped path must not grow
        # a tree of directories from / down.
        parent = os.path.dirname(os.path.abspath(workdir))
        if not os.path.isdir(parent):
            common.fail('--workdir %s: no directory %s to create it in'
                        % (workdir, parent))
        os.makedirs(workdir, exist_ok=True)
    else:
        workdir = tempfile.mkdtemp(prefix='nova-paging-demo-')
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
        results, page, dashboards = run.profile(minutes)
        click.echo()
        for text in profile_cmd.table(results, os.path.dirname(page)):
            click.echo(text)
        click.echo()
        click.echo('Open:')
        click.echo('  report: %s' % page)
        click.echo('  dashboards: %s' % (
            dashboards or 'dashboards/grafana/ in the source tree'))
        if not keep_running:
            click.echo('The fleet and its Prometheus stop now; run with '
                       '--keep-running to keep them up until Ctrl-C.')
            return
        click.echo('Prometheus UI: %s (rules and alerts loaded)' % run.url)
        click.echo('  Grafana: add a Prometheus data source at %s and '
                   'import the dashboards' % run.url)
        click.echo('running; Ctrl-C stops everything')
        run.keep_running()
    except KeyboardInterrupt:
        click.echo('stopping', err=True)
    finally:
        run.stop()
