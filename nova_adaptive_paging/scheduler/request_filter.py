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

"""require_paging_trait: ``hw:paging`` alone makes placement select.

The contract is Nova's own: a flavor that asks ``hw:paging=shadow``
carries ``trait:CUSTOM_PAGING_SHADOW=required`` beside it (``nova-paging
flavor set`` writes the pair), and placement returns capable hosts only,
however large the fleet, with no part of this package in the scheduler.
This request filter is a convenience on top: it adds the trait a flavor
with ``hw:paging`` alone needs to the request's root provider before
Nova asks placement, exactly as Nova's own request filters do for image
types or virtio sound.  It also refuses, with a reason that reaches the
NoValidHost fault, a flavor whose traits contradict its ``hw:paging``
(RequestFilterFailed, as Nova's request filters refuse).

Nova has no plugin point for request filters: :func:`start` appends this
one to ``nova.scheduler.request_filter.ALL_REQUEST_FILTERS`` when the
scheduler builds its host filters (AdaptivePagingFilter's constructor),
after checking every internal it relies on.  That never stops the
scheduler: when ``[adaptive_paging] request_filter`` is off, or a Nova
release changed those internals, it logs why (one error for a failed
check), exports the state (node_exporter textfile,
``nova_paging_scheduler_request_filter``), and the scheduler runs on
with AdaptivePagingFilter refusing ``hw:paging`` alone, which it explains.

nova-scheduler builds the manager, and so its filters, in the parent
process and then forks its ``[scheduler] workers`` (oslo.service's
ProcessLauncher, ``os.fork``): each worker inherits the module list with
this filter in it.  A scheduler that built its filters after the fork, in
each worker, would register in each worker, which is the same.
"""

import dataclasses
import os

import nova.conf
from oslo_log import log as logging
from prometheus_client import core as prom_core
from prometheus_client import exposition
from prometheus_client import registry as prom_registry

from nova_adaptive_paging import capabilities
from nova_adaptive_paging.conf import scheduler as scheduler_conf
from nova_adaptive_paging import exception
from nova_adaptive_paging import policy
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import vocabulary

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
scheduler_conf.register_opts(CONF)

FILTER_NAME = 'AdaptivePagingFilter'
TEXTFILE = 'nova_paging_scheduler.prom'

# The request filter's states (the ``state`` label of
# nova_paging_scheduler_request_filter).
REGISTERED = 'registered'
DISABLED = 'disabled'
FAILED = 'failed'
STATES = (REGISTERED, DISABLED, FAILED)


class RegistrationError(exception.Error):
    """Nova's request-filter internals are not what this release knows."""


@dataclasses.dataclass(frozen=True)
class Status:
    """What the last :func:`start` in this process made of the request
    filter, and why when it is not registered."""

    state: str
    reason: str = ''


# None until a scheduler built AdaptivePagingFilter in this process.
STATUS = None


def image_traits(request_spec):
    """The traits the request's image requires (``traits_required``)."""
    if not request_spec.obj_attr_is_set('image') or \
            request_spec.image is None or \
            not request_spec.image.obj_attr_is_set('properties'):
        return ()
    return request_spec.image.properties.get('traits_required', ())


def active():
    """Whether require_paging_trait acts: the scheduler runs
    AdaptivePagingFilter and ``[adaptive_paging] request_filter`` is on.
    Read per request, as Nova's request filters read their options, so a
    list entry left from an earlier configuration of the process does
    nothing."""
    return (CONF.adaptive_paging.request_filter
            and FILTER_NAME in CONF.filter_scheduler.enabled_filters)


def require_paging_trait(ctxt, request_spec):
    """Add the trait ``hw:paging`` needs to the root provider's required
    traits, unless the flavor or image already requires it; True if it
    added one (Nova's request-filter convention).  A flavor whose keys
    contradict each other (Nova's API checks each key alone) or that
    Nova's API did not check (set below microversion 2.86) is refused
    with RequestFilterFailed naming the key and, for a contradiction, the
    trait."""
    if not active():
        return False
    from nova import exception as nova_exception

    flavor = request_spec.flavor
    try:
        wanted = capabilities.flavor_policy(flavor.extra_specs,
                                            image_traits(request_spec))
    except policy.PolicyError as exc:
        LOG.info('require_paging_trait: flavor %s refused: %s',
                 flavor.name, exc)
        # The reason ends in the instance's fault (NoValidHost), which
        # Nova cuts at 255 characters: the error alone, key first.
        raise nova_exception.RequestFilterFailed(reason=str(exc))
    if wanted.paging is None:
        return False
    trait = vocabulary.REQUIRED_TRAIT[wanted.paging]
    if any(capabilities.trait_requested(t, flavor.extra_specs,
                                        image_traits(request_spec))
           for t in capabilities.accepted_traits(wanted.paging)):
        return False
    request_spec.root_required.add(trait)
    LOG.debug('require_paging_trait: flavor %s asks %s=%s; required '
              'trait %s added', flavor.name, vocabulary.KEY_POLICY,
              wanted.paging, trait)
    return True


def _calls(function, name, depth=3):
    """Whether ``function``, or a function it wraps (decorators such as
    oslo.messaging's expected_exceptions keep it in a closure), names
    ``name``."""
    code = getattr(function, '__code__', None)
    if code is None:
        return False
    if name in code.co_names:
        return True
    inner = [c.cell_contents for c in function.__closure__ or ()
             if callable(getattr(c, 'cell_contents', None))]
    return depth > 0 and any(_calls(f, name, depth - 1) for f in inner)


