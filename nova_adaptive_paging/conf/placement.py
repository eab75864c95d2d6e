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
