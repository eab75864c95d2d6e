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

"""[placement]: how the agent reaches the placement API (keystoneauth)."""

from oslo_config import cfg

from nova_adaptive_paging.conf import ksa

placement_group = cfg.OptGroup(
    'placement',
    title='Placement API',
    help="""
Credentials and endpoint the compute-node agent uses to publish this host's
paging capabilities as traits on its resource provider (usually the same
as nova-compute's [placement] section).
""")

host_opts = [
    cfg.StrOpt('compute_node_name',
               help="""
Name of this host's compute node resource provider: Nova's hypervisor
hostname (for the libvirt driver, libvirt's host name, as ``openstack
hypervisor list`` shows it). Unset means the provider named after this
host's short name or its FQDN, whichever exists; if both do, set it.
"""),
]


def register_opts(conf):
    conf.register_group(placement_group)
    conf.register_opts(host_opts, group=placement_group)
    ksa.register(conf, placement_group.name, 'placement')


def list_opts():
    return {placement_group: host_opts + ksa.list_opts()}


def adapter(conf):
    """A keystoneauth Adapter for placement from ``conf.placement``."""
    return ksa.adapter(conf, placement_group.name)
