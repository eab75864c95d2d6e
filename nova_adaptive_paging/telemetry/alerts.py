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

"""Prometheus alerts and their runbooks, generated from code.

Each :class:`Alert` carries its rule and its runbook (what it means,
what to do), so an alert is added in one place, :func:`specs`: the rule
in ``dashboards/prometheus/alerts.yml``, its ``runbook_url`` annotation
and its section of the docs' runbooks page (``doc/source/runbooks.rst``
renders :func:`runbooks_rst`) all come from that entry, and
``tests/unit/test_telemetry_rules.py`` fails until ``promtool test
rules`` has a case of it firing and one not.  As in the monitoring
mixins, what an operator tunes (thresholds, the agents' job selector,
where the runbooks are) is :class:`.rules.Config`.
"""

import dataclasses

from nova_adaptive_paging.telemetry import metrics as M
from nova_adaptive_paging.telemetry import queries as Q
from nova_adaptive_paging.telemetry import rules as R


@dataclasses.dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    # The runbook: what the alert means (and what it costs to leave it),
    # and what to do, in reStructuredText.
    means: str
    action: str


def specs(config):
    """Every alert, in the order of the rule file and the runbooks."""
    c = config
    up = Q.agent_up(c.agent_selector)
    host_info = Q.host_info()
    return [
        Alert('NovaPagingGuestThrashing',
              '3600 * %s > %g' % (Q.per_guest_rate(M.SWITCHES, '1h'),
                                  c.thrash_switches_per_hour),
              '15m', 'warning',
              'A guest is thrashing between paging modes.',
              'Instance {{ $labels.%s }} on {{ $labels.%s }} switched '
              '{{ $value | printf "%%.0f" }} times in the last hour '
              '(alert above %g): its thresholds or its sampling interval '
              'do not fit its workload; consider hw:paging=hap or '
              'shadow for its flavor, or recalibrate.'
              % (M.GUEST_LABEL, Q.HOST, c.thrash_switches_per_hour),
              means='The guest\'s workload sits on the boundary between '
              'the modes of its generation\'s thresholds, so the DSP '
              'decision keeps changing its mind.  Every switch costs a '
              'shadow-table rebuild or a TLB flush: the guest loses time '
              'to paging instead of gaining it.',
              action='Open the guest dashboard: FTLB and FPF against the '
              'thresholds show which bound it crosses.  One guest: give '
              'its flavor a static policy (``hw:paging=hap`` or '
              '``shadow``) or a longer ``hw:paging_interval``.  Many '
              'guests of one CPU generation: the profile does not fit '
              'the generation; recalibrate it (``nova-paging profile``, '
              'or the ``nova_paging.fleet.calibrate`` playbook) and push '
              'it.'),
        Alert('NovaPagingAgentDown', '%s == 0' % up, '5m',
              'warning', 'A nova-paging agent is down.',
              'Prometheus cannot scrape the agent on {{ $labels.%s }}: '
              'its guests keep their last mode and thresholds, but new '
              'guests get no policy.' % Q.HOST,
              means='Prometheus has not been able to scrape the agent for '
              'five minutes.  Running guests keep the mode and thresholds '
              'they had; guests started meanwhile get no policy (they run '
              'in the host\'s default mode), and the host reports no '
              'telemetry.',
              action='On the host: ``systemctl status nova-paging-agent`` '
              'and ``journalctl -u nova-paging-agent``.  From the '
              'Prometheus host: ``curl http://HOST:PORT/metrics`` with the '
              'agent\'s ``[agent] listen_address`` and ``listen_port`` (a '
              'firewall, or the default loopback address, stops the '
              'scrape).  If the agent runs but under another scrape job, '
              'regenerate the rules with that job\'s ``--agent-selector``.'),
        Alert('NovaPagingAgentNotReconciling',
              # The agent's own monotonic age: a host clock set back or
              # forward neither fires nor hides it.
              '(%s > %d) or ((%s == 1) unless on (%s) %s)'
              % (M.LAST_RECONCILE_AGE.name, c.reconcile_stale_s, up,
                 Q.HOST, M.LAST_RECONCILE_AGE.name),
              '10m', 'warning', 'A nova-paging agent is not reconciling.',
              'The agent on {{ $labels.%s }} has not completed a pass '
              'over its guests without errors for over %d s: see '
              'nova_paging_agent_errors_total and its log.'
              % (Q.HOST, c.reconcile_stale_s),
              means='The agent answers scrapes but has not finished a '
              'pass over its guests without an error of its own for '
              '%d s, or never has.  Policies and thresholds are not being '
              'applied: a resized or new guest keeps whatever mode it '
              'has.' % c.reconcile_stale_s,
              action='``%s`` by ``kind`` says what fails; the agent\'s log '
              'names it.  Usual causes: libvirt unreachable, Nova\'s API '
              'failing for guests whose metadata predates Nova 32.0.0, '
              'the kernel interface gone (modules reloaded without the '
              'patch).  ``nova-paging-agent --once`` on the host runs one '
              'pass and prints what it did.' % M.ERRORS.name),
        Alert('NovaPagingNoProfileForGeneration',
              '%s unless on (%s, generation) %s'
              % (host_info, Q.HOST, M.PROFILE_INFO.name),
              '1h', 'warning',
              'A host runs without a threshold profile for its CPU '
              'generation.',
              '{{ $labels.%s }} is a {{ $labels.generation }} host and '
              'runs on the fallback profile: calibrate one for the '
              'generation (nova-paging profile, or the calibrate '
              'playbook) and push it.' % Q.HOST,
              means='No threshold profile in the agent\'s profile '
              'directories names this host\'s CPU generation, so it runs '
              'the fallback (the seed paper\'s thresholds, learnt on '
              'Nehalem), which may switch when it should not.',
              action='Calibrate the generation (the '
              '``nova_paging.fleet.calibrate`` playbook, or ``nova-paging '
              'profile`` from the fleet\'s telemetry) and push it '
              '(``nova_paging.fleet.push_thresholds``).  If a profile is '
              'there, the agent\'s log says why it was left out (a file '
              'the agent\'s user cannot read, a bad field).'),
        Alert('NovaPagingProfileTooOld',
              '(time() - %s > %d) and on (%s) (%s and on (%s, generation) '
              '%s)' % (M.PROFILE_OBTAINED.name,
                       c.profile_max_age_days * 86400, Q.HOST, host_info,
                       Q.HOST, M.PROFILE_INFO.name),
              '1h', 'info', 'A threshold profile is old.',
              'The profile in force on {{ $labels.%s }} was obtained over '
              '%d days ago: rerun the profiler on recent telemetry.'
              % (Q.HOST, c.profile_max_age_days),
              means='The profile in force was obtained over %d days ago. '
              'Firmware, microcode, kernels and workloads change what a '
              'walk and a fault cost; nothing is broken yet.'
              % c.profile_max_age_days,
              action='Run ``nova-paging profile`` over recent telemetry '
              'and read its report: push the new profile where it '
              'recommends one, else keep the old one (its date is then '
              'the profiler\'s word that it still fits).'),
        Alert('NovaPagingProfileDrift',
              'count by (generation) ((max by (generation, threshold) '
              '(%s)) != (min by (generation, threshold) (%s))) > 0'
              % ((Q.with_generation(M.PROFILE_THRESHOLD.name),) * 2),
              '30m', 'warning',
              'Hosts of one CPU generation run different thresholds.',
              '{{ $value }} of the thresholds differ between '
              '{{ $labels.generation }} hosts: a profile push did not '
              'reach every host, or a host has a local profile.',
              means='Hosts of one CPU generation hold different '
              'thresholds, so the same guest behaves differently '
              'depending on where it runs, and the fleet\'s telemetry '
              'mixes two profiles.',
              action='``%s`` per host shows which file each one uses and '
              'when it was obtained.  Rerun the '
              '``nova_paging.fleet.push_thresholds`` playbook; remove a '
              'profile left in a host\'s profile directory by hand.'
              % M.PROFILE_INFO.name),
        Alert('NovaPagingAdvisoryGainLarge',
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
              % Q.HOST,
              means='On a host whose kernel cannot switch, the cost model '
              'says switching would save its guests over %g %% of their '
              'time.  A MODELED figure, from the guests\' own counters; '
              'nothing is broken.' % (c.advisory_gain_share * 100),
              action='Deploy the KVM switching patch on the host (the '
              '``kvm_patch`` role), or, with stock kernels, make it a '
              'paging pool member and let the ``paging_fit`` strategy '
              'move the guests (:doc:`stock-fleet`).'),
        Alert('NovaPagingPoolMisfit',
              '%s / %s > %g' % (R.POOL_GAIN_LEFT, R.POOL_GUESTS,
                                c.pool_misfit_share),
              '6h', 'info',
              'Adaptive guests stay in the paging pool that suits them '
              'less.',
              'The adaptive guests of the {{ $labels.mode }} pool would '
              'save {{ $value | humanizePercentage }} of their time in '
              'the other pool (modeled), for six hours: the paging_fit '
              'strategy is not moving them (its audits do not run, the '
              'other pool is full, or its budget or margin is too '
              'tight).',
              means='For six hours, the adaptive guests of a pool would '
              'have saved over %g %% of their time in the other pool '
              '(MODELED), and the fleet strategy has not moved them.'
              % (c.pool_misfit_share * 100),
              action='Check that Watcher\'s audits with the '
              '``paging_fit`` strategy run (``openstack optimize audit '
              'list``) and read the last one\'s log: it says per guest why '
              'it was held (cool-down, no room in the other pool, the '
              'budget, a gain below the margin).  Add capacity to the '
              'other pool, or widen the audit\'s ``budget`` or lower its '
              '``margin`` (:doc:`stock-fleet`).'),
        Alert('NovaPagingPolicyNotHonoured',
              '%s == 1' % M.GUEST_POLICY_NOT_HONOURED.name,
              '5m', 'warning',
              'A guest runs on a host that cannot give the paging policy '
              'its flavor asks for.',
              'Instance {{ $labels.%s }} asks hw:paging={{ $labels.policy '
              '}} and {{ $labels.%s }} cannot give it: it got there past '
              'the scheduler (a forced live migration or evacuation, or '
              'AdaptivePagingFilter not enabled).  Live-migrate it through '
              'the scheduler: no target host, or API microversion 2.68 or '
              'later.' % (M.GUEST_LABEL, Q.HOST),
              means='The guest\'s flavor asks for a paging policy its host '
              'cannot give, so it runs in the host\'s mode: the scheduler '
              'never checked this host (a live migration or evacuation '
              'forced to it, or the filter not enabled).',
              action='Live-migrate the guest through the scheduler: no '
              'target host, or API microversion 2.68 or later, which '
              'checks the target.  Make sure ``AdaptivePagingFilter`` is '
              'in ``[filter_scheduler] enabled_filters`` '
              '(:doc:`scheduler`).'),
        Alert('NovaPagingRequestFilterFailed',
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
              'nova-adaptive-paging release made for this Nova.' % Q.HOST,
              means='The scheduler filter could not register its request '
              'filter with this nova-scheduler (Nova\'s internals are not '
              'what this release expects), so placement is not asked for '
              'the paging trait: a flavor with ``hw:paging`` but no '
              '``trait:CUSTOM_PAGING_*=required`` gets no host there.',
              action='The nova-scheduler log names what failed.  Give the '
              'flavors their trait (``nova-paging flavor set``), which '
              'needs no request filter, or install the '
              'nova-adaptive-paging release made for this Nova.'),
    ]


def alerts(config):
    """The alert group of ``dashboards/prometheus/alerts.yml``."""
    return {'name': 'nova-paging.alerts', 'rules': [{
        'alert': a.name, 'expr': a.expr, 'for': a.for_,
        'labels': {'severity': a.severity},
        'annotations': {'summary': a.summary,
                        'description': a.description,
                        'runbook_url': runbook_url(config, a.name)}}
        for a in specs(config)]}


def runbook_url(config, name):
    """Where the runbook of alert ``name`` is: its section's anchor,
    which Sphinx derives from the title (the name, in lower case)."""
    return config.runbook_url % name.lower()


def runbooks_rst(config):
    """The runbooks page's sections, one per alert (reStructuredText)."""
    out = []
    for a in specs(config):
        out += [a.name, '-' * len(a.name), '',
                '*%s*: %s' % (a.severity, a.summary), '',
                '**What it means.** ' + a.means, '',
                '**What to do.** ' + a.action, '',
                'Fires when this holds for %s (the shipped thresholds)::'
                % a.for_, '', '    ' + a.expr, '']
    return '\n'.join(out)
