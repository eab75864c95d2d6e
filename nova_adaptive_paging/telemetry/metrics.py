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

"""Metric names, kinds, labels and help texts, each defined once.

The agent's exporter, the Prometheus recording rules and alerts, the
Grafana dashboards and the profiler all take the names from here, so
renaming a metric is one change that every consumer follows (their tests
check that they name only metrics defined here).  Names follow the
Prometheus conventions: a ``nova_paging_`` namespace, base units
(seconds), ``_total`` on counters, one family per quantity with the
variants (mode, direction) as labels.

Per-guest series carry the Nova instance UUID only (label ``uuid``: a
scrape's ``instance`` label is Prometheus's, the agent that was
scraped, so a host is the ``instance`` of its series); the Nova labels
(domain, flavor, project, policy, and the UUIDs of its project and root
image) sit on one ``nova_paging_guest_info``
series per guest to join against, as the libvirt exporters do, so a
flavor rename never splits a counter.  Per-guest counters come from the
kernel's ``paging_stats`` (``source`` names the key or keys, one per
label value; nanosecond counters are exported in seconds).
"""

import dataclasses

from nova_adaptive_paging import vocabulary

NAMESPACE = 'nova_paging'

COUNTER = 'counter'
GAUGE = 'gauge'
HISTOGRAM = 'histogram'

GUEST_LABEL = 'uuid'
GUEST_LABELS = (GUEST_LABEL,)
# The label Prometheus gives every scraped series: the agent's address,
# so the host.  Rules and dashboards group hosts by it.
HOST_LABEL = 'instance'
NS = 1e-9
# The events the agent counts from the guests' samples.
EVENTS = vocabulary.SAMPLED_EVENTS


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str
    kind: str
    help: str
    labels: tuple = ()
    # The paging_stats key it is read from, if any: one key, or one per
    # value of the last label (a dict).  ``scale`` turns the kernel's unit
    # into the metric's.
    source: object = None
    scale: float = 1.0

    def sources(self):
        if self.source is None:
            return ()
        if isinstance(self.source, dict):
            return tuple(self.source.values())
        return (self.source,)


def _m(suffix, kind, help, labels=(), source=None, scale=1.0):
    return Metric('%s_%s' % (NAMESPACE, suffix), kind, help, tuple(labels),
                  source, scale)


# -- per guest ---------------------------------------------------------------
GUEST_INFO = _m('guest_info', GAUGE, 'Always 1: the Nova instance behind '
                'the guest and the paging policy applied to it (source: '
                'flavor, nova-api or default); project_id and image are '
                'the UUIDs of its project and root image (empty: booted '
                'from a volume).',
                GUEST_LABELS + ('domain', 'flavor', 'project', 'policy',
                                'source', 'project_id', 'image'))
GUEST_MODE = _m('guest_mode', GAUGE, 'Paging mode the guest runs in now '
                '(1 for its mode, 0 for the other).',
                GUEST_LABELS + ('mode',), 'mode')
SWITCHES = _m('guest_switches_total', COUNTER, 'Switches of the guest '
              'between paging modes, by the mode switched to.',
              GUEST_LABELS + ('to',),
              {m: 'switches_to_%s' % m for m in vocabulary.MODES})
SWITCHES_REFUSED = _m('guest_switches_refused_total', COUNTER, 'Policy or '
                      'switch requests the kernel refused for the guest.',
                      GUEST_LABELS, 'switches_refused')
MODE_SECONDS = _m('guest_mode_seconds_total', COUNTER, 'Time the guest ran '
                  'in each paging mode.', GUEST_LABELS + ('mode',),
                  {m: 'time_%s_ns' % m for m in vocabulary.MODES}, NS)
SWITCHING_SECONDS = _m('guest_switching_seconds_total', COUNTER, 'Time the '
                       'guest\'s vCPUs spent switching modes.', GUEST_LABELS,
                       'time_switching_ns', NS)
SHADOW_MAINTENANCE_SECONDS = _m(
    'guest_shadow_maintenance_seconds_total', COUNTER, 'Time spent '
    'maintaining the guest\'s shadow page tables.', GUEST_LABELS,
    'shadow_maint_ns', NS)
HAP_WALK_SECONDS = _m(
    'guest_hap_walk_seconds_total', COUNTER, 'Time the guest\'s TLB '
    'misses spent in two-dimensional page walks in hap mode (the kernel\'s '
    'hap_walk_cycles over the host\'s clock; 0 where the PMU counts none).',
    GUEST_LABELS, 'hap_walk_cycles')
