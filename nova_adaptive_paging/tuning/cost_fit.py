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

"""Per-event and switching costs from calibration runs, and thresholds
from them (``nova-paging calibration fit``).

Each host's results (:mod:`nova_adaptive_paging.host.calibration_runs`) give,
for each benchmark, the guest time of its fastest run with the VM fixed
at hap and fixed at shadow: whatever else runs on the host (other
guests, interrupts, a frequency drop) can only slow a run down, so the
fastest of the repeats is the least disturbed, where a median still
moves with a load that came and went during the runs.  The modes differ
by what each event costs (the cost model of
:mod:`nova_adaptive_paging.costmodel`, the seed paper's Section 4.3)::

    t_shadow - t_hap = faults * fault_s - misses * miss_s

with ``fault_s`` the extra cost of a page fault in shadow mode and
``miss_s`` that of a TLB miss in hap mode.  The TLB chase and the fault
churn weigh the two events very differently, so their two equations
give both costs.  TLB misses are the dTLB counter where the guest could
open it, else the benchmark's own count (one miss per access of the
chase, one per page the churn touches).  The switching cost is the
kernel's ``time_switching_ns`` over the switches of the round-trip runs.

The costs of a generation are the median over its hosts; the spread
across hosts goes into the profile's provenance.  Everything the runs
cannot see (CR3 write costs, how a shadow rebuild grows with memory)
stays that of the generation's shipped hardware profile, as the
profiler does with fleet telemetry, and the thresholds come from the
same search (:mod:`nova_adaptive_paging.tuning.derivation`).
"""

import collections
import dataclasses
import datetime
import statistics

from nova_adaptive_paging import cpu
from nova_adaptive_paging import exception
from nova_adaptive_paging.host import calibration_runs
from nova_adaptive_paging import profiles
from nova_adaptive_paging.tuning import profiler
from nova_adaptive_paging import vocabulary

HAP, SHADOW = vocabulary.HAP, vocabulary.SHADOW
# Which benchmark field counts the TLB misses when no counter could be
# opened in the guest.
MISS_ESTIMATE = {calibration_runs.TLB: 'accesses',
                 calibration_runs.FAULT: 'pages_touched'}


class FitError(exception.Error):
    """Results the fit cannot use; names the file and what is wrong."""


@dataclasses.dataclass
class HostFit:
    host: str
    source: str
    costs: profiler.Costs
    runs: int
    modeled: bool


def misses(result):
    """TLB misses of a run: the counter, else the benchmark's count."""
    counted = result.get('tlb_misses')
    if isinstance(counted, (int, float)) and counted >= 0:
        return counted
    return result.get(MISS_ESTIMATE[result['bench']], 0)


def check(doc, source):
    """The results document, or FitError naming the field."""
    if not isinstance(doc, dict):
        raise FitError('%s: expected the JSON document "nova-paging '
                       'calibration measure" writes' % source)
    if doc.get('format_version') != calibration_runs.FORMAT_VERSION:
        raise FitError('%s: format_version %r; expected %d'
                       % (source, doc.get('format_version'),
                          calibration_runs.FORMAT_VERSION))
    if not cpu.is_generation_key(doc.get('generation')):
        raise FitError('%s: generation %r; expected a CPU generation key '
                       '(as "nova-paging cpu-generation" prints it)'
                       % (source, doc.get('generation')))
    runs = doc.get('runs')
    if not isinstance(runs, list) or not runs:
        raise FitError('%s: runs %r; expected a list of runs'
                       % (source, runs))
    for i, run in enumerate(runs):
        where = '%s: runs[%d]' % (source, i)
        if not isinstance(run, dict) or run.get('bench') not in \
                calibration_runs.BENCHES or run.get('kind') not in \
                calibration_runs.KINDS:
            raise FitError('%s: expected bench in %s and kind in %s' % (
                where, ', '.join(calibration_runs.BENCHES),
                ', '.join(calibration_runs.KINDS)))
        try:
            calibration_runs.check_result(run.get('result'), run['bench'],
                                          where)
        except calibration_runs.BenchmarkError as exc:
            raise FitError(str(exc))
    return doc


