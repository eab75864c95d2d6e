"""AdaptivePagingFilter: only hosts that can honour a guest's hw:paging."""

import collections
import dataclasses

from oslo_log import log as logging

import nova.conf
from nova import exception
from nova.scheduler.client import report
from nova.scheduler import filters
from nova.scheduler import utils

from nova_adaptive_paging import capabilities
from nova_adaptive_paging.conf import adaptive_paging as paging_conf
from nova_adaptive_paging import placement
from nova_adaptive_paging import policy

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
paging_conf.register_opts(CONF)

# Aggregate metadata an operator sets to withhold policies from the hosts
# of an aggregate (comma-separated subset of adaptive,hap,shadow).  It can
# only take capabilities away: granting one a host lacks would put guests
# in a mode nobody can give them.
AGGREGATE_KEY = 'adaptive_paging:policies'

# Requests whose placement answer is kept; scheduling is concurrent, so
# the answers are keyed by request rather than held as "the current one".
_REMEMBERED = 64


@dataclasses.dataclass(frozen=True)
class _Verdict:
    paging: policy.Paging = None
    trait: str = None
    capable: frozenset = frozenset()
    error: str = None

    def reason(self, candidates):
        if self.error:
            return 'hw:paging: %s' % self.error
        return ('hw:paging=%s needs a host with placement trait %s; none of '
                'the %d candidate host(s) has it, or their aggregates '
                'withhold it' % (self.paging, self.trait, candidates))


def _request_key(spec_obj):
    # A multi-create runs the filters once per instance with one
    # RequestSpec; a reschedule gets a new one and a fresh look-up.
    ctxt = getattr(spec_obj, '_context', None)
    return getattr(ctxt, 'request_id', None), id(spec_obj)


class AdaptivePagingFilter(filters.BaseHostFilter):
    """Pass hosts whose published capabilities cover the request's
    ``hw:paging`` (or ``[adaptive_paging] default_policy`` when the flavor
    has none).

    Capabilities are placement traits the compute-node agent publishes
    (:mod:`nova_adaptive_paging.capabilities`).  HostState carries no
    traits, so ``filter_all`` asks placement once per request for the
    providers with the one trait the request needs, whatever the fleet
    size, and ``host_passes`` checks each host against that answer.
    """

    # Rebuild keeps the host and the flavor, and hw:paging is a flavor
    # extra spec: a rebuild cannot change what the host must honour.
    RUN_ON_REBUILD = False

    def __init__(self):
        super().__init__()
        self._verdicts = collections.OrderedDict()

    def filter_all(self, filter_obj_list, spec_obj):
        if utils.request_is_rebuild(spec_obj):
            return super().filter_all(filter_obj_list, spec_obj)
        key = _request_key(spec_obj)
        verdict = self._verdicts.get(key)
        if verdict is None or verdict.error:
            verdict = self._verdicts[key] = self._verdict(spec_obj)
            while len(self._verdicts) > _REMEMBERED:
                self._verdicts.popitem(last=False)
        hosts = list(super().filter_all(filter_obj_list, spec_obj))
        if filter_obj_list and not hosts:
            # Nova's own fault says only "not enough hosts"; name the
            # requirement so that the operator sees what is missing.
            raise exception.NoValidHost(
                reason=verdict.reason(len(filter_obj_list)))
        return hosts

    @staticmethod
    def _verdict(spec_obj):
        try:
            wanted = policy.from_extra_specs(
                spec_obj.flavor.extra_specs).resolve(
                    CONF.adaptive_paging.default_policy)
        except policy.PolicyError as exc:
            return _Verdict(error=str(exc))
        trait = capabilities.REQUIRED_TRAIT[wanted.paging]
        try:
            capable = placement.providers_with(
                report.report_client_singleton().get, trait)
        except Exception as exc:   # fail closed, and say why
            LOG.warning('AdaptivePagingFilter: listing providers with %s '
                        'failed: %s', trait, exc)
            return _Verdict(wanted.paging, trait,
                            error='placement: %s' % exc)
        return _Verdict(wanted.paging, trait, capable)

    def host_passes(self, host_state, spec_obj):
        verdict = self._verdicts[_request_key(spec_obj)]
        if verdict.error:
            LOG.debug('%s fails: %s', host_state, verdict.error)
            return False
        if host_state.uuid not in verdict.capable:
            LOG.debug('%s fails: hw:paging=%s needs trait %s, which its '
                      'provider does not have', host_state, verdict.paging,
                      verdict.trait)
            return False
        for aggregate in host_state.aggregates:
            allowed = aggregate.metadata.get(AGGREGATE_KEY)
            if allowed is not None and verdict.paging.value not in {
                    p.strip() for p in allowed.split(',')}:
                LOG.debug('%s fails: aggregate %s allows hw:paging=%s only',
                          host_state, aggregate.name, allowed)
                return False
        return True
