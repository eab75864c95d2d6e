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

"""``nova-paging host ...``: commands run on a compute node."""

import logging
import socket

import click
from keystoneauth1 import exceptions as ks_exceptions

from nova_adaptive_paging.agent import health
from nova_adaptive_paging.agent import clients
from nova_adaptive_paging.agent import service
from nova_adaptive_paging.cmd import common
from nova_adaptive_paging.conf import placement as placement_conf
from nova_adaptive_paging import placement
from nova_adaptive_paging.host import probe
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging import vocabulary

CONF = common.CONF


@click.group('host')
def host_group():
    """This compute node's paging capabilities."""


def host_capabilities():
    """Capabilities of this host, from its /sys and its profiles."""
    generation = common.configured_generation()
    found = common.profile_set()
    try:
        return probe.detect(CONF.adaptive_paging.host_root, generation,
                            found.has(generation), CONF.adaptive_paging.pool)
    except OSError as exc:
        # /dev/kvm, asked whether the kernel has the mechanism's control.
        common.fail('%s: %s; expected to be readable by this user (root, '
                    'or a member of the kvm group)' % (
                        exc.filename or 'dev/kvm', exc.strerror or exc))


@host_group.command('capabilities')
def show_capabilities():
    """Print what paging this host can give, as placement traits."""
    caps = host_capabilities()
    root = CONF.adaptive_paging.host_root
    click.echo('kvm: %s' % probe.describe_kvm(*probe.vendor_tdp(root)))
    click.echo('switching patch: %s' % _patch(caps))
    click.echo('policies: %s' % (
        ', '.join(sorted(m.value for m in caps.modes)) or 'none'))
    click.echo('pool: %s' % _pool(caps))
    for reason in caps.blockers:
        click.echo('cannot switch: %s' % reason)
    click.echo('page-walk cycles: %s' % probe.walk_cycles(
        CONF.adaptive_paging.host_root, caps.generation))
    for trait in sorted(caps.traits()):
        click.echo(trait)


def _patch(caps):
    """The series as this host runs it: its text interface's version,
    its part 1 alone, or none."""
    if caps.abi_version:
        return 'ABI v%d' % caps.abi_version
    if caps.mechanism:
        return 'part 1 alone (%s; the agent decides)' % vmfiles.SET_MODE
    return 'absent'


def _pool(caps):
    """Which paging pool this host serves (doc/source/stock-fleet.rst),
    and why."""
    if not caps.kvm:
        return 'none (no KVM)'
    if caps.switching and caps.tdp:
        return 'hap and shadow (it switches; %s)' % vocabulary.TRAIT_POOL
    if vocabulary.TRAIT_POOL in caps.traits():
        return '%s (its guests run in %s paging; member: [adaptive_paging] ' \
            'pool, %s)' % (caps.host_mode, caps.host_mode,
                           vocabulary.TRAIT_POOL)
    return '%s (its guests run in %s paging), not a member: set ' \
        '[adaptive_paging] pool = true to take adaptive guests of a fleet ' \
        'in pools' % (caps.host_mode, caps.host_mode)


@host_group.command('status')
def status():
    """Each guest on this host: policy, mode, switches, last sample (and
    what the agent would still write).  Reads only."""
    generation = common.configured_generation()
    agent = service.Agent(CONF, generation, read_only=True,
                          lookup=clients.lookup_from_conf(CONF))
    agent.reconcile()
    agent.sample()
    agent.domains.close()
    caps = agent.caps
    click.echo('host: generation %s, %s, thresholds %s' % (
        generation, 'switching (%s)' % _patch(caps)
        if caps.switching else 'not switching', agent.thresholds.source))
    for line in agent.report():
        click.echo(line)
    if agent.errors[health.LIBVIRT]:
        common.fail('libvirt at %s could not be read'
                    % CONF.adaptive_paging.libvirt_uri)


@host_group.command('publish-capabilities')
@click.option('--retries', default=5, show_default=True,
              help='Retries when another writer changes the provider.')
def publish_capabilities(retries):
    """Publish this host's capabilities as traits on its provider."""
    if not CONF.placement.auth_type:
        common.fail('[placement] auth_type is not set: give this host '
                    'placement credentials (auth_type, auth_url, username, '
                    '...: those of nova-compute\'s [placement] section)')
    caps = host_capabilities()
    names = ([CONF.placement.compute_node_name]
             if CONF.placement.compute_node_name
             else [socket.gethostname(), socket.getfqdn()])
    # keystoneauth narrates its retries as warnings; the error line below
    # says what matters.
    logging.getLogger('keystoneauth').setLevel(logging.ERROR)
    try:
        name, rp_uuid, added, removed = placement.publish(
            placement_conf.adapter(CONF), names, caps, retries)
    except ks_exceptions.ClientException as exc:
        common.fail('[placement]: %s' % common.first_line(exc))
    click.echo('provider %s (%s): %s' % (
        name, rp_uuid, ', '.join(sorted(caps.traits()))))
    if added or removed:
        click.echo('added: %s; removed: %s' % (
            ', '.join(sorted(added)) or '-',
            ', '.join(sorted(removed)) or '-'))
    else:
        click.echo('unchanged')