def fit_host(doc, source):
    """One host's :class:`HostFit`."""
    runs = collections.defaultdict(list)
    for run in doc['runs']:
        runs[run['bench'], run['kind']].append(run)
    rows = []
    for bench in calibration_runs.BENCHES:
        figs = {}
        for mode in vocabulary.MODES:
            got = runs.get((bench, mode))
            if not got:
                raise FitError('%s: no %s run of %s; expected the static '
                               'runs in both modes' % (source, mode, bench))
            figs[mode] = {
                # The least a run took: noise only ever adds time.
                'elapsed': min(calibration_runs.run_seconds(r['result'])
                               for r in got),
                'faults': statistics.median(
                    r['result']['minflt'] for r in got),
                'misses': statistics.median(misses(r['result'])
                                            for r in got)}
        faults = (figs[HAP]['faults'] + figs[SHADOW]['faults']) / 2
        missed = (figs[HAP]['misses'] + figs[SHADOW]['misses']) / 2
        rows.append((faults, missed,
                     figs[SHADOW]['elapsed'] - figs[HAP]['elapsed']))
    (f1, m1, d1), (f2, m2, d2) = rows
    det = m1 * f2 - f1 * m2
    if abs(det) < 1e-9 * max(abs(m1 * f2), abs(f1 * m2), 1.0):
        raise FitError('%s: the benchmarks weigh faults and TLB misses '
                       'alike (TLB chase %g faults / %g misses, fault '
                       'churn %g / %g); expected the chase to miss and '
                       'the churn to fault' % (source, f1, m1, f2, m2))
    fault_s = (m1 * d2 - m2 * d1) / det
    miss_s = (f1 * d2 - f2 * d1) / det
    if fault_s <= 0 or miss_s <= 0:
        raise FitError(
            '%s: the fit gave %.4g us per fault in shadow mode and %.4g ns '
            'per TLB miss in hap mode; expected both positive (is the '
            'policy really forced? are the runs long enough to beat the '
            'noise?)' % (source, fault_s * 1e6, miss_s * 1e9))
    trips = [r for r in doc['runs']
             if r['kind'] == calibration_runs.ROUND_TRIP]
    switches = sum(r.get('switches', 0) for r in trips)
    if switches <= 0:
        raise FitError('%s: no switch in the round-trip runs; expected '
                       'at least one' % source)
    switch_s = sum(r.get('switching_ns', 0) for r in trips) * 1e-9 / switches
    return HostFit(str(doc.get('host', source)), source,
                   profiler.Costs(fault_s=fault_s, miss_s=miss_s,
                                  switch_s=switch_s),
                   len(doc['runs']), bool(doc.get('modeled')))


def _spread(values):
    """(max - min) / median, the spread the provenance reports."""
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid else 0.0


def fit(documents, traces=None):
    """{generation: (Profile, [HostFit], Costs)} from (source, document)
    pairs; every document is checked before anything is fitted."""
    for source, doc in documents:
        check(doc, source)
    by_gen = collections.defaultdict(list)
    for source, doc in documents:
        by_gen[doc['generation']].append(fit_host(doc, source))
    out = {}
    for gen, hosts in sorted(by_gen.items()):
        costs = profiler.Costs(**{
            f: statistics.median(getattr(h.costs, f) for h in hosts)
            for f in ('fault_s', 'miss_s', 'switch_s')})
        base, _, new, report = profiler.calibrated(gen, costs, traces)
        modeled = any(h.modeled for h in hosts)
        source = (
            'nova-paging calibration fit%s: hosts %s, %d runs; extra cost '
            'per page fault in shadow mode %.4g us, per TLB miss in hap '
            'mode %.4g ns, per switch %.4g us; spread across hosts %.0f '
            '%%, %.0f %%, %.0f %%; other costs from hardware profile %s '
            '(modeled); calibrated as nova-paging calibrate: interval %d '
            's, history %d' % (
                ' (MODELED: simulated host)' if modeled else '',
                ', '.join(sorted(h.host for h in hosts)),
                sum(h.runs for h in hosts), costs.fault_s * 1e6,
                costs.miss_s * 1e9, costs.switch_s * 1e6,
                _spread([h.costs.fault_s for h in hosts]) * 100,
                _spread([h.costs.miss_s for h in hosts]) * 100,
                _spread([h.costs.switch_s for h in hosts]) * 100,
                base.name, report['interval_s'], report['history']))
        profile = dataclasses.replace(new, provenance=profiles.Provenance(
            method='calibrated', source=source,
            obtained=datetime.date.today().isoformat(), hosts=len(hosts),
            samples=sum(h.runs for h in hosts)))
        out[gen] = (profile, hosts, costs)
    return out
