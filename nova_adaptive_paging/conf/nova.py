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

"""[nova]: how the agent reaches the Nova API (keystoneauth)."""

from oslo_config import cfg

from nova_adaptive_paging.conf import ksa

nova_group = cfg.OptGroup(
    'nova',
    title='Nova API',
    help="""
Credentials and endpoint the compute-node agent uses to read the flavor
extra specs of guests whose domain metadata predates Nova 32.0.0 (which
started writing them there). A reader role that can show any server is
enough. Without credentials such guests get
``[adaptive_paging] default_policy``.
""")


def register_opts(conf):
    conf.register_group(nova_group)
    ksa.register(conf, nova_group.name, 'compute')


def list_opts():
    return {nova_group: ksa.list_opts()}


def adapter(conf):
    """A keystoneauth Adapter for Nova from ``conf.nova``."""
    return ksa.adapter(conf, nova_group.name)
