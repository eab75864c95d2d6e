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

"""What can go wrong in the agent: the ``kind`` label of
``agent_errors_total``, one name per source so an operator's alert can
tell a libvirt outage from a bad flavor."""

import collections

LIBVIRT = 'libvirt'
METADATA = 'metadata'
POLICY = 'policy'
VM = 'vm'
APPLY = 'apply'
THRESHOLDS = 'thresholds'
PROFILE = 'profile'
PLACEMENT = 'placement'
NOVA_API = 'nova-api'
FAULTS = 'guest-faults'
COUNTERS = 'counters'
# Anything else one guest's handling raised (the pass went on).
GUEST = 'guest'
# The host interface as a whole failed after start-up (its ABI file).
HOST = 'host'
INTERNAL = 'internal'
KINDS = (LIBVIRT, METADATA, POLICY, VM, APPLY, THRESHOLDS, PROFILE,
         PLACEMENT, NOVA_API, FAULTS, COUNTERS, GUEST, HOST, INTERNAL)


class Health:
    """The agent's errors by kind and the conditions it has logged: each
    is logged once while it lasts, and its end once."""

    def __init__(self, log):
        self.log = log
        self.errors = collections.Counter({k: 0 for k in KINDS})
        self.said = {}              # key -> message logged while true

    def fail(self, kind, key, message):
        """Count one error of ``kind``; log ``message`` once while it
        lasts."""
        self.errors[kind] += 1
        self.warn(key, message)

    def warn(self, key, message):
        """Log ``message`` once while it lasts (a state, not an event:
        nothing is counted)."""
        if self.said.get(key) != message:
            self.said[key] = message
            self.log.warning('%s', message)

    def ok(self, key):
        if self.said.pop(key, None) is not None:
            self.log.info('%s: resolved', key)

    def forget(self, domain):
        """Drop what was said of a guest that has gone."""
        for key in [k for k in self.said
                    if isinstance(k, tuple) and k[1:2] == (domain,)]:
            del self.said[key]

    def guest_failed(self, domain, uuid, stage, exc):
        """Anything a guest's handling raised: counted, logged once with
        its instance's UUID; the pass goes on with the next guest."""
        self.fail(GUEST, ('guest', domain), '%s (instance %s): %s failed: '
                  '%s: %s; the other guests are not affected' % (
                      domain, uuid, stage, type(exc).__name__, exc))
        self.log.debug('%s of %s', stage, domain, exc_info=True)
