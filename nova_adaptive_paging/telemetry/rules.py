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

"""Prometheus recording rules, generated from code, and the
:class:`Config` they and the alerts (:mod:`.alerts`) are generated with.

As in the monitoring mixins (their ``_config``), one :class:`Config`
holds what an operator tunes: thresholds, the selector of the agents'
scrape job, where the runbooks are.  ``nova-paging telemetry generate``
writes the rule files (``dashboards/prometheus/``) that ``promtool check
rules`` and the ``promtool test rules`` fixtures in ``dashboards/tests/``
check.  Every expression comes from :mod:`.queries`, so from
:mod:`.metrics`' names.
"""

import dataclasses
import re

from nova_adaptive_paging import exception
from nova_adaptive_paging.telemetry import metrics as M
from nova_adaptive_paging.telemetry import queries as Q

GUEST = Q.by(*Q.GUEST)
# Where the docs are published; the runbooks page is runbooks.html there.
DOCS_URL = 'https://nova-adaptive-paging.readthedocs.io/en/latest/'
# One Prometheus label matcher, as a selector's braces hold it.
_MATCHER = r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(\\.|[^"\\])*"\s*'


class ConfigError(exception.Error, ValueError):
    """A rules option that cannot make valid rules; names it."""


@dataclasses.dataclass(frozen=True)
class Config:
    # How long the fleet strategy keeps a guest in a pool (its cool-down;
    # the dashboard counts the guests inside it).  The strategy's own
    # parameter (pools.planner.Params.cooldown_s): the caller passes it
    # in, so that telemetry reads nothing of the decision it observes.
    pool_cooldown_s: int
    # A guest switching more often than this, sustained over an hour, is
    # thrashing: the DSP history (3 samples of 5 s) allows up to 240 an
    # hour, a phase-changing workload needs a handful.
    thrash_switches_per_hour: float = 30
    # An agent whose last full pass is older than this is stuck
    # (10 reconcile intervals at the default 60 s).
    reconcile_stale_s: int = 600
    # A calibrated profile older than this should be recalibrated.
    profile_max_age_days: int = 180
    # Advisory hosts: a modeled gain above this share of the guests' time
    # is worth deploying the switching patch for.
    advisory_gain_share: float = 0.05
    # Paging pools: adaptive guests that would run this much faster in
    # the other pool (a share of their time, modeled), for hours, are
    # not being moved.
    pool_misfit_share: float = 0.02
    # How often the recording rules run (the demo's short fleet runs
    # them more often).
    rule_interval: str = '1m'
    # The agents' scrape job, as label matchers: the rules that ask
    # whether an agent is up select it with this (the agents' own
    # series are named nova_paging_*, so need no selector).  Prometheus
    # setups that name jobs otherwise (kube-prometheus, a job per cell)
    # set it.
    agent_selector: str = Q.AGENT_SELECTOR
    # Each alert's runbook_url: %s is the alert's name in lower case,
    # its section's anchor on the runbooks page (doc/source/runbooks.rst).
    # Where the docs are served elsewhere (tox -e docs builds them), set
    # it to that copy.
    runbook_url: str = DOCS_URL + 'runbooks.html#%s'

    def __post_init__(self):
        if not re.fullmatch('%s(,%s)*' % (_MATCHER, _MATCHER),
                            self.agent_selector):
            raise ConfigError(
                'agent selector: %r; expected Prometheus label matchers, '
                'such as job="nova-paging-agent"' % self.agent_selector)
        if self.runbook_url.count('%s') != 1 or '%' in \
                self.runbook_url.replace('%s', ''):
            raise ConfigError(
                'runbook URL: %r; expected one %%s where the alert\'s '
                'anchor goes, and no other %%' % self.runbook_url)


SWITCHES_PER_HOUR = 'nova_paging:guest_switches_per_hour:rate1h'
MODE_SHARE = 'nova_paging:guest_mode_share:rate5m'
GEN_FLAVOR_SWITCHES = \
    'generation_flavor:nova_paging_switches_per_guest_hour:avg1h'
GEN_FLAVOR_MODE_SHARE = 'generation_flavor:nova_paging_mode_share:avg5m'
GEN_FLAVOR_SWITCHING = \
    'generation_flavor:nova_paging_switching_seconds:rate5m'
GEN_SHADOW_MAINT = \
    'generation:nova_paging_shadow_maintenance_seconds:rate5m'
GEN_HAP_WALK = 'generation:nova_paging_hap_walk_seconds:rate5m'
GEN_MODELED_GAIN = 'generation:nova_paging_modeled_gain_seconds:rate5m'
GEN_HOSTS = 'generation:nova_paging_hosts:count'
GEN_COVERAGE = 'generation:nova_paging_agent_coverage:ratio'
POOL_GAIN_LEFT = 'pool:nova_paging_modeled_gain_left_seconds:deriv1h'
POOL_GUESTS = 'pool:nova_paging_adaptive_guests:count'
POOL_ARRIVED = 'pool:nova_paging_guests_arrived:count1h'
POOL_COOLDOWN = 'pool:nova_paging_guests_in_cooldown:count'
RECORDED = (SWITCHES_PER_HOUR, MODE_SHARE, GEN_FLAVOR_SWITCHES,
            GEN_FLAVOR_MODE_SHARE, GEN_FLAVOR_SWITCHING, GEN_SHADOW_MAINT,
            GEN_HAP_WALK, GEN_MODELED_GAIN, GEN_HOSTS, GEN_COVERAGE,
            POOL_GAIN_LEFT, POOL_GUESTS, POOL_ARRIVED, POOL_COOLDOWN)


def _per_generation(metric):
    return 'sum by (generation) (%s)' % Q.with_generation(
        Q.per_guest_rate(metric, '5m'))


def recording_rules(config):
    mode_rate = Q.per_guest_rate(M.MODE_SECONDS, '5m', keep=('mode',))
    all_modes = Q.per_guest_rate(M.MODE_SECONDS, '5m')
    rules = [
        (SWITCHES_PER_HOUR,
         '3600 * %s' % Q.per_guest_rate(M.SWITCHES, '1h')),
        (MODE_SHARE, '%s / ignoring (mode) group_left %s'
         % (mode_rate, all_modes)),
        (GEN_FLAVOR_SWITCHES, 'avg by (generation, flavor) (%s)'
         % Q.with_generation(Q.with_guest(SWITCHES_PER_HOUR))),
        (GEN_FLAVOR_MODE_SHARE, 'avg by (generation, flavor, mode) (%s)'
         % Q.with_generation(Q.with_guest(MODE_SHARE))),
        (GEN_FLAVOR_SWITCHING, 'sum by (generation, flavor) (%s)'
         % Q.with_generation(Q.with_guest(
             Q.per_guest_rate(M.SWITCHING_SECONDS, '5m')))),
        (GEN_SHADOW_MAINT, _per_generation(M.SHADOW_MAINTENANCE_SECONDS)),
        (GEN_HAP_WALK, _per_generation(M.HAP_WALK_SECONDS)),
        (GEN_MODELED_GAIN, _per_generation(M.MODELED_GAIN_SECONDS)),
        (GEN_HOSTS, 'count by (generation, switching) (%s)'
         % Q.host_info()),
        (GEN_COVERAGE, 'avg by (generation) (%s * on (%s) group_left '
         '(generation) %s)' % (Q.agent_up(config.agent_selector), Q.HOST,
                               Q.remembered_generation())),
        # Paging pools: what the adaptive guests of each pool would save
        # in the other (seconds per second, modeled; only gains count),
        # how many there are, how many arrived within the hour (live
        # migrations and new guests) and how many are in cool-down.
        (POOL_GAIN_LEFT, 'sum by (mode) (%s)' % Q.in_pool(
            'clamp_min(deriv(%s[1h]), 0)' % M.MODELED_OTHER_MODE_GAIN.name)),
        (POOL_GUESTS, 'count by (mode) (%s)' % Q.in_pool(
            Q.selector(M.GUEST_INFO, policy='adaptive'),
            adaptive_only=False)),
        (POOL_ARRIVED, 'count by (mode) (%s)' % Q.in_pool(
            '%s < 3600' % M.ADVISED_SECONDS.name, adaptive_only=False)),
        (POOL_COOLDOWN, 'count by (mode) (%s)' % Q.in_pool(
            '%s < %d' % (M.ADVISED_SECONDS.name, config.pool_cooldown_s))),
    ]
    return {'name': 'nova-paging.rules', 'interval': config.rule_interval,
            'rules': [{'record': r, 'expr': e} for r, e in rules]}
