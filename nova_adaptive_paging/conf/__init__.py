"""Configuration options, registered the oslo.config way.

``CONF`` is the ConfigOpts the agent and CLI use; every group module has
``register_opts`` and ``list_opts`` (see nova/conf).  It is not oslo's
global ``cfg.CONF``, which Nova owns: the scheduler filter registers the
``[adaptive_paging]`` group into Nova's configuration instead, and the
agent's ``[placement]`` section must not collide with Nova's.
"""

from oslo_config import cfg

from nova_adaptive_paging.conf import adaptive_paging
from nova_adaptive_paging.conf import placement

CONF = cfg.ConfigOpts()

adaptive_paging.register_opts(CONF)
placement.register_opts(CONF)
