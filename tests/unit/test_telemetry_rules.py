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

"""The Prometheus rules and alerts: generated from code, valid for
promtool, unit-tested with promtool, naming only defined metrics."""

import dataclasses
import os
import re
import shutil
import subprocess

from click.testing import CliRunner
import pytest
import yaml

from nova_adaptive_paging.cmd import cli
from nova_adaptive_paging.pools import planner
from nova_adaptive_paging.telemetry import alerts
from nova_adaptive_paging.telemetry import generate
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging.telemetry import rules

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', 'dashboards')
PROM = os.path.join(ROOT, 'prometheus')
TESTS = os.path.join(ROOT, 'tests', 'alerts_test.yml')
# What `nova-paging telemetry generate` writes by default: the fleet
# strategy's own cool-down, passed in.
SHIPPED = rules.Config(pool_cooldown_s=int(planner.Params().cooldown_s))


def promtool():
    path = shutil.which('promtool')
    if path is None:
        if os.environ.get('NAP_REQUIRE_PROMETHEUS'):
            pytest.fail('promtool is missing: apt-get install prometheus')
        pytest.skip('promtool (Debian: prometheus) is not installed')
    return path


def _load(name):
    with open(os.path.join(PROM, name), encoding='utf-8') as f:
        return yaml.safe_load(f)


def test_the_committed_files_are_what_the_code_generates():
    assert generate.stale(ROOT, SHIPPED) == [], (
        'run: nova-paging telemetry generate --out dashboards')


def test_promtool_checks_the_rules():
    out = subprocess.run([promtool(), 'check', 'rules',
                          os.path.join(PROM, 'rules.yml'),
                          os.path.join(PROM, 'alerts.yml')],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_promtool_unit_tests_pass():
    out = subprocess.run([promtool(), 'test', 'rules', TESTS],
                         capture_output=True, text=True,
                         cwd=os.path.dirname(TESTS))
    assert out.returncode == 0 and 'SUCCESS' in out.stdout, \
        out.stdout + out.stderr


def test_every_alert_is_tested_firing_and_not_firing():
    alerts = {r['alert'] for g in _load('alerts.yml')['groups']
              for r in g['rules']}
    with open(TESTS, encoding='utf-8') as f:
        doc = yaml.safe_load(f)
    seen = {}
    for test in doc['tests']:
        for case in test.get('alert_rule_test', ()):
            seen.setdefault(case['alertname'], set()).add(
                bool(case.get('exp_alerts')))
    assert len(alerts) >= 7
    for alert in alerts:
        assert seen.get(alert) == {True, False}, alert


def test_the_rules_name_only_defined_metrics():
    recorded = {r['record'] for g in _load('rules.yml')['groups']
                for r in g['rules']}
    exprs = [r['expr'] for name in ('rules.yml', 'alerts.yml')
             for g in _load(name)['groups'] for r in g['rules']]
    named = set()
    for expr in exprs:
        # A recorded series is named level:metric:operations.
        named |= set(re.findall(
            r'\b((?:[a-z_]+:)?nova_paging[a-zA-Z0-9_:]*)', expr))
    assert named, exprs
    unknown = named - set(metrics.BY_NAME) - recorded
    assert unknown == set()
    # A renamed metric would leave a rule naming nothing: every family a
    # rule needs is still defined.
    assert {metrics.SWITCHES.name, metrics.HOST_INFO.name,
            metrics.PROFILE_THRESHOLD.name} <= named


def test_a_changed_threshold_reaches_the_alert():
    config = dataclasses.replace(SHIPPED, thrash_switches_per_hour=12)
    thrash = alerts.alerts(config)['rules'][0]
    assert thrash['alert'] == 'NovaPagingGuestThrashing'
    assert thrash['expr'].endswith('> 12')


RUNBOOKS = os.path.join(os.path.dirname(__file__), '..', '..', 'doc',
                        'source', 'runbooks.rst')


def _sections(rst):
    """{title: body} of the reStructuredText sections underlined with -."""
    lines = rst.splitlines()
    out, title = {}, None
    for line, under in zip(lines, lines[1:] + ['']):
        if under and set(under) == {'-'} and len(under) == len(line):
            title = line
            out[title] = []
        elif title and not set(line) <= {'-'}:
            out[title].append(line)
    return {t: '\n'.join(b) for t, b in out.items()}


def test_every_alert_links_its_runbook_section():
    shipped = [r for g in _load('alerts.yml')['groups'] for r in g['rules']]
    sections = _sections(alerts.runbooks_rst(SHIPPED))
    assert [r['alert'] for r in shipped] == list(sections)
    for rule in shipped:
        url = rule['annotations']['runbook_url']
        page, anchor = url.rsplit('#', 1)
        assert page.endswith('/runbooks.html')
        # Sphinx's id of a section titled with the alert's name.
        assert anchor == re.sub(r'[^a-z0-9]+', '-', rule['alert'].lower())
        body = sections[rule['alert']]
        assert '**What it means.** ' in body and '**What to do.** ' in body
        assert rule['expr'] in body.replace('\n    ', ' ')
    # The docs page renders the generated sections.
    with open(RUNBOOKS, encoding='utf-8') as f:
        assert '.. nova-paging-runbooks::' in f.read()


def test_the_agents_job_selector_reaches_every_rule(tmp_path):
    config = dataclasses.replace(
        SHIPPED, agent_selector='job="openstack",service="nap"',
        runbook_url='https://docs.example.org/nap/runbooks.html#%s')
    for path, text in generate.render(config).items():
        if path.startswith('prometheus/'):
            assert 'job="nova-paging-agent"' not in text
            (tmp_path / os.path.basename(path)).write_text(text)
    docs = generate.documents(config)
    exprs = [r['expr'] for doc in docs.values() for g in doc['groups']
             for r in g['rules']]
    ups = [e for e in exprs if 'up{' in e]
    assert len(ups) >= 3
    assert all('up{job="openstack",service="nap"}' in e for e in ups)
    runbook = docs['prometheus/alerts.yml']['groups'][0]['rules'][0][
        'annotations']['runbook_url']
    assert runbook == ('https://docs.example.org/nap/runbooks.html#'
                       'novapagingguestthrashing')
    out = subprocess.run([promtool(), 'check', 'rules',
                          str(tmp_path / 'rules.yml'),
                          str(tmp_path / 'alerts.yml')],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize('option, value, words', [
    ('--agent-selector', 'job=nova-paging-agent', 'agent selector'),
    ('--agent-selector', 'job="a"}', 'agent selector'),
    ('--runbook-url', 'https://docs.example.org/runbooks.html',
     'runbook URL'),
    ('--runbook-url', 'https://x/%d/%s', 'runbook URL'),
])
def test_a_bad_rules_option_is_one_line_and_writes_nothing(
        tmp_path, option, value, words):
    out = tmp_path / 'out'
    result = CliRunner().invoke(cli.main, [
        'telemetry', 'generate', '--out', str(out), option, value])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and repr(value) in \
        lines[0], result.output
    assert not out.exists()
