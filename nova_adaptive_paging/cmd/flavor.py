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

"""``nova-paging flavor ...``: a flavor's paging policy and its trait."""

import logging

import click
from keystoneauth1 import exceptions as ks_exceptions

from nova_adaptive_paging.cmd import common
from nova_adaptive_paging import flavors
from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary


@click.group('flavor')
@click.option('--os-cloud', metavar='NAME', envvar='OS_CLOUD',
              help='Cloud in clouds.yaml (default: $OS_CLOUD, or the '
                   'OS_* environment variables).')
@click.pass_context
def flavor_group(ctx, os_cloud):
    """Flavors' hw:paging and the placement trait that goes with it."""
    ctx.obj = {'cloud': os_cloud}


def _apply(ctx, flavor, paging_policy, pools=False):
    # keystoneauth narrates its retries as warnings; the error line below
    # says what matters.
    logging.getLogger('keystoneauth').setLevel(logging.ERROR)
    # Imported here: only this command needs the SDK, and compute nodes
    # run the others without it.
    import openstack
    from openstack import exceptions as sdk_exceptions
    try:
        conn = openstack.connect(cloud=ctx.obj['cloud'])
        found, written, removed = flavors.set_policy(
            conn.compute, flavor, paging_policy, pools)
    except (sdk_exceptions.SDKException,
            ks_exceptions.ClientException) as exc:
        common.fail('flavor %s: %s' % (flavor, common.first_line(exc)))
    click.echo('flavor %s (%s)' % (found.name, found.id))
    for key in sorted(written):
        click.echo('set   %s=%s' % (key, written[key]))
    for key in removed:
        click.echo('unset %s' % key)
    if not written and not removed:
        click.echo('unchanged')


@flavor_group.command('set')
@click.argument('flavor')
@click.option('--paging', required=True,
              type=click.Choice(vocabulary.POLICIES),
              help='Paging policy the flavor asks for.')
@click.option('--interval', type=int, metavar='SECONDS',
              help='hw:paging_interval (adaptive only).')
@click.option('--profile', metavar='NAME',
              help='hw:paging_profile (adaptive only).')
@click.option('--pools', is_flag=True,
              help='Adaptive in a fleet of hap and shadow pools of stock '
                   'kernels: require CUSTOM_PAGING_POOL, which pool members '
                   'and switching hosts publish, instead of '
                   'CUSTOM_PAGING_SWITCHING (doc/source/stock-fleet.rst).')
@click.pass_context
def flavor_set(ctx, flavor, paging, interval, profile, pools):
    """Write hw:paging (and companions) and its required trait."""
    if pools and paging != vocabulary.ADAPTIVE:
        common.fail('--pools: only for --paging %s (a static %s asks '
                    'for its own mode\'s hosts)' % (vocabulary.ADAPTIVE,
                                                    paging))
    specs = {vocabulary.KEY_POLICY: paging}
    if interval is not None:
        specs[vocabulary.KEY_INTERVAL] = str(interval)
    if profile is not None:
        specs[vocabulary.KEY_PROFILE] = profile
    wanted = policy.from_extra_specs(specs)
    _apply(ctx, flavor, wanted, pools)


@flavor_group.command('unset')
@click.argument('flavor')
@click.pass_context
def flavor_unset(ctx, flavor):
    """Remove hw:paging, its companions and its trait."""
    _apply(ctx, flavor, None)
