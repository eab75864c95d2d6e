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

"""Placement traits: publish a host's capabilities, find capable hosts.

Talks to the placement API through a keystoneauth1 ``Adapter`` (the agent
builds one from the ``[placement]`` section of its configuration; tests
pass one bound to the in-process placement fixture).  Only traits with
the ``CUSTOM_PAGING_`` prefix are touched: Nova and other agents own the
rest of the provider's traits.
"""

import logging
import re

from nova_adaptive_paging import exception
from nova_adaptive_paging import vocabulary

LOG = logging.getLogger(__name__)

TRAITS_VERSION = '1.6'


class PlacementError(exception.Error):
    pass


def _check(resp, what, ok=(200,)):
    if resp.status_code not in ok:
        raise PlacementError('%s: HTTP %d: %s' % (what, resp.status_code,
                                                  resp.text[:300]))
    return resp


# Placement's rule for custom trait names.
CUSTOM_TRAIT_RE = re.compile(r'CUSTOM_[A-Z0-9_]{1,248}')


def _provider(adapter, name):
    resp = _check(adapter.get('/resource_providers', params={'name': name},
                              microversion=TRAITS_VERSION, raise_exc=False),
                  'looking up provider %s' % name)
    found = resp.json()['resource_providers']
    return found[0]['uuid'] if found else None


def find_provider(adapter, names):
    """``(name, uuid)`` of this compute node's resource provider.

    Nova names it after the hypervisor hostname, which for the libvirt
    driver is libvirt's idea of the host name: the short name or the FQDN,
    not necessarily ``socket.gethostname()``.  ``names`` are the
    candidates in order; exactly one may exist.
    """
    names = list(dict.fromkeys(n for n in names if n))
    found = [(n, u) for n, u in ((n, _provider(adapter, n)) for n in names)
             if u is not None]
    if len(found) == 1:
        return found[0]
    if not found:
        raise PlacementError(
            'no resource provider named %s (is nova-compute running on '
            'this host? set [placement] compute_node_name to its '
            'hypervisor hostname)' % ' or '.join(repr(n) for n in names))
    raise PlacementError(
        'resource providers %s all match this host: set [placement] '
        'compute_node_name to the one nova-compute uses'
        % ', '.join('%s (%s)' % f for f in found))


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
    bad = sorted(t for t in wanted if not CUSTOM_TRAIT_RE.fullmatch(t))
    if bad:
        raise PlacementError('provider %s: cannot set trait %s: placement '
                             'takes CUSTOM_ and [A-Z0-9_], at most 255 '
                             'characters' % (rp_uuid, ', '.join(bad)))
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
        _check(resp, 'provider %s: setting traits %s' % (
            rp_uuid, ', '.join(sorted(wanted - ours)) or '(none)'))
        return wanted - ours, ours - wanted
    raise PlacementError('provider %s kept changing: gave up after %d '
                         'retries' % (rp_uuid, retries))


def publish(adapter, node_names, caps, retries=5):
    """Publish ``caps`` on this compute node's provider (``node_names``:
    the candidate names, see :func:`find_provider`).

    Returns ``(provider name, provider uuid, traits added, traits
    removed)``.
    """
    if isinstance(node_names, str):
        node_names = [node_names]
    name, rp_uuid = find_provider(adapter, node_names)
    added, removed = reconcile(adapter, rp_uuid, caps.traits(), retries)
    return name, rp_uuid, added, removed
