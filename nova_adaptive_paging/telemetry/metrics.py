"""Metric names, kinds, labels and help texts, each defined once.

The agent's exporter, the Prometheus recording rules and alerts, the
Grafana dashboards and the profiler all take the names from here, so
renaming a metric is one change that every consumer follows (their tests
check that they name only metrics defined here).  Names follow the
Prometheus conventions: a ``nova_paging_`` namespace, base units
(seconds), ``_total`` on counters.

Per-guest metrics come from the kernel's ``paging_stats`` (``source``
names the key; nanosecond counters are exported in seconds).
"""

import dataclasses

NAMESPACE = 'nova_paging'

COUNTER = 'counter'
GAUGE = 'gauge'

# Labels of every per-guest metric: Nova's instance UUID and libvirt's
# domain name.
GUEST_LABELS = ('instance', 'domain')


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str
    kind: str
    help: str
    labels: tuple = ()
    # The paging_stats key it is read from, if any; ``scale`` turns the
    # kernel's unit into the metric's.
    source: str = None
    scale: float = 1.0


def _m(suffix, kind, help, labels=(), source=None, scale=1.0):
    return Metric('%s_%s' % (NAMESPACE, suffix), kind, help, tuple(labels),
                  source, scale)


NS = 1e-9

GUEST_MODE = _m('guest_mode', GAUGE, 'Paging mode the guest runs in now '
                '(1 for its mode).', GUEST_LABELS + ('mode',), 'mode')
GUEST_POLICY = _m('guest_policy', GAUGE, 'Paging policy applied to the '
                  'guest (1 for its policy).', GUEST_LABELS + ('policy',),
                  'policy')
SWITCHES_TO_HAP = _m('switches_to_hap_total', COUNTER, 'Switches of the '
                     'guest from shadow to hardware-assisted paging.',
                     GUEST_LABELS, 'switches_to_hap')
SWITCHES_TO_SHADOW = _m('switches_to_shadow_total', COUNTER, 'Switches of '
                        'the guest from hardware-assisted to shadow '
                        'paging.', GUEST_LABELS, 'switches_to_shadow')
SWITCHES_REFUSED = _m('switches_refused_total', COUNTER, 'Policy or switch '
                      'requests the kernel refused for the guest.',
                      GUEST_LABELS, 'switches_refused')
HAP_SECONDS = _m('hap_seconds_total', COUNTER, 'Time the guest ran with '
                 'hardware-assisted paging.', GUEST_LABELS, 'time_hap_ns',
                 NS)
SHADOW_SECONDS = _m('shadow_seconds_total', COUNTER, 'Time the guest ran '
                    'with shadow paging.', GUEST_LABELS, 'time_shadow_ns',
                    NS)
SWITCHING_SECONDS = _m('switching_seconds_total', COUNTER, 'Time the '
                       'guest\'s vCPUs spent switching modes.', GUEST_LABELS,
                       'time_switching_ns', NS)
SHADOW_MAINTENANCE_SECONDS = _m(
    'shadow_maintenance_seconds_total', COUNTER, 'Time spent maintaining '
    'the guest\'s shadow page tables.', GUEST_LABELS, 'shadow_maint_ns', NS)
SAMPLES = _m('samples_total', COUNTER, 'DSP samples taken of the guest.',
             GUEST_LABELS, 'samples')
LAST_FTLB = _m('last_ftlb', GAUGE, 'TLB misses per 1000 instructions '
               '(scaled as the kernel keeps them) in the last sample.',
               GUEST_LABELS, 'last_ftlb')
LAST_FPF = _m('last_fpf', GAUGE, 'Guest page faults per 1000 instructions '
              '(scaled as the kernel keeps them) in the last sample.',
              GUEST_LABELS, 'last_fpf')

# Host-level.
HOST_INFO = _m('host_info', GAUGE, 'Always 1: what this host is (CPU '
               'generation, interface version, threshold profile, whether '
               'it can switch or only advises).',
               ('generation', 'abi_version', 'profile', 'switching'))
# Advisory hosts (stock KVM): what switching would have saved, from the
# cost model.  Modeled, never measured: the name says so.
MODELED_GAIN_SECONDS = _m('modeled_gain_seconds_total', COUNTER, 'Modeled '
                          'time adaptive paging would have saved the guest '
                          '(cost model, not a measurement).', GUEST_LABELS)

ALL = tuple(value for value in dict(globals()).values()
            if isinstance(value, Metric))
BY_NAME = {metric.name: metric for metric in ALL}
