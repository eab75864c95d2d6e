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

"""A stock fleet deployed as doc/source/deployment.rst and watcher.rst
say, and Watcher's own services proposing the modeled day's migrations.

Real: Nova's functional framework (API, scheduler with the paging
filter, conductor, placement, computes of Nova's fake virt driver) with
the modeled day's eight guests booted through Nova's API onto two hap
and two shadow pool members; the collection's ``pools`` play
(``ansible-playbook``, by name) writing the strategy's file into
Watcher's configuration directory; python-watcher's own
``watcher-db-manage create_schema`` (SQLite), ``watcher-decision-engine``
and API application (``watcher-api-wsgi``: watcher.api.wsgi under the
WSGI server pbr installs with it), run from this checkout; the audit
template and the continuous audit created through Watcher's REST API as
``openstack optimize`` sends them (a parameter out of bounds refused
there); the decision engine finding the continuous audit, building its
compute model with Watcher's Nova collector from Nova's API and
placement, loading ``paging_fit`` through its entry point, which reads
a real Prometheus through ``[prometheus_client]``; Watcher's planner
saving the action plan.  The agents' series in Prometheus carry the
labels of the monitoring role's service discovery file (its template
rendered as Ansible renders it, for an inventory whose hosts Nova knows
by other names than the addresses scraped).

Stand-ins, for what cannot run here: the fake virt driver (no KVM
guests); oslo.messaging's fake driver in Watcher's processes (no message
bus: a continuous audit needs none, and the applier's cast that
``--auto-trigger`` sends goes nowhere: the applier does not run, the
plan is the proposal); no Keystone (Watcher's API with
``enable_authentication = false``, requests carrying an admin's
headers; Nova's API and placement reached through a loopback relay,
since Nova's framework serves them inside this process only, which adds
the identity headers Keystone's middleware would); and no agents: their
series are backfilled, each hour's figure the evaluator's replay of the
guest's day-long workload (MODELED, what an agent reports)."""

import dataclasses
import os
import subprocess
import sys
import time

import fixtures
import yaml

from nova_adaptive_paging import capabilities
from nova_adaptive_paging.costmodel import evaluator
from nova_adaptive_paging.costmodel import traces as tracelib
from nova_adaptive_paging import policy
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import prometheus
from nova_adaptive_paging.simhost import scraped_fleet
from nova_adaptive_paging.simhost import stock_fleet
from nova_adaptive_paging.telemetry import metrics as M
from nova_adaptive_paging.telemetry import queries as Q
from tests.functional import base
from tests.functional import prometheus as test_prometheus
from tests.functional import watcher_services as services
from tests.unit import test_ansible_roles as roles

HOUR = 3600
BIN = os.path.dirname(sys.executable)
# The modeled day's fleet: Nova's host names, and the inventory that
# names them (its own names and addresses: Prometheus scrapes the
# address, the strategy finds a host by the name Nova knows).
POOL = {'hap-1': 'hap', 'hap-2': 'hap', 'shadow-1': 'shadow',
        'shadow-2': 'shadow'}
INVENTORY = {'cmp-%d' % (i + 1): {
    'ansible_host': '192.0.2.%d' % (11 + i), 'nova_paging_nova_host': host,
    'nova_paging_pool': POOL[host]} for i, host in enumerate(sorted(POOL))}
CAPS = {host: capabilities.Capabilities(0, mode == 'hap',
                                        'intel-icelake-server', False,
                                        pool=True)
        for host, mode in POOL.items()}
# An audit at hour 3 of the day, when none of the guests has moved (the
# modeled day makes the same four moves at its first audit with a whole
# window of figures, hour 2: doc/source/stock-fleet.rst): the figures,
# the evaluator's, put the TLB-bound guests in the hap pool and the
# fault-bound ones in the shadow pool on the wrong side; the guest whose
# phases alternate every half hour and the one whose TLB phase comes at
# noon are where they belong, and the static ones never move.
AT_HOUR = 3
MOVES = {'tlb-all-day': 'shadow', 'faults-all-day': 'hap',
         'tlb-then-faults': 'shadow', 'phases': 'hap'}


def hourly_gains(hours=AT_HOUR):
    """{guest: [what the other mode would have saved it in each hour]}
    where the day boots it (the evaluator's replay, MODELED)."""
    shipped, hw = tracelib.builtin(), scraped_fleet.truths()[0]
    profile, out = profiles.builtin(), {}
    for name, _, host, pieces in stock_fleet.GUESTS:
        day = stock_fleet.day_trace(name, pieces, shipped, hours)
        here = POOL[host]
        there = 'shadow' if here == 'hap' else 'hap'
        cols = [f.name for f in dataclasses.fields(day)
                if isinstance(getattr(day, f.name), tuple)]
        gains, start, elapsed = [], 0, 0.0
        for i, dt in enumerate(day.interval_s + (0,)):
            if elapsed >= (len(gains) + 1) * HOUR - 1e-6 or (
                    i == len(day.interval_s)):
                part = dataclasses.replace(day, **{
                    c: getattr(day, c)[start:i] for c in cols})
                r = evaluator.evaluate(part, hw, profile)['policies']
                gains.append(r[here]['time_s'] - r[there]['time_s'])
                start = i
            elapsed += dt
        out[name] = gains[:hours]
    return out


