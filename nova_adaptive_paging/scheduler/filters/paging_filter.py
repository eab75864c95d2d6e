"""AdaptivePagingFilter: only hosts that can honour a guest's hw:paging.

Placement does the selecting: a flavor with ``hw:paging=shadow`` also
carries ``trait:CUSTOM_PAGING_SHADOW=required`` (``nova-paging flavor
set`` writes the pair), Nova turns that into placement's ``required=``
and every candidate host already has the trait, however few of the fleet
do and however small ``[scheduler] max_placement_results`` is.

This filter is the safety net for a flavor where the pair disagrees
(``hw:paging`` set by hand without the trait, or by an older release):
it says so in one warning line and asks placement, once per request, for
the providers with the trait, so that no guest lands on a host that
cannot give its paging mode.  It also applies the aggregate metadata
that withholds policies from a group of hosts.

Like Nova's own filters it only filters: the reason a host fails goes to
the scheduler's debug log, and an empty result becomes Nova's own
NoValidHost with its allocation cleanup and its tenant-safe fault.
"""

import dataclasses

from oslo_log import log as logging

from nova.scheduler.client import report
from nova.scheduler import filters
from nova.scheduler import utils

from nova_adaptive_paging import capabilities
from nova_adaptive_paging import placement
from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary

LOG = logging.getLogger(__name__)

# Aggregate metadata (vocabulary.AGGREGATE_KEY) withholds policies from
# the hosts of an aggregate.  It can only take capabilities away: granting
# one a host lacks would put guests in a mode nobody can give them.


@dataclasses.dataclass(frozen=True)
class _Request:
    """What one scheduling request asks of a host; built once per call of
    filter_all, so concurrent requests never share it."""

    paging: vocabulary.Paging = None
    trait: str = None
    # None: placement already required the trait of every candidate.
    capable: frozenset = None
    error: str = None


def _image_traits(spec_obj):
    if not spec_obj.obj_attr_is_set('image') or spec_obj.image is None \
            or not spec_obj.image.obj_attr_is_set('properties'):
        return ()
    image = spec_obj.image
    return image.properties.get('traits_required', ())


def _request(spec_obj):
    flavor = spec_obj.flavor
    try:
        wanted = policy.from_extra_specs(flavor.extra_specs)
    except policy.PolicyError as exc:
        return _Request(error='hw:paging: %s' % exc)
    stray = capabilities.stray_traits(wanted.paging, flavor.extra_specs,
                                      _image_traits(spec_obj))
    if stray:
        LOG.warning('AdaptivePagingFilter: flavor %s requires trait(s) %s '
                    'but asks hw:paging=%s; set both with "nova-paging '
                    'flavor set"', flavor.name, ', '.join(sorted(stray)),
                    wanted.paging or '(unset)')
    if wanted.paging is None:
        # No requirement: the guest boots where it always did; the
        # agent applies [adaptive_paging] default_policy on its hosts.
        return _Request()
    trait = vocabulary.REQUIRED_TRAIT[wanted.paging]
    if capabilities.trait_requested(trait, flavor.extra_specs,
                                    _image_traits(spec_obj)):
        return _Request(wanted.paging, trait)
    LOG.warning('AdaptivePagingFilter: flavor %s asks hw:paging=%s without '
                '%s=%s, so placement does not select for it and capable '
                'hosts may be missing from its candidates; set both with '
                '"nova-paging flavor set"', flavor.name, wanted.paging,
                vocabulary.trait_spec_key(trait),
                vocabulary.TRAIT_REQUIRED)
    try:
        capable = placement.providers_with(
            report.report_client_singleton().get, trait)
    except Exception as exc:   # fail closed, and say why
        return _Request(wanted.paging, trait,
                        error='listing providers with %s failed: %s'
                        % (trait, exc))
    return _Request(wanted.paging, trait, capable)


class AdaptivePagingFilter(filters.BaseHostFilter):
    """Pass hosts that can give the paging mode the flavor's ``hw:paging``
    asks for; pass every host for a flavor without ``hw:paging``."""

    # Rebuild keeps the host and the flavor, and hw:paging is a flavor
    # extra spec: a rebuild cannot change what the host must honour.
    RUN_ON_REBUILD = False
    # The answer depends on the flavor and the host only, so the instances
    # of a multi-create share it (and the one placement look-up).
    run_filter_once_per_request = True

    def filter_all(self, filter_obj_list, spec_obj):
        hosts = list(filter_obj_list)
        if not hosts or utils.request_is_rebuild(spec_obj):
            return hosts
        request = _request(spec_obj)
        return [host for host in hosts if _passes(host, request)]

    def host_passes(self, host_state, spec_obj):
        return _passes(host_state, _request(spec_obj))


def _passes(host_state, request):
    if request.error:
        LOG.debug('%s fails: %s', host_state, request.error)
        return False
    if request.paging is None:
        return True
    if request.capable is not None and host_state.uuid not in \
            request.capable:
        LOG.debug('%s fails: hw:paging=%s needs trait %s, which its '
                  'provider does not have', host_state, request.paging,
                  request.trait)
        return False
    for aggregate in host_state.aggregates:
        allowed = aggregate.metadata.get(vocabulary.AGGREGATE_KEY)
        if allowed is not None and request.paging.value not in {
                p.strip() for p in allowed.split(',')}:
            LOG.debug('%s fails: aggregate %s allows hw:paging=%s only',
                      host_state, aggregate.name, allowed)
            return False
    return True
