"""Entry point for oslo-config-generator (``oslo.config.opts``)."""

from nova_adaptive_paging.conf import adaptive_paging


def list_opts():
    return [(group, opts)
            for group, opts in adaptive_paging.list_opts().items()]