def agent_series(end, targets, guests):
    """The agents' series for ``AT_HOUR`` hours up to ``end``, a scrape a
    minute, each with its target's labels as the monitoring role's
    service discovery file gives them (and the job's); ``guests``: name
    -> (Nova's UUID, Nova's host, hourly gains)."""
    labels_of = {t['labels']['instance'].rsplit(':', 1)[0]: dict(
        t['labels'], job=Q.AGENT_JOB) for t in targets}
    lines = {}

    def add(metric, labels, value, at):
        text = ','.join('%s="%s"' % kv for kv in sorted(labels.items()))
        lines.setdefault(metric.name, []).append(
            '%s{%s} %r %d' % (metric.name, text, float(value), at))
    for k in range(AT_HOUR * 60, -1, -1):
        at, since = end - 60 * k, AT_HOUR * HOUR - 60 * k
        for host, mode in POOL.items():
            add(M.HOST_PAGING_MODE, dict(labels_of[host], mode=mode), 1, at)
        for uuid, host, gains in guests.values():
            hour, into = divmod(since, HOUR)
            gain = sum(gains[:hour]) + (
                gains[hour] * into / HOUR if hour < len(gains) else 0)
            labels = dict(labels_of[host], **{M.GUEST_LABEL: uuid})
            add(M.ADVISED_SECONDS, labels, since, at)
            add(M.MODELED_OTHER_MODE_GAIN, labels, gain, at)
    out = []
    for name in sorted(lines):
        out.append('# TYPE %s gauge' % name)
        out.extend(lines[name])
    return '\n'.join(out) + '\n# EOF\n'


