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

"""Configuration options, registered the oslo.config way.

``CONF`` is the ConfigOpts the agent and CLI use; every group module has
``register_opts`` and ``list_opts`` (see nova/conf).  It is not oslo's
global ``cfg.CONF``, which Nova owns: the agent's ``[placement]`` section
must not collide with Nova's.  The scheduler filter, the request filter
and the API validators run inside Nova: what they decide comes from the
flavor, the image, placement's traits and aggregate metadata, and the
scheduler's two options (whether to add the request filter, where to
export its state) are registered on Nova's own configuration, in
nova.conf's ``[adaptive_paging]`` (:mod:`.scheduler`, not in ``CONF``).
"""

from oslo_config import cfg

from nova_adaptive_paging.conf import adaptive_paging
from nova_adaptive_paging.conf import agent
from nova_adaptive_paging.conf import nova
from nova_adaptive_paging.conf import placement

CONF = cfg.ConfigOpts()

adaptive_paging.register_opts(CONF)
agent.register_opts(CONF)
nova.register_opts(CONF)
placement.register_opts(CONF)


def check_values(conf, groups=(adaptive_paging.adaptive_paging_group,)):
    """Read every option of ``groups`` once: oslo.config checks a value
    only when it is read, and a bad one must stop a command (or the agent)
    at start, not in the middle of its work.  Raises ValueError naming
    ``[group] option`` and what was expected."""
    for group in groups:
        for name in conf[group.name]:
            try:
                conf[group.name][name]
            except (cfg.Error, ValueError) as exc:
                reason = str(exc).split(' is not valid: ', 1)[-1]
                raise ValueError('[%s] %s: %s' % (group.name, name, reason))
