"""[placement]: how the agent reaches the placement API (keystoneauth)."""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

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
    ks_loading.register_session_conf_options(conf, placement_group.name)
    ks_loading.register_auth_conf_options(conf, placement_group.name)
    ks_loading.register_adapter_conf_options(conf, placement_group.name,
                                             include_deprecated=False)
    conf.set_default('service_type', 'placement', group=placement_group)
    conf.set_default('valid_interfaces', ['internal', 'public'],
                     group=placement_group)


def list_opts():
    return {placement_group: (
        host_opts
        + ks_loading.get_session_conf_options()
        + ks_loading.get_auth_common_conf_options()
        + ks_loading.get_auth_plugin_conf_options('password')
        + ks_loading.get_adapter_conf_options(include_deprecated=False))}


def adapter(conf):
    """A keystoneauth Adapter for placement from ``conf.placement``."""
    group = placement_group.name
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    session = ks_loading.load_session_from_conf_options(conf, group,
                                                        auth=auth)
    return ks_loading.load_adapter_from_conf_options(conf, group,
                                                     session=session,
                                                     auth=auth)