SHADOW_WALK_SECONDS = _m(
    'guest_shadow_walk_seconds_total', COUNTER, 'Time the guest\'s TLB '
    'misses spent in walks of the shadow page tables in shadow mode (the '
    'kernel\'s shadow_walk_cycles over the host\'s clock; 0 where the PMU '
    'counts none).', GUEST_LABELS, 'shadow_walk_cycles')
SAMPLES = _m('guest_samples_total', COUNTER, 'DSP samples taken of the '
             'guest.', GUEST_LABELS, 'samples')
LAST_FTLB = _m('guest_last_ftlb', GAUGE, 'TLB misses per 1000 '
               'instructions in the guest\'s last sample (the paper\'s '
               'FTLB).', GUEST_LABELS, 'last_ftlb', 1e-3)
LAST_FPF = _m('guest_last_fpf', GAUGE, 'Guest page faults per 1000 '
              'instructions times 10^7 in the guest\'s last sample (the '
              'paper\'s FPF).', GUEST_LABELS, 'last_fpf', 1e-3)
LAST_PT = _m('guest_last_pt', GAUGE, 'FPF over FTLB in the guest\'s last '
             'sample (the paper\'s P-to-T).', GUEST_LABELS, 'last_pt', 1e-3)
LAST_CR3_LOADS = _m(
    'guest_last_cr3_loads', GAUGE, 'Loads of CR3 the guest\'s last sample '
    'gave the switch guard, which prices each at the profile\'s '
    'cr3_cost_ps (interface version 6): the loads that exited, which only '
    'shadow paging\'s do, so 0 for a sample wholly in hap mode.',
    GUEST_LABELS, 'last_cr3_loads')
LAST_RULE = _m('guest_last_rule', GAUGE, 'The rule of the DSP decision '
               'that decided the guest\'s last sample (dsp.Rule).',
               GUEST_LABELS, 'last_rule')
GUEST_FAULT_STATS = _m('guest_fault_stats', GAUGE, '1 when the guest '
                       'reports its page faults (virtio-balloon '
                       'statistics), 0 when it does not.', GUEST_LABELS)
GUEST_FAULTS_CLAMPED = _m('guest_fault_reports_clamped_total', COUNTER,
                          'Reports of the guest\'s page-fault count that '
                          'went backwards or rose faster than its vCPUs can '
                          'fault, and so were bounded before the kernel saw '
                          'them.', GUEST_LABELS)
GUEST_POLICY_NOT_HONOURED = _m(
    'guest_policy_not_honoured', GAUGE, '1 when the guest\'s flavor asks '
    'for a paging policy (hw:paging) this host cannot give (it lacks every '
    'trait placement would have selected for): the guest bypassed the '
    'scheduler\'s check (a forced live migration or evacuation, '
    'AdaptivePagingFilter not enabled); 0 when the host can give it.',
    GUEST_LABELS + ('policy',))
# Advisory hosts (stock KVM): what switching would have chosen and saved,
# from the cost model.  Modeled, never measured: the names say so.
ADVISED_MODE = _m('guest_modeled_mode', GAUGE, 'Paging mode adaptive '
                  'paging would run the guest in now (advisory hosts; '
                  'modeled).', GUEST_LABELS + ('mode',))
GUEST_COUNTERS = _m('guest_counters', GAUGE, '1 when the agent reads '
                    'the guest\'s guest-only hardware counters (advisory '
                    'hosts), 0 when the host gives none.', GUEST_LABELS)
MODELED_GAIN_SECONDS = _m('guest_modeled_gain_seconds_total', COUNTER,
                          'Modeled time adaptive paging would have saved '
                          'the guest (cost model, not a measurement).',
                          GUEST_LABELS)
MODELED_OTHER_MODE_GAIN = _m(
    'guest_modeled_other_mode_gain_seconds', GAUGE, 'Modeled time the '
    'guest would have saved running in the other paging mode all along '
    'since this host\'s agent first saw it; negative when the host\'s '
    'mode is the better one (advisory hosts; cost model, not a '
    'measurement).  The fleet strategy weighs it against a live '
    'migration to the other pool.', GUEST_LABELS)
ADVISED_SECONDS = _m('guest_advised_seconds', GAUGE, 'How long this '
                     'host\'s agent has modeled the guest (advisory hosts): '
                     'the time it has spent in this host\'s pool.',
                     GUEST_LABELS)