class TestWatcherProposesTheDaysMoves(base.PagingTestBase):
    hosts = CAPS
    weights = {host: 100 for host in CAPS}

    def boot_the_day(self):
        """Ask Nova for the modeled day's guests, each on its first host
        (the API's ``host``: Nova's scheduler and the paging filter still
        check it), all at once; {name: server}."""
        flavors = {}
        for paging, pools in (('adaptive', True), ('hap', False),
                              ('shadow', False)):
            flavors[paging] = self._create_flavor(
                vcpu=2, memory_mb=1024, disk=1,
                extra_spec=capabilities.flavor_extra_specs(
                    policy.PagingPolicy(policy.parse_paging(paging)),
                    pools=pools))
        return {name: self.admin_api.post_server({
            'server': self._build_server(
                name=name, flavor_id=flavors[paging], networks='none',
                host=host)}) for name, paging, host, _ in stock_fleet.GUESTS}

    def wait_for_the_day(self, servers):
        """{name: Nova's UUID} once every guest is ACTIVE where asked."""
        for name, _, host, _ in stock_fleet.GUESTS:
            self._wait_for_state_change(servers[name], 'ACTIVE',
                                        max_retries=240)
            self.assertEqual(host, self.host_of(servers[name]))
        return {name: server['id'] for name, server in servers.items()}

    def start(self, work, service, *argv, env=services.CHECKOUT_ENV):
        log = open(os.path.join(work, service + '.log'), 'w')
        self.addCleanup(log.close)
        proc = subprocess.Popen(
            [os.path.join(BIN, service)] + list(argv), stdout=log,
            stderr=subprocess.STDOUT, env=env, cwd=work,
            stdin=subprocess.DEVNULL, start_new_session=True)

        def stop():
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.addCleanup(stop)
        proc.name = service
        return proc

    def test_a_continuous_audit_proposes_the_days_migrations(self):
        started = time.monotonic()
        test_prometheus.binaries()
        work = self.useFixture(fixtures.TempDir()).path
        # Watcher as deployment.rst and watcher.rst set it up, while Nova
        # boots the day's guests: the pools play writes the strategy's
        # file into Watcher's configuration directory, watcher-db-manage
        # makes Watcher's database, then its decision engine and API
        # start (on a port the agents' Prometheus will answer on).
        nova_api = self.api_fixture.api.base_url.rsplit('/', 1)[0]
        relays = [services.Relay.to(nova_api, {
            'X-Auth-User': 'admin', 'X-Auth-Project-Id': self.api.project_id,
            'X-Roles': 'admin,member,reader'}),
            services.Relay.to(self.placement.fixture.endpoint)]
        for server, _ in relays:
            self.addCleanup(server.shutdown)
        api_port, prom_port = prometheus.free_port(), prometheus.free_port()
        conf = services.watcher_conf(work, api_port, prom_port, relays[0][1],
                                     relays[1][1])
        conf_dir = os.path.join(work, 'root', 'etc', 'watcher',
                                'watcher.conf.d')
        argv, env = services.pools_play(work, os.path.join(work, 'root'))
        play = self.start(work, 'ansible-playbook', *argv, env=env)
        schema = self.start(work, 'watcher-db-manage', '--config-file', conf,
                            'create_schema')
        servers = self.boot_the_day()
        self.assertEqual(0, schema.wait(120), self.log(work, schema))
        self.assertEqual(0, play.wait(300), self.log(work, play))
        options = ('--config-file', conf, '--config-dir', conf_dir)
        self.start(work, 'watcher-decision-engine', *options)
        # Watcher's API application (watcher.api.wsgi) under the WSGI
        # server pbr installs with it (its eventlet server refuses
        # oslo.service's threading backend).
        self.start(work, 'watcher-api-wsgi', '--host', '127.0.0.1', '--port',
                   str(api_port), '--', *options)
        uuids = self.wait_for_the_day(servers)

        # The agents' series as Prometheus stores them: each target
        # labelled by the monitoring role's service discovery file.
        targets = yaml.safe_load(roles.render(
            'monitoring', 'file_sd.yml.j2', hostvars=INVENTORY,
            groups={'nova_paging_compute': sorted(INVENTORY)}))
        gains = hourly_gains()
        os.makedirs(os.path.join(work, 'prometheus'))
        prom = prometheus.Server(
            os.path.join(work, 'prometheus'), port=prom_port,
            openmetrics=agent_series(int(time.time()) - 30, targets, {
                name: (uuids[name], host, gains[name])
                for name, _, host, _ in stock_fleet.GUESTS}))
        self.addCleanup(prom.stop)

        # doc/source/watcher.rst: the check of step 1 (the decision engine
        # registers the plugin's goal and strategy when it starts), then
        # steps 2 and 3.
        watcher = services.WatcherAPI('http://127.0.0.1:%d' % api_port, work)
        watcher.wait_for('/v1/strategies?goal=paging_fit', 'strategies',
                         'paging_fit')
        spec = watcher.get('/v1/strategies/paging_fit')['parameters_spec']
        self.assertEqual(1, spec['properties']['margin']['minimum'])
        template = watcher.post('/v1/audit_templates', {
            'name': 'paging-fit', 'goal': 'paging_fit',
            'strategy': 'paging_fit',
            'description': 'Adaptive guests to the paging pool that suits '
                           'them'})
        audit = {'audit_template_uuid': template['uuid'],
                 'audit_type': 'CONTINUOUS', 'interval': '3600',
                 'name': 'paging-fit-hourly', 'auto_trigger': True}
        # Refused when created: a margin below its bound.
        refused = watcher.post('/v1/audits', dict(
            audit, parameters={'margin': 0.5}), status=400)
        self.assertIn('margin', refused)
        watcher.post('/v1/audits', dict(
            audit, parameters={'budget': 5, 'margin': 2}))
        plan = watcher.wait_for_plan('paging-fit-hourly')

        # The plan: a live migration of each guest the hour's figures put
        # on the wrong side, from where Nova has it to the other pool;
        # none of the others.
        actions = watcher.get('/v1/actions/detail?action_plan_uuid=%s'
                              % plan['uuid'])['actions']
        by_uuid = {u: n for n, u in uuids.items()}
        first = {name: host for name, _, host, _ in stock_fleet.GUESTS}
        moves = {}
        for action in actions:
            self.assertEqual('migrate', action['action_type'])
            p = action['input_parameters']
            self.assertEqual('live', p['migration_type'])
            name = by_uuid[p['resource_id']]
            self.assertEqual(first[name], p['source_node'])
            moves[name] = POOL[p['destination_node']]
        self.assertEqual(MOVES, moves)
        indicators = {i['name']: i['value']
                      for i in plan['efficacy_indicators']}
        self.assertEqual(len(MOVES), indicators['instance_migrations_count'])
        # The two adaptive guests that stay (the static ones are not
        # counted), and no figure dropped.
        self.assertEqual(2, indicators['guests_held'])
        self.assertEqual(0, indicators['figures_dropped'])
        # What the decision engine's log says at INFO (watcher.rst).
        self.assertIn('paging_fit: guests that stay: 2 not-worth-it, '
                      '2 static', watcher.log('watcher-decision-engine'))
        print('Watcher proposed %s in %.1f s' % (
            ', '.join('%s to %s' % m for m in sorted(moves.items())),
            time.monotonic() - started))

    @staticmethod
    def log(work, proc):
        with open(os.path.join(work, proc.name + '.log')) as f:
            return f.read()[-3000:]
