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

"""A guest's flavor extra specs from the Nova API, for guests whose domain
metadata predates Nova 32.0.0 (no ``<nova:extraSpecs>``).

The server's own embedded flavor is asked for (``GET /servers/{id}``,
microversion 2.47), not the flavor by name: it is what Nova applied to
this instance, even if the flavor was edited or deleted since.  The
answer is kept per instance for as long as the agent runs: an instance's
flavor changes only through a resize, which restarts the guest with
fresh metadata.  While the API cannot be reached, every lookup returns
at once with :class:`NovaUnavailable` until ``retry_s`` has passed, so a
down API costs one timeout per retry period, not one per guest.
"""

import time

from nova_adaptive_paging import exception

# The first microversion whose server body embeds the flavor, extra
# specs included.
MICROVERSION = '2.47'


class NovaUnavailable(exception.Error):
    pass


class ServerFlavors:
    def __init__(self, adapter_factory, retry_s=60.0, timeout_s=10.0,
                 clock=time.monotonic):
        self._factory = adapter_factory
        self._adapter = None
        self.retry_s = retry_s
        self.timeout_s = timeout_s
        self.clock = clock
        self._cache = {}
        self._retry_at = 0.0
        self._error = None
        self.requests = 0

    def __call__(self, instance):
        """The extra specs of ``instance``'s flavor ({} for a server Nova
        does not know); raises NovaUnavailable."""
        if instance.uuid in self._cache:
            return self._cache[instance.uuid]
        now = self.clock()
        if now < self._retry_at:
            raise NovaUnavailable(self._error)
        try:
            if self._adapter is None:
                self._adapter = self._factory()
            self.requests += 1
            resp = self._adapter.get('/servers/%s' % instance.uuid,
                                     microversion=MICROVERSION,
                                     microversion_service_type='compute',
                                     raise_exc=False, timeout=self.timeout_s)
            if resp.status_code == 404:
                specs = {}
            elif resp.status_code == 200:
                specs = dict(resp.json()['server']['flavor'].get(
                    'extra_specs') or {})
            else:
                raise NovaUnavailable('HTTP %d' % resp.status_code)
        except Exception as exc:        # keystoneauth, HTTP, JSON: retried
            self._retry_at = now + self.retry_s
            self._error = ('Nova API: %s (retrying in %.0f s)'
                           % (exc, self.retry_s))
            raise NovaUnavailable(self._error)
        self._cache[instance.uuid] = specs
        return specs
