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

"""A guest that came past the scheduler (a forced live migration or
evacuation onto a host that cannot give its ``hw:paging``), as the real
agent sees it: the simulated host, libvirt's test:/// driver, the agent's
own collector, and the generated alert evaluated by promtool on the
series that collector exported."""

import logging
import os
import subprocess
import sys

import prometheus_client
from prometheus_client import parser
import yaml

from nova_adaptive_paging.agent import service
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.telemetry import metrics
from tests.unit import test_telemetry_rules

if 'eventlet.patcher' in sys.modules and \
        sys.modules['eventlet.patcher'].is_monkey_patched('thread'):
    raise RuntimeError('tests/unit/test_agent_bypass.py needs real threads: '
                       'run it in a pytest process of its own, as tox.ini '
                       'does')

ALERT = 'NovaPagingPolicyNotHonoured'
# What each guest's flavor asks, and whether a stock host with EPT (hap
# only) can give it.
GUESTS = {
    'forced': ({'hw:paging': 'adaptive',
                'trait:CUSTOM_PAGING_SWITCHING': 'required'}, 1),
    'shadowed': ({'hw:paging': 'shadow'}, 1),
    'fits': ({'hw:paging': 'hap'}, 0),
}


def exported(agent):
    """{uuid: (policy, value)} of the metric, as the agent serves it."""
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector.Collector(agent))
    text = prometheus_client.generate_latest(registry).decode()
    for fam in parser.text_string_to_metric_families(text):
        if fam.name == metrics.GUEST_POLICY_NOT_HONOURED.name:
            return {s.labels['uuid']: (s.labels['policy'], s.value)
                    for s in fam.samples}
    return {}


def test_a_stock_host_reports_guests_it_cannot_give_their_policy(
        sim, start_guest, make_agent, caplog, tmp_path):
    for name, (specs, _) in GUESTS.items():
        start_guest(name, specs)
    start_guest('default', {'hw:cpu_policy': 'dedicated'})
    agent = make_agent(transport=simfleet.StockTransport(sim.model))
    with caplog.at_level(logging.WARNING):
        agent.reconcile()
        agent.reconcile()
    assert agent.caps.kvm and not agent.caps.switching
    assert agent.caps.host_mode == 'hap'
    uuids = {name: sim.vms[name].spec.uuid for name in sim.vms}
    got = exported(agent)
    assert got == {uuids[name]: (specs['hw:paging'], float(bad))
                   for name, (specs, bad) in GUESTS.items()}
    # A flavor that asks nothing has no series: no policy to honour.
    assert uuids['default'] not in got
    # One warning per such guest, however many passes, naming it.
    said = [r.getMessage() for r in caplog.records
            if 'cannot give' in r.getMessage()]
    assert len(said) == 2
    assert any(uuids['forced'] in line and 'hw:paging=adaptive' in line
               and 'CUSTOM_PAGING_SWITCHING' in line for line in said)

    # The alert, on the series this agent exported, held for 10 minutes.
    series = [{
        'series': '%s{job="nova-paging-agent",instance="h1:9118",uuid="%s",'
                  'policy="%s"}' % (metrics.GUEST_POLICY_NOT_HONOURED.name,
                                    uuid, policy),
        'values': '%gx10' % value} for uuid, (policy, value) in got.items()]
    # The generated alert's expression and labels; its wording is
    # dashboards/tests/alerts_test.yml's concern.
    with open(os.path.join(test_telemetry_rules.PROM, 'alerts.yml'),
              encoding='utf-8') as f:
        rule = [r for g in yaml.safe_load(f)['groups'] for r in g['rules']
                if r.get('alert') == ALERT][0]
    rule.pop('annotations')
    rules = tmp_path / 'alert.yml'
    rules.write_text(yaml.safe_dump({'groups': [{'name': 'bypass',
                                                 'rules': [rule]}]}))
    doc = {'rule_files': [str(rules)], 'evaluation_interval': '1m',
           'tests': [{'interval': '1m', 'input_series': series,
                      'alert_rule_test': [{
                          'eval_time': '10m', 'alertname': ALERT,
                          'exp_alerts': [{'exp_labels': {
                              'severity': 'warning',
                              'job': 'nova-paging-agent',
                              'instance': 'h1:9118', 'uuid': uuids[name],
                              'policy': GUESTS[name][0]['hw:paging']}}
                              for name in ('forced', 'shadowed')]}]}]}
    path = tmp_path / 'bypass_test.yml'
    path.write_text(yaml.safe_dump(doc))
    out = subprocess.run(
        [test_telemetry_rules.promtool(), 'test', 'rules', str(path)],
        capture_output=True, text=True)
    assert out.returncode == 0 and 'SUCCESS' in out.stdout, \
        out.stdout + out.stderr


def test_a_host_that_switches_honours_every_policy(
        sim, start_guest, make_agent):
    for name, (specs, _) in GUESTS.items():
        start_guest(name, specs)
    agent = make_agent()
    agent.reconcile()
    assert agent.caps.switching
    assert {value for _, value in exported(agent).values()} == {0.0}
    assert len(exported(agent)) == len(GUESTS)


def test_a_shadow_pool_host_reports_a_hap_guest_not_an_adaptive_one(
        tmp_path):
    # A stock host with ept=0 in the fleet's shadow pool: it takes
    # adaptive guests in pools (CUSTOM_PAGING_POOL) and shadow ones;
    # hap is the policy it cannot give.
    clock = simfleet.Clock()
    sim = simhost.SimHost(str(tmp_path), hardware.resolve('nehalem'),
                          profiles.builtin(), clock=clock, tdp=False)
    sim.clock = clock
    os.makedirs(os.path.join(sim.root, 'profiles'))
    guests = {'hap': {'hw:paging': 'hap'},
              'shadow': {'hw:paging': 'shadow'},
              'pools': {'hw:paging': 'adaptive',
                        'trait:CUSTOM_PAGING_POOL': 'required'}}
    for name, specs in guests.items():
        sim.start_vm(simhost.VmSpec(name, traces.builtin()['gcc'], specs))
    conf = simfleet.agent_conf_for(sim.root, sim.libvirt_uri, pool=True)
    agent = service.Agent(conf, 'amd-zen3', clock=sim.now_s,
                          transport=simfleet.StockTransport(sim.model))
    agent.reconcile()
    assert agent.caps.host_mode == 'shadow' and agent.caps.pool
    uuids = {name: sim.vms[name].spec.uuid for name in sim.vms}
    assert exported(agent) == {uuids['hap']: ('hap', 1.0),
                               uuids['shadow']: ('shadow', 0.0),
                               uuids['pools']: ('adaptive', 0.0)}
