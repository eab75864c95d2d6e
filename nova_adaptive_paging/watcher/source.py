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

"""Where the strategy reads the agents' figures: the PromQL endpoint
Watcher itself is configured with, or the strategy's own override.

1. ``[watcher_strategies.paging_fit] prometheus_url``, when set: that
   endpoint, unauthenticated (and the only one that answers queries at a
   past time, which the simulated day replays).
2. Otherwise the first of ``aetos`` and ``prometheus`` in the strategy's
   ``datasources`` (else ``[watcher_datasources] datasources``), as
   Watcher's datasources find their endpoint:

   - ``aetos``: the ``metric-storage`` endpoint of Keystone's catalog
     (``[aetos_client] interface``, ``region_name``), with Watcher's
     Keystone session (its token; Aetos lets a service user read series
     without a project label);
   - ``prometheus``: ``[prometheus_client] host`` and ``port``, with its
     ``username``/``password`` (basic auth), ``cafile`` (then https, as
     Watcher's client does) and ``certfile``/``keyfile``.

   Each section's ``fqdn_label`` names the label that holds a host's name
   (Watcher's convention: targets scraped by address, the name in a
   label); a series without it is named by its ``instance``.
"""

import requests
from oslo_config import cfg

from nova_adaptive_paging.telemetry import prometheus_api

CONF = cfg.CONF
AETOS, PROMETHEUS = 'aetos', 'prometheus'


class Source:
    """A client (prometheus_api.Client) and the label naming hosts."""

    def __init__(self, client, fqdn_label=None):
        self.client = client
        self.fqdn_label = fqdn_label


def for_strategy(config, osc=None):
    """The :class:`Source` the strategy's ``config`` names; raises
    PrometheusError (one line) when none is configured or reachable."""
    if config.prometheus_url:
        return Source(prometheus_api.Client(
            config.prometheus_url, timeout=config.prometheus_timeout,
            name='[watcher_strategies.paging_fit] prometheus_url %s'
            % config.prometheus_url))
    order = list(getattr(config, 'datasources', None) or _watcher_order())
    for name in order:
        if name == AETOS:
            return _aetos(osc, config.prometheus_timeout)
        if name == PROMETHEUS:
            return _prometheus(config.prometheus_timeout)
    raise prometheus_api.PrometheusError(
        'no endpoint for the figures: [watcher_strategies.paging_fit] '
        'prometheus_url is unset and the datasources (%s) name neither '
        'aetos nor prometheus' % (', '.join(order) or 'none'))


def _watcher_order():
    try:
        return CONF.watcher_datasources.datasources
    except cfg.NoSuchOptError:
        return []


def _prometheus(timeout):
    conf = CONF.prometheus_client
    if not conf.host:
        raise prometheus_api.PrometheusError(
            '[prometheus_client] host: unset; expected the Prometheus that '
            'scrapes the agents (or [watcher_strategies.paging_fit] '
            'prometheus_url)')
    session = requests.Session()
    scheme = 'http'
    if conf.cafile:
        session.verify, scheme = conf.cafile, 'https'
        if conf.certfile and conf.keyfile:
            session.cert = (conf.certfile, conf.keyfile)
    if conf.username and conf.password:
        session.auth = (conf.username, conf.password)
    url = '%s://%s:%s' % (scheme, conf.host, conf.port)
    return Source(prometheus_api.Client(
        url, timeout=timeout, session=session,
        name='[prometheus_client] %s' % url), conf.fqdn_label)


def _aetos(osc, timeout):
    conf = CONF.aetos_client
    if osc is None:
        from watcher.common import clients
        osc = clients.OpenStackClients()
    keystone = osc.session
    try:
        url = keystone.get_endpoint(
            service_type='metric-storage', interface=conf.interface,
            region_name=conf.region_name)
        headers = keystone.get_auth_headers()
    except Exception as exc:        # keystoneauth's many failures
        raise prometheus_api.PrometheusError(
            'aetos: no metric-storage endpoint from Keystone (%s, %s): %s'
            % (conf.interface, conf.region_name or 'any region',
               str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    if not url:
        raise prometheus_api.PrometheusError(
            'aetos: Keystone\'s catalog has no metric-storage endpoint '
            '(%s, %s)' % (conf.interface, conf.region_name or 'any region'))
    session = requests.Session()
    session.headers.update(headers or {})
    session.verify = getattr(keystone, 'verify', True)
    if getattr(keystone, 'cert', None):
        session.cert = keystone.cert
    # Aetos implements the Prometheus API's GET queries.
    return Source(prometheus_api.Client(
        url, timeout=timeout, session=session, method='GET',
        name='aetos %s' % url), conf.fqdn_label)
