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

"""``nova-paging abi switch-cost``: the switch-cost measurement
(:mod:`nova_adaptive_paging.host.switch_cost`) from the command line."""


import click

from nova_adaptive_paging.cmd import common
from nova_adaptive_paging import costmodel
from nova_adaptive_paging import host
from nova_adaptive_paging.host import transport as host_transport
from nova_adaptive_paging.host import switch_cost as measure


@click.command('switch-cost')
@common.vm_options('The VM')
@click.option('--workload', required=True, metavar='COMMAND',
              help='Shell command on this host that blocks until the '
                   'guest workload has finished.')
@click.option('--repeats', default=3, show_default=True,
              type=click.IntRange(1, 1000), help='Runs of each kind.')
@click.option('--period', default=1.0, show_default=True,
              type=click.FloatRange(min=0.001),
              help='Seconds between round trips (the paper: 1).')
@click.option('--at', 'at', metavar='F[,F...]',
              help='Round trips at these fractions of the static run\'s '
                   'median time instead of every --period.')
@click.option('--runs', default=','.join(measure.RUNS), show_default=True,
              help='Which runs, in this order.')
def switch_cost(root, vm, domain, workload, repeats, period, at, runs):
    """Measure switching cost with the seed paper's H-S-H/S-H-S runs."""
    kinds = [k for k in runs.split(',') if k]
    bad = [k for k in kinds if k not in measure.RUNS]
    if bad or not kinds:
        common.fail('--runs: %s; expected some of %s' % (
            ','.join(bad) or 'empty', ','.join(measure.RUNS)))
    fractions = None
    if at:
        try:
            fractions = [float(f) for f in at.split(',')]
        except ValueError:
            common.fail('--at: %s; expected fractions like 0.25,0.5' % at)
        if any(not 0 < f < 1 for f in fractions):
            common.fail('--at: %s; expected fractions in (0, 1)' % at)
    transport = host_transport.for_root(root)
    vm = common.resolve_vm(root, transport, vm, domain)
    is_modeled = host.simulated(root)
    with common.sigterm_as_interrupt():
        try:
            cost = measure.SwitchCost(
                transport, vm, workload, repeats, period, fractions, kinds,
                echo=lambda line: click.echo(line, err=True))
            note = (costmodel.MODELED_NOTE if is_modeled
                    else 'measured on this host')
            click.echo('switch cost of VM %s, workload %r (%s)'
                       % (vm, workload, note))
            results = cost.run()
        except KeyboardInterrupt:
            common.fail('interrupted; the VM\'s policy was restored')
    for line in measure.table(results):
        click.echo(line)
    if is_modeled:
        click.echo(costmodel.MODELED_NOTE)
