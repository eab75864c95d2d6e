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

"""AdaptivePagingFilter: only hosts that can honour a guest's hw:paging.

Placement does the selecting.  The contract is Nova's documented one: a
flavor with ``hw:paging=shadow`` requires ``CUSTOM_PAGING_SHADOW`` of the
host's provider with ``trait:CUSTOM_PAGING_SHADOW=required``, which
``nova-paging flavor set`` writes beside the key; every candidate then
has the trait, however few of the fleet do and however small
``[scheduler] max_placement_results`` is.  The request filter this
filter registers when the scheduler starts
(:mod:`nova_adaptive_paging.scheduler.request_filter`, on unless
``[adaptive_paging] request_filter`` is off) adds the trait to a flavor
with ``hw:paging`` alone.

This filter is the fail-closed guard behind them.  A request that reaches
it with ``hw:paging`` but without the trait required of placement (the
request filter off, or not registered because Nova changed) fails every
host, and one INFO line per request says which key and trait, and why
the request filter did not add it; so does a value no release can honour
(set below microversion 2.86, before Nova validated extra specs) and a
flavor whose traits contradict its ``hw:paging``.  Aggregate metadata
withholds policies from a group of hosts.  Like Nova's own filters it
only filters: an empty result becomes Nova's own NoValidHost with its
allocation cleanup and its tenant-safe fault.  A forced live migration
or evacuation (microversion 2.67 and older) runs no filter at all: the
agent on the destination reports such a guest
(``nova_paging_guest_policy_not_honoured``).
"""

from oslo_log import log as logging

from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils

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
        # At scheduler start-up, before nova-scheduler forks its workers:
        # registers the request filter, or logs and exports why not, and
        # never stops the scheduler (request_filter.start).
        request_filter.start()

    def _refusal(self, spec_obj):
        """Why the request fails every host, or None: what the flavor
        asks is invalid or contradicts its traits, or it reached the
        filters without the trait placement should have selected for."""
        flavor = spec_obj.flavor
        traits = request_filter.image_traits(spec_obj)
        try:
            wanted = capabilities.flavor_policy(flavor.extra_specs, traits)
        except policy.PolicyError as exc:
            return None, str(exc)
        if wanted.paging is None:
            return wanted, None
        accepted = capabilities.accepted_traits(wanted.paging)
        if accepted & spec_obj.root_required or any(
                capabilities.trait_requested(t, flavor.extra_specs, traits)
                for t in accepted):
            return wanted, None
        status = request_filter.STATUS
        why = (status.reason if status is not None
               and status.state != request_filter.REGISTERED
               else 'the request filter did not run')
        return wanted, ('%s=%s without %s required of placement (%s): add '
                        'it to the flavor (nova-paging flavor set)' % (
                            vocabulary.KEY_POLICY, wanted.paging,
                            ' or '.join(
                                vocabulary.trait_spec_key(t) + '='
                                + vocabulary.TRAIT_REQUIRED
                                for t in sorted(accepted)), why))

    def filter_all(self, filter_obj_list, spec_obj):
        # What the flavor asks is the request's, the same for every host:
        # parsed once, and a refusal said once, at INFO, where Nova says
        # which filter removed every host.  Aggregates are per host.  A
        # rebuild passes every host, as BaseHostFilter does per host
        # (RUN_ON_REBUILD): Nova runs no request filter for it either.
        if not self.RUN_ON_REBUILD and scheduler_utils.request_is_rebuild(
                spec_obj):
            return list(filter_obj_list)
        wanted, refusal = self._refusal(spec_obj)
        if refusal is not None:
            LOG.info('AdaptivePagingFilter refuses flavor %s for every '
                     'host: %s', spec_obj.flavor.name, refusal)
            return []
        return [host for host in filter_obj_list
                if self._aggregates_allow(host, wanted.paging)]

    def host_passes(self, host_state, spec_obj):
        wanted, refusal = self._refusal(spec_obj)
        if refusal is not None:
            LOG.debug('%s fails: %s', host_state, refusal)
            return False
        return self._aggregates_allow(host_state, wanted.paging)

    @staticmethod
    def _aggregates_allow(host_state, paging):
        if paging is None:
            return True
        for aggregate in host_state.aggregates:
            allowed = aggregate.metadata.get(vocabulary.AGGREGATE_KEY)
            if allowed is not None and paging.value not in {
                    p.strip() for p in allowed.split(',')}:
                LOG.debug('%s fails: aggregate %s allows %s=%s only',
                          host_state, aggregate.name, vocabulary.KEY_POLICY,
                          allowed)
                return False
        return True
