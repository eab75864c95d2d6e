"""Prometheus recording rules and alerts, generated from code.

As in the monitoring mixins, one :class:`Config` holds what an operator
tunes, and ``nova-paging telemetry generate`` writes the rule files
(``dashboards/prometheus/``) that ``promtool check rules`` and the
``promtool test rules`` fixtures in ``dashboards/tests/`` check.  Every
expression comes from :mod:`.queries`, so from :mod:`.metrics`' names.
"""

import dataclasses

from nova_adaptive_paging.telemetry import metrics as M
from nova_adaptive_paging.telemetry import queries as Q

GUEST = Q.by(*Q.GUEST)


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
         '(generation) %s)' % (Q.agent_up(), Q.HOST,
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


def _alert(name, expr, for_, severity, summary, description):
    return {'alert': name, 'expr': expr, 'for': for_,
            'labels': {'severity': severity},
            'annotations': {'summary': summary,
                            'description': description}}


def alerts(config):
    c = config
    host_info = Q.host_info()
    return {'name': 'nova-paging.alerts', 'rules': [
        _alert('NovaPagingGuestThrashing',
               '3600 * %s > %g' % (Q.per_guest_rate(M.SWITCHES, '1h'),
                                   c.thrash_switches_per_hour),
               '15m', 'warning',
               'A guest is thrashing between paging modes.',
               'Instance {{ $labels.%s }} on {{ $labels.%s }} switched '
               '{{ $value | printf "%%.0f" }} times in the last hour '
               '(alert above %g): its thresholds or its sampling interval '
               'do not fit its workload; consider hw:paging=hap or '
               'shadow for its flavor, or recalibrate.'
               % (M.GUEST_LABEL, Q.HOST, c.thrash_switches_per_hour)),
        _alert('NovaPagingAgentDown', '%s == 0' % Q.agent_up(), '5m',
               'warning', 'A nova-paging agent is down.',
               'Prometheus cannot scrape the agent on {{ $labels.%s }}: '
               'its guests keep their last mode and thresholds, but new '
               'guests get no policy.' % Q.HOST),
        _alert('NovaPagingAgentNotReconciling',
               # The agent's own monotonic age: a host clock set back or
               # forward neither fires nor hides it.
               '(%s > %d) or ((%s == 1) unless on (%s) %s)'
               % (M.LAST_RECONCILE_AGE.name, c.reconcile_stale_s,
                  Q.agent_up(), Q.HOST, M.LAST_RECONCILE_AGE.name),
               '10m', 'warning', 'A nova-paging agent is not reconciling.',
               'The agent on {{ $labels.%s }} has not completed a pass '
               'over its guests without errors for over %d s: see '
               'nova_paging_agent_errors_total and its log.'
               % (Q.HOST, c.reconcile_stale_s)),
        _alert('NovaPagingNoProfileForGeneration',
               '%s unless on (%s, generation) %s'
               % (host_info, Q.HOST, M.PROFILE_INFO.name),
               '1h', 'warning',
               'A host runs without a threshold profile for its CPU '
               'generation.',
               '{{ $labels.%s }} is a {{ $labels.generation }} host and '
               'runs on the fallback profile: calibrate one for the '
               'generation (nova-paging profile, or the calibrate '
               'playbook) and push it.' % Q.HOST),
        _alert('NovaPagingProfileTooOld',
               '(time() - %s > %d) and on (%s) (%s and on (%s, generation) '
               '%s)' % (M.PROFILE_OBTAINED.name,
                        c.profile_max_age_days * 86400, Q.HOST, host_info,
                        Q.HOST, M.PROFILE_INFO.name),
               '1h', 'info', 'A threshold profile is old.',
               'The profile in force on {{ $labels.%s }} was obtained over '
               '%d days ago: rerun the profiler on recent telemetry.'
               % (Q.HOST, c.profile_max_age_days)),
        _alert('NovaPagingProfileDrift',
               'count by (generation) ((max by (generation, threshold) '
               '(%s)) != (min by (generation, threshold) (%s))) > 0'
               % ((Q.with_generation(M.PROFILE_THRESHOLD.name),) * 2),
               '30m', 'warning',
               'Hosts of one CPU generation run different thresholds.',
               '{{ $value }} of the thresholds differ between '
               '{{ $labels.generation }} hosts: a profile push did not '
               'reach every host, or a host has a local profile.'),
        _alert('NovaPagingAdvisoryGainLarge',
               '(sum by (%s) (rate(%s[1h])) / count by (%s) (%s) > %g) '
               'and on (%s) %s'
               % (Q.HOST, M.MODELED_GAIN_SECONDS.name, Q.HOST,
                  M.GUEST_INFO.name, c.advisory_gain_share, Q.HOST,
                  Q.selector(M.HOST_INFO, switching='false')),
               '1h', 'info',
               'Adaptive paging would gain much on a host without the '
               'switching patch.',
               'On {{ $labels.%s }} the cost model says switching would '
               'save its guests {{ $value | humanizePercentage }} of their '
               'time (modeled): deploy the KVM switching patch there.'
               % Q.HOST),
        _alert('NovaPagingPoolMisfit',
               '%s / %s > %g' % (POOL_GAIN_LEFT, POOL_GUESTS,
                                 c.pool_misfit_share),
               '6h', 'info',
               'Adaptive guests stay in the paging pool that suits them '
               'less.',
               'The adaptive guests of the {{ $labels.mode }} pool would '
               'save {{ $value | humanizePercentage }} of their time in '
               'the other pool (modeled), for six hours: the paging_fit '
               'strategy is not moving them (its audits do not run, the '
               'other pool is full, or its budget or margin is too '
               'tight).'),
        _alert('NovaPagingPolicyNotHonoured',
               '%s == 1' % M.GUEST_POLICY_NOT_HONOURED.name,
               '5m', 'warning',
               'A guest runs on a host that cannot give the paging policy '
               'its flavor asks for.',
               'Instance {{ $labels.%s }} asks hw:paging={{ $labels.policy '
               '}} and {{ $labels.%s }} cannot give it: it got there past '
               'the scheduler (a forced live migration or evacuation, or '
               'AdaptivePagingFilter not enabled).  Live-migrate it through '
               'the scheduler: no target host, or API microversion 2.68 or '
               'later.' % (M.GUEST_LABEL, Q.HOST)),
        _alert('NovaPagingRequestFilterFailed',
               '%s == 1' % Q.selector(M.SCHEDULER_REQUEST_FILTER,
                                      state='failed'),
               '5m', 'warning',
               'nova-scheduler runs without the adaptive-paging request '
               'filter.',
               'AdaptivePagingFilter could not add its request filter in '
               'the nova-scheduler on {{ $labels.%s }} (Nova\'s internals '
               'changed; its log names what): flavors with hw:paging but '
               'no trait:CUSTOM_PAGING_*=required are refused there.  Give '
               'them the trait (nova-paging flavor set) or install a '
               'nova-adaptive-paging release made for this Nova.' % Q.HOST),
    ]}


def documents(config):
    """{relative path: YAML document} of the generated rule files."""
    return {'prometheus/rules.yml': {'groups': [recording_rules(config)]},
            'prometheus/alerts.yml': {'groups': [alerts(config)]}}
