"""Entry point for oslo-config-generator (``oslo.config.opts``)."""

from nova_adaptive_paging.conf import adaptive_paging
from nova_adaptive_paging.conf import agent
from nova_adaptive_paging.conf import nova
from nova_adaptive_paging.conf import placement

MODULES = (adaptive_paging, agent, nova, placement)


def list_opts():
    return [(group, opts)
            for module in MODULES
            for group, opts in module.list_opts().items()]
