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

"""``nova-paging simulate-pools``: the harder modeled day of a fleet of
paging pools, per seed, with and without boot placement (MODELED)."""

import json

import click

from nova_adaptive_paging import costmodel


@click.command('simulate-pools')
@click.option('--seed', 'seeds', type=click.IntRange(0), multiple=True,
              help='A seed of the day (repeat for several; default 1, 2, '
                   '3).')
@click.option('--boot-placement/--no-boot-placement', default=None,
              help='Only paging_fit with, or only without, the paging '
                   'pool weigher (default: both, and Nova alone: neither '
                   'the strategy nor the weigher).')
@click.option('--oracle', is_flag=True,
              help='Also a placement oracle: each hour every guest in the '
                   'pool that runs its next hour faster on the true costs, '
                   'within the pools\' room, its moves free.')
@click.option('--json', 'as_json', is_flag=True, help='Print JSON.')
def simulate_pools(seeds, boot_placement, oracle, as_json):
    """A modeled day of a fleet of paging pools whose capacity binds."""
    from nova_adaptive_paging.simhost import pool_day
    from nova_adaptive_paging.simhost import stock_fleet
    runs = (((False, False, False), (True, False, False),
             (True, True, False))
            if boot_placement is None else ((True, boot_placement, False),))
    runs += ((True, True, True),) if oracle else ()
    results = []
    click.echo(costmodel.MODELED_NOTE, err=True)
    for seed in seeds or (1, 2, 3):
        drawn = pool_day.Draw(pool_day.Config(seed))
        for strategy, on, best in runs:
            result = pool_day.run(pool_day.Config(
                seed, boot_placement=on, strategy=strategy, oracle=best),
                drawn)
            results.append(result)
            if as_json:
                continue
            c = result['counts']
            click.echo('seed %d, %s %s, boot placement %s, %d '
                       'hosts of %d guests kept %.0f %% full' % (
                           seed, 'placement oracle' if best else 'paging_fit',
                           'on' if strategy else 'off',
                           'on' if on else 'off',
                           2 * pool_day.Config(seed).hosts_per_pool,
                           result['capacity_guests'] // (
                               2 * pool_day.Config(seed).hosts_per_pool),
                           100 * pool_day.Config(seed).occupancy))
            click.echo(stock_fleet.summary(
                result['fleet'], c['moves'], result['measured_guests'],
                name='the placement oracle' if best else 'paging_fit' + (
                    ' with boot placement' if on else '')
                if strategy else 'Nova alone'))
            click.echo('  %d migrations failed; %d holds for no room in '
                       'the other pool (a guest in an audit); %d boots '
                       'found a pool full; %d '
                       'of %d guests booted in their best pool\n' % (
                           c['moves_failed'], c['no_room'],
                           c['boots_with_a_pool_full'],
                           c['measured_in_right_pool_at_boot'],
                           result['measured_guests']))
    if as_json:
        click.echo(json.dumps(results, indent=1))
