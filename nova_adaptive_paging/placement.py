"""Placement traits: publish a host's capabilities, find capable hosts.

Talks to the placement API through a keystoneauth1 ``Adapter`` (the agent
builds one from the ``[placement]`` section of its configuration; tests
pass one bound to the in-process placement fixture).  Only traits with
the ``CUSTOM_PAGING_`` prefix are touched: Nova and other agents own the
rest of the provider's traits.
"""

import logging

from nova_adaptive_paging import exception
from nova_adaptive_paging import vocabulary

LOG = logging.getLogger(__name__)

TRAITS_VERSION = '1.6'
REQUIRED_VERSION = '1.18'


class PlacementError(exception.Error):
    pass


def _check(resp, what, ok=(200,)):
    if resp.status_code not in ok:
        raise PlacementError('%s: HTTP %d: %s' % (what, resp.status_code,
                                                  resp.text[:300]))
    return resp


def find_provider(adapter, name):
    """UUID of the resource provider called ``name`` (Nova names a compute
    node's provider after its hypervisor hostname)."""
    resp = _check(adapter.get('/resource_providers', params={'name': name},
                              microversion=TRAITS_VERSION, raise_exc=False),
                  'looking up provider %s' % name)
    found = resp.json()['resource_providers']
    if len(found) != 1:
        raise PlacementError('no resource provider named %r (is '
                             'nova-compute running on this host?)' % name)
    return found[0]['uuid']


def providers_with(get, trait):
    """UUIDs of every provider with ``trait``: one call, any fleet size.

    ``get(url, version)`` returns a response without raising on HTTP
    errors: Nova's ``SchedulerReportClient.get`` in the scheduler,
    :func:`getter` of a keystoneauth adapter elsewhere.
    """
    resp = get('/resource_providers?required=%s' % trait, REQUIRED_VERSION)
    if resp.status_code == 400 and 'No such trait' in resp.text:
        return frozenset()         # nobody has published it yet
    _check(resp, 'listing providers with %s' % trait)
    return frozenset(rp['uuid'] for rp in resp.json()['resource_providers'])


def getter(adapter):
    """A ``get(url, version)`` for :func:`providers_with` over an adapter."""
    return lambda url, version: adapter.get(url, microversion=version,
                                            raise_exc=False)


def ensure_traits(adapter, names):
    for name in sorted(names):
        _check(adapter.put('/traits/%s' % name, microversion=TRAITS_VERSION,
                           raise_exc=False),
               'creating trait %s' % name, ok=(201, 204))


def reconcile(adapter, rp_uuid, wanted, retries=5):
    """Make the provider's CUSTOM_PAGING_* traits exactly ``wanted``.

    Other traits are kept.  Placement's provider generation guards the
    read-modify-write: on 409 (someone else changed the provider in
    between) the traits are read again and the update retried.  Returns
    ``(added, removed)``.
    """
    wanted = set(wanted)
    ensure_traits(adapter, wanted)
    url = '/resource_providers/%s/traits' % rp_uuid
    for attempt in range(retries + 1):
        resp = _check(adapter.get(url, microversion=TRAITS_VERSION,
                                  raise_exc=False),
                      'reading traits of %s' % rp_uuid)
        body = resp.json()
        current = set(body['traits'])
        ours = {t for t in current if t.startswith(vocabulary.TRAIT_PREFIX)}
        if ours == wanted:
            return set(), set()
        desired = (current - ours) | wanted
        resp = adapter.put(url, json={
            'traits': sorted(desired),
            'resource_provider_generation':
                body['resource_provider_generation']},
            microversion=TRAITS_VERSION, raise_exc=False)
        if resp.status_code == 409:
            LOG.info('provider %s changed while publishing traits; '
                     'retrying (%d/%d)', rp_uuid, attempt + 1, retries)
            continue
        _check(resp, 'updating traits of %s' % rp_uuid)
        return wanted - ours, ours - wanted
    raise PlacementError('provider %s kept changing: gave up after %d '
                         'retries' % (rp_uuid, retries))


def publish(adapter, node_name, caps, retries=5):
    """Publish ``caps`` on the provider of compute node ``node_name``.

    Returns ``(provider uuid, traits added, traits removed)``.
    """
    rp_uuid = find_provider(adapter, node_name)
    added, removed = reconcile(adapter, rp_uuid, caps.traits(), retries)
    return rp_uuid, added, removed