# -- per host ----------------------------------------------------------------
HOST_PAGING_MODE = _m('host_paging_mode', GAUGE, '1 for the paging mode '
                      'stock KVM runs every guest in on this host, a member '
                      'of the fleet\'s paging pools ([adaptive_paging] pool; '
                      'its kvm_intel ept= or kvm_amd npt= decides which); '
                      'absent on other hosts.', ('mode',))
HOST_INFO = _m('host_info', GAUGE, 'Always 1: what this host is (CPU '
               'generation, interface version, whether it can switch or '
               'only advises).',
               ('generation', 'abi_version', 'switching'))
PROFILE_INFO = _m('profile_info', GAUGE, 'Always 1: the threshold profile '
                  'in force on this host and its provenance.',
                  ('generation', 'method', 'obtained', 'file', 'history',
                   'interval_s'))
SAMPLED_FTLB = _m('sampled_ftlb', HISTOGRAM, 'FTLB of the guests\' samples '
                  'on this host, by the mode they ran in.', ('mode',))
SAMPLED_FPF = _m('sampled_fpf', HISTOGRAM, 'FPF of the guests\' samples on '
                 'this host, by the mode they ran in.', ('mode',))
PROFILE_THRESHOLD = _m('profile_threshold', GAUGE, 'The DSP thresholds of '
                       'the profile in force, each in its metric\'s units '
                       '(FTLB, FPF, P-to-T).', ('threshold',))
PROFILE_OBTAINED = _m('profile_obtained_timestamp_seconds', GAUGE, 'When '
                      'the threshold profile in force was obtained (Unix '
                      'time of its date; absent for a profile without one).')
CPU_HZ = _m('host_cpu_hertz', GAUGE, 'The clock the host\'s cycle counts '
            'are converted with (cycles per second, from cpuinfo).')
SAMPLED_EVENTS = _m('sampled_events_total', COUNTER, 'Events in the '
                    'guests\' samples on this host, by the mode they ran in: '
                    'instructions, TLB misses and guest page faults (the '
                    'denominators of the per-event costs).',
                    ('mode', 'event'))
PROFILE_MISSING = _m('profile_missing', GAUGE, '1 when no threshold '
                     'profile of this host\'s CPU generation is found and '
                     'the built-in fallback\'s thresholds are in force.')
GUESTS = _m('guests', GAUGE, 'Guests the agent manages, by policy.',
            ('policy',))

# -- nova-scheduler (node_exporter textfile) -------------------------------
SCHEDULER_REQUEST_FILTER = _m(
    'scheduler_request_filter', GAUGE, '1 for the state of '
    'AdaptivePagingFilter\'s request filter in this host\'s nova-scheduler, '
    '0 for the others: registered; disabled ([adaptive_paging] '
    'request_filter); failed (Nova\'s internals changed: flavors with '
    'hw:paging but not its trait are refused).', ('state',))

# -- the agent's own health --------------------------------------------------
LAST_RECONCILE = _m('agent_last_reconcile_timestamp_seconds', GAUGE, 'When '
                    'the agent last reconciled every guest without an '
                    'error of its own (Unix time, for people: alerts use '
                    'the age, which a clock set back does not move).')
LAST_RECONCILE_AGE = _m('agent_last_reconcile_age_seconds', GAUGE, 'Seconds '
                        'since the agent last reconciled every guest '
                        'without an error of its own (monotonic clock).')
SNAPSHOT_AGE = _m('agent_snapshot_age_seconds', GAUGE, 'Age of the '
                  'snapshot this scrape serves: the agent builds one after '
                  'each pass and a scrape never waits for a pass '
                  '(monotonic clock).')
ERRORS = _m('agent_errors_total', COUNTER, 'Errors the agent met and '
            'survived, by kind.', ('kind',))
SCRAPE_SUCCESS = _m('scrape_collector_success', GAUGE, 'Whether a '
                    'collector succeeded in this scrape.', ('collector',))
SCRAPE_DURATION = _m('scrape_collector_duration_seconds', GAUGE, 'How long '
                     'a collector took in this scrape.', ('collector',))

ALL = tuple(value for value in dict(globals()).values()
            if isinstance(value, Metric))
BY_NAME = {metric.name: metric for metric in ALL}

# Bucket bounds of the sampled-metric histograms, in the paper's units:
# spaced by factors of about 3 over what the paper's and the calibrated
# thresholds span (doc/source/profiles.rst).
FTLB_BUCKETS = (0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100)
FPF_BUCKETS = (10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000)
