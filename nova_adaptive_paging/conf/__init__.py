"""Configuration options, registered the oslo.config way.

``CONF`` is the global ConfigOpts the agent and CLI use; every group
module has ``register_opts`` and ``list_opts`` (see nova/conf).
"""

from oslo_config import cfg

from nova_adaptive_paging.conf import adaptive_paging

CONF = cfg.CONF

adaptive_paging.register_opts(CONF)
