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

"""keystoneauth options of a service the agent talks to, the way Nova
registers them for each service it uses (nova/conf/utils.py)."""

from keystoneauth1 import loading as ks_loading


def register(conf, group, service_type):
    ks_loading.register_session_conf_options(conf, group)
    ks_loading.register_auth_conf_options(conf, group)
    ks_loading.register_adapter_conf_options(conf, group,
                                             include_deprecated=False)
    conf.set_default('service_type', service_type, group=group)
    conf.set_default('valid_interfaces', ['internal', 'public'],
                     group=group)
    # keystoneauth waits for ever by default; the agent's every call has
    # a deadline (a request that times out is retried at the next pass).
    conf.set_default('timeout', 30, group=group)


def list_opts():
    return (ks_loading.get_session_conf_options()
            + ks_loading.get_auth_common_conf_options()
            + ks_loading.get_auth_plugin_conf_options('password')
            + ks_loading.get_adapter_conf_options(include_deprecated=False))


def adapter(conf, group):
    """A keystoneauth Adapter from ``conf[group]``."""
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    session = ks_loading.load_session_from_conf_options(conf, group,
                                                        auth=auth)
    return ks_loading.load_adapter_from_conf_options(conf, group,
                                                     session=session,
                                                     auth=auth)
