"""require_paging_trait: ``hw:paging`` alone makes placement select.

A flavor with ``hw:paging=shadow`` but without
``trait:CUSTOM_PAGING_SHADOW=required`` (set with ``openstack flavor
set``, not ``nova-paging flavor set``) would leave placement free to
return any ``[scheduler] max_placement_results`` hosts, and a host filter
can only reject: with capable hosts rare, NoValidHost while they sit
idle.  This request filter adds the trait the policy needs to the
request's root provider before Nova asks placement, exactly as Nova's own
request filters do for image types or virtio sound, so every candidate
can give the mode however large the fleet.

Nova has no plugin point for request filters: ``register()`` appends this
one to ``nova.scheduler.request_filter.ALL_REQUEST_FILTERS`` when the
scheduler builds its host filters (AdaptivePagingFilter's constructor),
and first checks every internal it relies on.  If a Nova release changes
them, the scheduler fails to start with one line naming what changed,
rather than scheduling ``hw:paging`` guests without the trait.
"""

from oslo_log import log as logging

from nova_adaptive_paging import capabilities
from nova_adaptive_paging import exception
from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary

LOG = logging.getLogger(__name__)


class RegistrationError(exception.Error):
    """Nova's request-filter internals are not what this release knows."""


def image_traits(request_spec):
    """The traits the request's image requires (``traits_required``)."""
    if not request_spec.obj_attr_is_set('image') or \
            request_spec.image is None or \
            not request_spec.image.obj_attr_is_set('properties'):
        return ()
    return request_spec.image.properties.get('traits_required', ())


def require_paging_trait(ctxt, request_spec):
    """Add the trait ``hw:paging`` needs to the root provider's required
    traits, unless the flavor or image already requires it; True if it
    added one (Nova's request-filter convention)."""
    flavor = request_spec.flavor
    try:
        wanted = policy.from_extra_specs(flavor.extra_specs)
    except policy.PolicyError:
        return False            # AdaptivePagingFilter refuses, saying why
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


def register():
    """Append require_paging_trait to Nova's request filters (once).

    Raises RegistrationError naming the internal that changed: the list,
    the loop over it, the scheduler's call of that loop, or the request
    spec's root-provider traits.
    """
    from nova import objects
    from nova.scheduler import manager
    from nova.scheduler import request_filter

    where = 'nova.scheduler.request_filter'
    filters = getattr(request_filter, 'ALL_REQUEST_FILTERS', None)
    process = getattr(request_filter, 'process_reqspec', None)
    select = getattr(getattr(manager, 'SchedulerManager', None),
                     'select_destinations', None)
    objects.register_all()
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
                'AdaptivePagingFilter cannot register its request filter: '
                '%s (Nova changed); without it a flavor with %s but no '
                'trait:CUSTOM_PAGING_*=required is not selected by '
                'placement.  Use a nova-adaptive-paging release made for '
                'this Nova' % (what, vocabulary.KEY_POLICY))
    if require_paging_trait not in filters:
        filters.append(require_paging_trait)
        LOG.info('require_paging_trait added to Nova\'s request filters')
