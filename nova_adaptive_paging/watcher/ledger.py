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

"""The moves the strategy must know of before it plans: those planned or
under way (their room is taken, their guest stays where it is) and each
guest's moves of the last day (hysteresis, the daily cap, the fair
share of the budget).

Watcher's strategies see the cluster data model only, which shows a
guest where Nova last said it is; nothing in it holds a migration that
an action plan has yet to carry out, and two audits (Watcher runs
``[watcher_decision_engine] max_audit_workers`` = 2 at once) each see the
whole room of a host.  So the strategy reads Watcher's own records
(:class:`WatcherLedger`: its action plans and actions in Watcher's
database) and, for the moves an audit has proposed but Watcher has not
yet saved, keeps a reservation in the decision engine's process
(:class:`Reservations`) for ``RESERVATION_S``.
"""

import dataclasses
import datetime
import threading
import time

from nova_adaptive_paging.pools import planner

DAY_S = planner.DAY_S
# How long an audit's proposed moves hold their room in this process
# before Watcher's database must show them (it saves the action plan as
# soon as the strategy returns).
RESERVATION_S = 600.0
MIGRATE = 'migrate'


@dataclasses.dataclass
class Moves:
    pending: list       # (uuid, source, destination)
    # uuid -> [(unix time it ended, destination, unix time it was
    # decided)], oldest first
    history: dict


class Recorded:
    """Moves recorded by hand, at given (modeled) times: the simulated
    fleet's, and tests'."""

    def __init__(self):
        self.done, self.under_way = [], []

    def record(self, uuid, source, destination, at, decided_at=None):
        """A move that ended ``at``, decided ``decided_at`` (default: as
        it ended)."""
        self.done.append((at, uuid, source, destination,
                          at if decided_at is None else decided_at))

    def read(self, now):
        history = {}
        for at, uuid, _, dest, decided in sorted(self.done):
            if now - DAY_S <= at <= now:
                history.setdefault(uuid, []).append((at, dest, decided))
        return Moves(list(self.under_way), history)


class WatcherLedger:
    """Watcher's action plans and actions (its database): ``migrate``
    actions not yet done of plans still live (recommended, pending,
    ongoing) are pending; those that succeeded are the history (ended
    when last updated, decided when created with their plan), and,
    within ``model_lag_s`` (the compute model's refresh), pending too, in
    case the model has not yet seen them land (the planner ignores a
    pending move whose guest the model shows on its destination)."""

    def __init__(self, context, model_lag_s=3600.0):
        self.context = context
        self.model_lag_s = model_lag_s

    def read(self, now):
        from watcher import objects
        objects.register_all()          # as Watcher's services do
        plan_state = objects.action_plan.State
        action_state = objects.action.State
        live = [p.id for p in objects.ActionPlan.list(
            self.context, filters={'state__in': [
                plan_state.RECOMMENDED, plan_state.PENDING,
                plan_state.ONGOING]})]
        pending, history = [], {}
        if live:
            for a in objects.Action.list(self.context, filters={
                    'action_plan_id__in': live,
                    'state__in': [action_state.PENDING,
                                  action_state.ONGOING]}):
                if a.action_type == MIGRATE:
                    pending.append(_move(a))
        since = datetime.datetime.fromtimestamp(
            now - DAY_S, datetime.timezone.utc).replace(tzinfo=None)
        # Done within the day: updated then (the applier saves the state
        # it reaches), or created then and never updated.
        done = {}
        for stamp in ('updated_at__gte', 'created_at__gte'):
            for a in objects.Action.list(self.context, filters={
                    'state': action_state.SUCCEEDED, stamp: since}):
                done[a.uuid] = a
        for a in sorted(done.values(),
                        key=lambda a: a.updated_at or a.created_at):
            if a.action_type != MIGRATE:
                continue
            uuid, source, dest = _move(a)
            at, decided = (_unix(a.updated_at or a.created_at),
                           _unix(a.created_at or a.updated_at))
            history.setdefault(uuid, []).append((at, dest, decided))
            if now - at <= self.model_lag_s:
                pending.append((uuid, source, dest))
        return Moves(pending, history)


def _unix(stamp):
    """Watcher's naive UTC time stamp in seconds."""
    return stamp.replace(tzinfo=datetime.timezone.utc).timestamp()


def _move(action):
    p = action.input_parameters or {}
    return p.get('resource_id'), p.get('source_node'), p.get(
        'destination_node')


class Reservations:
    """The moves audits of this process proposed, until Watcher's
    database holds them.  ``lock`` serializes the audits' planning."""

    def __init__(self, clock=time.monotonic):
        self.lock = threading.Lock()
        self.clock = clock
        self._held = {}                 # uuid -> (Pending, expiry)

    def add(self, pending):
        self._held[pending.uuid] = (pending, self.clock() + RESERVATION_S)

    def live(self):
        now = self.clock()
        self._held = {u: v for u, v in self._held.items() if v[1] > now}
        return [p for p, _ in self._held.values()]
