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

"""Which paging pool a new adaptive guest should boot in: the one that
suited the guests of its image before it, else those of its project
(the decision behind the boot placement weigher,
:mod:`nova_adaptive_paging.scheduler.weights.paging_pool`, and the
modeled day's; every figure is MODELED).

What the fleet has learned is in Prometheus: each agent reports, per
guest on its host, how long it has modeled it there
(``guest_advised_seconds``: one stint in the host's pool) and what the
other mode would have saved it over that stint
(``guest_modeled_other_mode_gain_seconds``).  The last value of each
(host, guest) pair within ``history`` is one :class:`Stint`; its
*shadow advantage* is that gain on a hap host and minus it on a shadow
host (what shadow paging saved over hap, whichever pool the guest was
in).

A group (the guests of one image, or of one project) prefers shadow
when its stints' shadow advantage, summed, is more than ``threshold``
of the time they add up to, and hap when it is less than minus that;
it needs stints of at least ``min_guests`` guests, or it prefers
nothing.  The image speaks first; a project speaks when the image does
not (no history, too few guests, no clear preference, a guest booted
from a volume).  Nothing known: no preference, and the scheduler's other
weighers decide alone.

What cannot be true is dropped and counted, as :mod:`.figures` does: a
value that is not a finite number, a negative time, a gain larger than
the time it was gained in times ``MAX_VCPUS`` and a host that was in
both pools within ``history``.
"""

import collections
import dataclasses
import math
import threading
import time

from nova_adaptive_paging import exception
from nova_adaptive_paging.pools import figures as pool_figures
from nova_adaptive_paging.pools import planner
from nova_adaptive_paging.telemetry import metrics as M
from nova_adaptive_paging.telemetry import prometheus_api
from nova_adaptive_paging.telemetry import queries as Q
from nova_adaptive_paging import vocabulary

HAP, SHADOW = vocabulary.HAP, vocabulary.SHADOW
IMAGE, PROJECT = 'image', 'project'
# No guest can gain more than all of its vCPUs' time; the series do not
# carry the flavor, so the bound is the largest guest's.
MAX_VCPUS = 1024


class BootError(exception.Error, ValueError):
    pass


# (default, lowest, highest): the one table the scheduler's options and
# Params read.
BOUNDS = {
    'min_guests': (2, 1, 100000),
    'threshold': (0.005, 0.0, 1.0),
}


@dataclasses.dataclass(frozen=True)
class Params:
    min_guests: int = BOUNDS['min_guests'][0]
    # A share of the guests' time: 0.005 is 18 s an hour.
    threshold: float = BOUNDS['threshold'][0]

    def __post_init__(self):
        planner.check_bounds(self, BOUNDS, BootError)


@dataclasses.dataclass(frozen=True)
class Stint:
    """One guest's time in one pool, as its host's agent saw it."""
    uuid: str
    image: str
    project: str
    mode: str
    observed_s: float
    other_gain_s: float

    @property
    def shadow_advantage_s(self):
        return self.other_gain_s if self.mode == HAP else -self.other_gain_s


@dataclasses.dataclass(frozen=True)
class Prediction:
    mode: str            # HAP, SHADOW, or None: no preference
    basis: str           # IMAGE, PROJECT or None
    guests: int          # how many guests the group's stints are of
    rate: float          # shadow advantage per second of the group's time

    def __str__(self):
        if self.basis is None:
            return 'no preference: no image or project with a history'
        return '%s (%d guests of its %s: shadow %+.2f %% of their time)' % (
            self.mode or 'no preference', self.guests, self.basis,
            100 * self.rate)


NONE = Prediction(None, None, 0, 0.0)


class Predictor:
    """Predictions from a fleet's :class:`Stint` list (built once per
    read: the weigher asks it for every request)."""

    def __init__(self, stints, params=Params()):
        self.params = params
        sums = collections.defaultdict(lambda: [0.0, 0.0, set()])
        for s in stints:
            for basis, key in ((IMAGE, s.image), (PROJECT, s.project)):
                if key:
                    group = sums[basis, key]
                    group[0] += s.shadow_advantage_s
                    group[1] += s.observed_s
                    group[2].add(s.uuid)
        self.groups = {k: (adv, obs, len(uuids))
                       for k, (adv, obs, uuids) in sums.items()}

    def group(self, basis, key):
        """The :class:`Prediction` of one group (its mode None when it
        has too few guests or no clear preference)."""
        adv, obs, n = self.groups.get((basis, key), (0.0, 0.0, 0))
        if not key or n == 0 or obs <= 0:
            return Prediction(None, None, 0, 0.0)
        rate = adv / obs
        mode = None
        if n >= self.params.min_guests:
            if rate > self.params.threshold:
                mode = SHADOW
            elif rate < -self.params.threshold:
                mode = HAP
        return Prediction(mode, basis, n, rate)

    def predict(self, image, project):
        """The pool a new guest of ``image`` in ``project`` should boot
        in: the image's preference, else the project's."""
        seen = None
        for basis, key in ((IMAGE, image), (PROJECT, project)):
            p = self.group(basis, key)
            if p.mode is not None:
                return p
            seen = seen or (p if p.basis is not None else None)
        return seen or NONE


