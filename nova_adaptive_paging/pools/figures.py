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

"""What the fleet strategy reads from Prometheus: each stock host's pool
and, per guest on it, how long its agent has modeled it and what the
other mode would have saved it over the last window (MODELED figures of
the agents' advisory mode).

Hosts are named by the scraped ``instance`` without its port: the agents
are scraped as ``<Nova's host name>:<port>`` (doc/source/deployment.rst,
"Monitoring"); or, where the deployment follows Watcher's convention
(targets scraped by address, the host's name in a label such as
``fqdn``), by that label.  A Watcher compute node's ``hostname`` finds
its figures by the same rule as Watcher's own Prometheus datasource:
the name itself, else the one fully qualified name it is the first
label of (:meth:`Figures.resolve`).

What cannot be true is dropped and counted (``Figures.dropped``), never
weighed: a value that is not a finite number, a time observed that is
negative, and a host that exports both modes (it is in no pool).  The
bound on a gain (vCPUs x window) needs the guest's flavor: the planner
applies it.
"""

import collections
import dataclasses
import math

from nova_adaptive_paging.telemetry import metrics as M
from nova_adaptive_paging.telemetry import queries as Q


@dataclasses.dataclass(frozen=True)
class GuestFigures:
    host: str
    observed_s: float
    window_gain_s: float


@dataclasses.dataclass(frozen=True)
class Figures:
    pools: dict          # host -> vocabulary mode
    guests: dict         # Nova instance UUID -> GuestFigures
    # What was dropped: reason -> how many series.
    dropped: dict = dataclasses.field(default_factory=dict)

    def resolver(self):
        """A function from Watcher's compute node ``hostname`` to the
        name these figures give it: itself, else the one FQDN whose
        first label it is (``cmp-1`` for ``cmp-1.example.net``), else
        itself.  Built once for an audit's thousands of hosts."""
        names = set(self.pools) | {g.host for g in self.guests.values()}
        by_short = collections.defaultdict(list)
        for name in names:
            if '.' in name:
                by_short[name.split('.')[0]].append(name)

        def resolve(hostname):
            if hostname in names:
                return hostname
            found = by_short.get(hostname.split('.')[0], ())
            return found[0] if len(found) == 1 else hostname
        return resolve


def host_name(instance):
    return instance.rsplit(':', 1)[0] if ':' in instance else instance


def window_gain_expr(window):
    """The other mode's modeled gain over the last ``window`` on the
    guest's present host (a guest that arrived within the window has no
    value: its series there is younger)."""
    gain = Q.name(M.MODELED_OTHER_MODE_GAIN)
    return '%s - %s offset %s' % (gain, gain, window)


def _finite(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


def pool_of_each_host(host_modes, dropped):
    """{host: mode} from (host, mode) pairs: a host seen in both modes is
    in neither pool (whichever series came last would otherwise decide),
    counted in ``dropped['host-in-both-pools']``."""
    modes = collections.defaultdict(set)
    for host, mode in host_modes:
        modes[host].add(mode)
    pools = {}
    for host, seen in modes.items():
        if len(seen) == 1:
            (pools[host],) = seen
        else:
            dropped['host-in-both-pools'] += 1
    return pools


def read(client, window, at=None, fqdn_label=None):
    """:class:`Figures` from ``client`` (prometheus_api.Client); raises
    its PrometheusError when Prometheus cannot answer.  ``fqdn_label``:
    the label that names a host, where there is one."""
    def host_of(labels):
        if fqdn_label and labels.get(fqdn_label):
            return labels[fqdn_label]
        return host_name(labels[Q.HOST])

    dropped = collections.Counter()
    keep = (fqdn_label,) if fqdn_label else ()
    pools = pool_of_each_host(
        ((host_of(labels), labels['mode'])
         for labels, _ in client.query(Q.host_pool(*keep), at)), dropped)
    observed, hosts = {}, {}
    for labels, value in client.query(Q.name(M.ADVISED_SECONDS), at):
        if _finite(value) and value >= 0:
            observed[labels[Q.HOST], labels[M.GUEST_LABEL]] = value
            hosts[labels[Q.HOST]] = host_of(labels)
        else:
            dropped['observed-not-finite'] += 1
    gains = {}
    for labels, value in client.query(window_gain_expr(window), at):
        if _finite(value):
            gains[labels[Q.HOST], labels[M.GUEST_LABEL]] = value
        else:
            dropped['gain-not-finite'] += 1
    guests = {}
    for (instance, uuid), seconds in observed.items():
        gain = gains.get((instance, uuid))
        known = guests.get(uuid)
        # A guest seen on two hosts (migrated within the scrape's
        # staleness): its newest host is the one it has been on least.
        if known is None or seconds < known.observed_s:
            guests[uuid] = GuestFigures(hosts[instance], seconds, gain)
    return Figures(pools, guests, dict(dropped))
