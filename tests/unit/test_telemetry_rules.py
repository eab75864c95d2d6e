"""The Prometheus rules and alerts: generated from code, valid for
promtool, unit-tested with promtool, naming only defined metrics."""

import dataclasses
import os
import re
import shutil
import subprocess

import pytest
import yaml

from nova_adaptive_paging.pools import planner
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
    thrash = rules.alerts(config)['rules'][0]
    assert thrash['alert'] == 'NovaPagingGuestThrashing'
    assert thrash['expr'].endswith('> 12')
