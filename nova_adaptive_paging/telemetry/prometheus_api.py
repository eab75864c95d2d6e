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

"""A small client of the Prometheus HTTP API (``/api/v1/query``).

Any PromQL endpoint answers it (Prometheus, Thanos Query, Mimir,
VictoriaMetrics).  Errors become :class:`PrometheusError`, one line that
names the URL and what went wrong.
"""

import math
import re

import requests

from nova_adaptive_paging import exception


class PrometheusError(exception.Error):
    pass


class Client:
    """``session``: a requests.Session (its auth, CA and client
    certificate apply); ``method``: GET for endpoints that implement
    only it (Aetos); ``name``: what errors call the endpoint."""

    def __init__(self, url, timeout=60.0, session=None, method='POST',
                 name=None):
        self.url = url.rstrip('/')
        self.timeout = timeout
        self.session = session or requests.Session()
        self.method = method
        self.name = name or '--prometheus %s' % self.url

    def query(self, expr, time=None):
        """Instant vector: [(labels dict, float)], NaN samples dropped."""
        params = {'query': expr}
        if time is not None:
            params['time'] = '%.3f' % time
        where = self.name
        body = 'params' if self.method == 'GET' else 'data'
        try:
            # The session's CA and client certificate, given per request:
            # requests lets REQUESTS_CA_BUNDLE override a session's.
            resp = self.session.request(
                self.method, self.url + '/api/v1/query',
                timeout=self.timeout, verify=self.session.verify,
                cert=self.session.cert, **{body: params})
        except requests.RequestException as exc:
            raise PrometheusError('%s: cannot reach it: %s'
                                  % (where, _reason(exc)))
        try:
            doc = resp.json()
        except ValueError:
            raise PrometheusError('%s: HTTP %d, not a Prometheus API answer'
                                  % (where, resp.status_code))
        if doc.get('status') != 'success':
            raise PrometheusError('%s: the query failed (%s: %s): %s'
                                  % (where, doc.get('errorType', 'error'),
                                     doc.get('error', 'no reason given'),
                                     _short(expr)))
        data = doc.get('data') or {}
        if data.get('resultType') != 'vector':
            raise PrometheusError('%s: expected an instant vector, got %r'
                                  % (where, data.get('resultType')))
        out = []
        for item in data.get('result', ()):
            value = float(item['value'][1])
            if not math.isnan(value):
                out.append((item['metric'], value))
        return out


def _reason(exc):
    # requests nests the socket error in a long repr: keep its message.
    text = str(exc)
    found = re.search(r'\[Errno -?\d+\] ([^"\')]+)', text)
    if found:
        return found.group(1)
    if isinstance(exc, requests.Timeout):
        return 'timed out'
    return text


def _short(expr, limit=120):
    return expr if len(expr) <= limit else expr[:limit] + '...'