def _check(request_filter, manager, objects):
    """The Nova internals the request filter relies on; RegistrationError
    naming the first that changed."""
    where = 'nova.scheduler.request_filter'
    filters = getattr(request_filter, 'ALL_REQUEST_FILTERS', None)
    process = getattr(request_filter, 'process_reqspec', None)
    select = getattr(getattr(manager, 'SchedulerManager', None),
                     'select_destinations', None)
    spec = getattr(objects, 'RequestSpec', None)
    checks = (
        (isinstance(filters, list), '%s.ALL_REQUEST_FILTERS is not a list'
         % where),
        (_calls(process, 'ALL_REQUEST_FILTERS'), '%s.process_reqspec does '
         'not run ALL_REQUEST_FILTERS' % where),
        (_calls(select, 'process_reqspec'), 'nova.scheduler.manager.'
         'SchedulerManager.select_destinations does not call '
         'process_reqspec'),
        (isinstance(getattr(spec, 'root_required', None), property),
         'nova.objects.RequestSpec has no root_required'),
    )
    for ok, what in checks:
        if not ok:
            raise RegistrationError(
                'AdaptivePagingFilter cannot add its request filter: %s '
                '(Nova changed).  nova-scheduler runs on; flavors with %s '
                'but no trait:CUSTOM_PAGING_*=required are refused until '
                'they get the trait (nova-paging flavor set) or a '
                'nova-adaptive-paging release made for this Nova is '
                'installed' % (what, vocabulary.KEY_POLICY))
    return filters


def register(enabled=True):
    """Make Nova's request filters hold require_paging_trait once
    (``enabled``) or not at all; the :class:`Status` that results.

    Raises RegistrationError naming the Nova internal that changed, or
    whatever else went wrong, leaving the list without this filter
    (:func:`start` turns either into a FAILED status).  Idempotent: a
    second call with the same ``enabled`` changes nothing.
    """
    from nova import objects
    from nova.scheduler import manager
    from nova.scheduler import request_filter

    filters = getattr(request_filter, 'ALL_REQUEST_FILTERS', None)
    if not enabled:
        _withdraw(filters)
        return Status(DISABLED, '[adaptive_paging] request_filter is off')
    try:
        objects.register_all()
        filters = _check(request_filter, manager, objects)
    except Exception:           # start() says what
        _withdraw(filters)
        raise
    if require_paging_trait not in filters:
        filters.append(require_paging_trait)
    return Status(REGISTERED)


def _withdraw(filters):
    """No entry of ours left in Nova's list (when it is one)."""
    while isinstance(filters, list) and require_paging_trait in filters:
        filters.remove(require_paging_trait)


def start(conf=CONF):
    """At scheduler start-up (AdaptivePagingFilter's constructor):
    register as ``conf`` says, log the outcome once per change (an error
    for a failed check), and export it.  Returns the Status."""
    global STATUS
    try:
        status = register(conf.adaptive_paging.request_filter)
    except RegistrationError as exc:
        status = Status(FAILED, str(exc))
    except Exception as exc:    # whatever it is, the scheduler starts
        LOG.debug('registering require_paging_trait', exc_info=True)
        status = Status(FAILED, 'AdaptivePagingFilter cannot add its '
                        'request filter: %s: %s.  nova-scheduler runs on; '
                        'flavors with %s but no '
                        'trait:CUSTOM_PAGING_*=required are refused' % (
                            type(exc).__name__, exc, vocabulary.KEY_POLICY))
    if status != STATUS:
        if status.state == FAILED:
            LOG.error('%s', status.reason)
        elif status.state == DISABLED:
            LOG.info('require_paging_trait not added to Nova\'s request '
                     'filters: %s; flavors need %s with its '
                     'trait:CUSTOM_PAGING_*=required', status.reason,
                     vocabulary.KEY_POLICY)
        else:
            LOG.info('require_paging_trait added to Nova\'s request '
                     'filters')
        STATUS = status
    export(status, conf.adaptive_paging.textfile_collector_dir)
    return status


class _StatusCollector(prom_registry.Collector):
    def __init__(self, status):
        self.status = status

    def collect(self):
        metric = metrics.SCHEDULER_REQUEST_FILTER
        fam = prom_core.GaugeMetricFamily(metric.name, metric.help,
                                          labels=metric.labels)
        for state in STATES:
            fam.add_metric([state], float(state == self.status.state))
        yield fam


def export(status, directory):
    """Write ``status`` for node_exporter's textfile collector into
    ``directory`` (whole or not at all); nothing when it is unset or
    does not exist.  A write that fails is logged, never raised: the
    scheduler's start does not depend on it."""
    try:
        if not directory or not os.path.isdir(directory):
            return None
        path = os.path.join(directory, TEXTFILE)
        registry = prom_registry.CollectorRegistry(auto_describe=False)
        registry.register(_StatusCollector(status))
        exposition.write_to_textfile(path, registry)
    except Exception as exc:    # a bad value of the option, a full disk
        LOG.warning('request filter state not exported to %s: %s',
                    directory, exc)
        return None
    return path
