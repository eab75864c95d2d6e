"""AdaptivePagingFilter: only hosts that can honour a guest's hw:paging.

Placement does the selecting.  A flavor with ``hw:paging=shadow`` asks
placement for ``CUSTOM_PAGING_SHADOW`` on the host's provider, either
itself (``trait:CUSTOM_PAGING_SHADOW=required``, which ``nova-paging
flavor set`` writes beside the key) or through the request filter this
filter registers when the scheduler starts
(:mod:`nova_adaptive_paging.scheduler.request_filter`), so that
``hw:paging`` alone selects too.  Every candidate then has the trait,
however few of the fleet do and however small ``[scheduler]
max_placement_results`` is.

What is left here: a value no release can honour (set below
microversion 2.86, before Nova validated extra specs) fails every host;
a request that reaches the filters without the trait (nothing Nova does
today) fails closed; aggregate metadata withholds policies from a group
of hosts.  Like Nova's own filters it only filters: the reason a host
fails goes to the scheduler's debug log, and an empty result becomes
Nova's own NoValidHost with its allocation cleanup and its tenant-safe
fault.
"""

from oslo_log import log as logging

from nova.scheduler import filters

from nova_adaptive_paging import capabilities
from nova_adaptive_paging import policy
from nova_adaptive_paging.scheduler import request_filter
from nova_adaptive_paging import vocabulary

LOG = logging.getLogger(__name__)


class AdaptivePagingFilter(filters.BaseHostFilter):
    """Pass hosts that can give the paging mode the flavor's ``hw:paging``
    asks for; pass every host for a flavor without ``hw:paging``."""

    # A rebuild keeps the host and the flavor and changes only the image,
    # and hw:paging is a flavor extra spec: nothing the host must honour
    # changes, so a guest is never refused a rebuild on the host it runs
    # on (even if an aggregate withheld its policy since).
    RUN_ON_REBUILD = False
    # The answer depends on the flavor and the host only, so the instances
    # of a multi-create share it.
    run_filter_once_per_request = True

    def __init__(self):
        super().__init__()
        # At scheduler start-up: fails it, naming what changed, if Nova's
        # request-filter internals are not the ones this release knows.
        request_filter.register()

    def host_passes(self, host_state, spec_obj):
        flavor = spec_obj.flavor
        try:
            wanted = policy.from_extra_specs(flavor.extra_specs)
        except policy.PolicyError as exc:
            LOG.debug('%s fails: %s: %s', host_state, vocabulary.KEY_POLICY,
                      exc)
            return False
        if wanted.paging is None:
            return True
        accepted = capabilities.accepted_traits(wanted.paging)
        if not accepted & spec_obj.root_required and not any(
                capabilities.trait_requested(
                    t, flavor.extra_specs,
                    request_filter.image_traits(spec_obj))
                for t in accepted):
            LOG.debug('%s fails: %s=%s reached the filters without trait '
                      '%s required of placement', host_state,
                      vocabulary.KEY_POLICY, wanted.paging,
                      ' or '.join(sorted(accepted)))
            return False
        for aggregate in host_state.aggregates:
            allowed = aggregate.metadata.get(vocabulary.AGGREGATE_KEY)
            if allowed is not None and wanted.paging.value not in {
                    p.strip() for p in allowed.split(',')}:
                LOG.debug('%s fails: aggregate %s allows %s=%s only',
                          host_state, aggregate.name, vocabulary.KEY_POLICY,
                          allowed)
                return False
        return True