def _finite(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


@dataclasses.dataclass(frozen=True)
class History:
    stints: list
    pools: dict          # host name -> mode, now (pool_figures' naming)
    dropped: dict

    def resolver(self):
        return pool_figures.Figures(self.pools, {}).resolver()


class Deadline:
    """``client`` (prometheus_api.Client) with one deadline for all the
    queries of a read: each is given what is left of ``seconds``."""

    def __init__(self, client, seconds, clock=time.monotonic):
        self.client, self.clock = client, clock
        self.end = clock() + seconds

    def query(self, expr, at=None):
        left = self.end - self.clock()
        if left <= 0:
            raise prometheus_api.PrometheusError(
                '%s: no answer within the deadline' % self.client.name)
        self.client.timeout = left
        return self.client.query(expr, at)


def read(client, history='7d', at=None):
    """The fleet's :class:`History` from ``client``
    (prometheus_api.Client, or a :class:`Deadline`); raises its
    PrometheusError when Prometheus cannot answer."""
    dropped = collections.Counter()
    host_mode = pool_figures.pool_of_each_host(
        ((labels[Q.HOST], labels['mode'])
         for labels, _ in client.query(Q.pool_history(history), at)),
        dropped)
    info = {}
    for labels, _ in client.query(Q.guest_origin_history(history), at):
        uuid = labels[M.GUEST_LABEL]
        origin = (labels.get('image', ''), labels.get('project_id', ''))
        # A rebuild with another image: the guest speaks for neither.
        info[uuid] = origin if info.get(uuid, origin) == origin else (
            '', origin[1])
    observed = {}
    for labels, value in client.query(
            Q.last_over(M.ADVISED_SECONDS, history), at):
        if _finite(value) and value >= 0:
            observed[labels[Q.HOST], labels[M.GUEST_LABEL]] = value
        else:
            dropped['observed-not-finite'] += 1
    stints = []
    for labels, gain in client.query(
            Q.last_over(M.MODELED_OTHER_MODE_GAIN, history), at):
        where = labels[Q.HOST], labels[M.GUEST_LABEL]
        seconds = observed.get(where)
        if not _finite(gain):
            dropped['gain-not-finite'] += 1
        elif seconds is None or where[1] not in info:
            dropped['no-stint'] += 1
        elif where[0] not in host_mode:
            dropped['no-pool'] += 1
        elif abs(gain) > MAX_VCPUS * seconds:
            dropped['gain-beyond-time'] += 1
        else:
            image, project = info[where[1]]
            stints.append(Stint(where[1], image, project, host_mode[where[0]],
                                seconds, gain))
    pools = {}
    for labels, _ in client.query(Q.host_pool(), at):
        pools.setdefault(pool_figures.host_name(labels[Q.HOST]),
                         set()).add(labels['mode'])
    pools = {h: next(iter(m)) for h, m in pools.items() if len(m) == 1}
    return History(stints, pools, dict(dropped))


class Cached:
    """The latest :class:`History` and its :class:`Predictor`, read
    again every ``refresh_s`` (``read``: a function that returns a
    History or raises).  A read that fails leaves no predictor (the
    caller stays neutral) and is not tried again before ``refresh_s``:
    a Prometheus that is down costs one deadline per ``refresh_s``, not
    one per boot.  ``state()`` says, once per change, why predictions
    are on or off."""

    def __init__(self, read, refresh_s, params=Params(), clock=time.monotonic):
        self._read = read
        self.refresh_s = refresh_s
        self.params = params
        self.clock = clock
        self.lock = threading.Lock()
        self.at = None
        self.current = None      # (History, Predictor) or None
        self.error = None
        self._told = None

    def get(self):
        """(History, Predictor), or None with ``self.error`` saying
        why."""
        with self.lock:
            now = self.clock()
            if self.at is None or now - self.at >= self.refresh_s:
                self.at = now
                try:
                    history = self._read()
                    self.current = (history,
                                    Predictor(history.stints, self.params))
                    self.error = None
                except Exception as exc:    # never fail a boot
                    self.current = None
                    self.error = str(exc) or exc.__class__.__name__
            return self.current

    def news(self):
        """(changed, why): whether predictions went off or on again since
        the last call, and why they are off (None: on)."""
        with self.lock:
            now = self.error
            changed, self._told = now != self._told, now
            return changed, now
