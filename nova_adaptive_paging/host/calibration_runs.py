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

"""Calibration runs on one host (``nova-paging calibration measure``).

The two calibration microbenchmarks (the Ansible collection's
``calibrate`` role ships and builds them: ``nap-tlb-chase``, a TLB-miss
heavy pointer chase, and ``nap-fault-churn``, mmap/munmap and fork
churn) run in a calibration guest the way ``abi switch-cost`` runs a
workload: with the VM's policy fixed at hap, fixed at shadow, and with
hap-shadow-hap round trips, each ``repeats`` times; the VM is put back as
it was afterwards.  Each run keeps the benchmark's own figures (the JSON
line it prints: elapsed and CPU seconds in the guest, faults, TLB misses
where a counter could be opened), so
:mod:`nova_adaptive_paging.tuning.cost_fit` can turn the time
differences between the modes into per-event costs.
"""

import json
import shlex
import socket

from nova_adaptive_paging import cpu
from nova_adaptive_paging import exception
from nova_adaptive_paging.host import switch_cost
from nova_adaptive_paging import vocabulary

FORMAT_VERSION = 1
TLB, FAULT = 'tlb-chase', 'fault-churn'
BENCHES = {TLB: 'nap-tlb-chase', FAULT: 'nap-fault-churn'}
# The static runs the fit compares, and the round trip that gives the
# switching cost.
ROUND_TRIP = switch_cost.HSH
KINDS = vocabulary.MODES + (ROUND_TRIP,)
# What every benchmark line must carry for the fit.
FIELDS = ('bench', 'elapsed_s', 'minflt', 'tlb_misses')
# The time the fit compares: the benchmark's CPU seconds (its own and its
# children's), which a busy host does not inflate the way it does the
# wall time; results of benchmarks built before they printed it have
# elapsed_s only.
CPU_FIELD = 'cpu_s'


def run_seconds(result):
    """What a run cost: its CPU seconds, else its elapsed seconds."""
    return result.get(CPU_FIELD, result['elapsed_s'])


class BenchmarkError(exception.Error):
    """A benchmark run whose output the fit cannot use."""


def parse_output(text, bench, where):
    """The benchmark's JSON line, checked."""
    lines = [line for line in (text or '').splitlines() if line.strip()]
    try:
        doc = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise BenchmarkError('%s: output %r; expected the JSON line %s '
                             'prints' % (where, (text or '')[:80],
                                         BENCHES[bench]))
    return check_result(doc, bench, where)


def check_result(doc, bench, where):
    """A benchmark's figures, or BenchmarkError naming what is missing."""
    if (not isinstance(doc, dict) or doc.get('bench') != bench
            or any(f not in doc for f in FIELDS)
            or not all(isinstance(doc[f], (int, float))
                       and not isinstance(doc[f], bool)
                       for f in FIELDS[1:] + ((CPU_FIELD,) if CPU_FIELD
                                              in doc else ()))):
        raise BenchmarkError('%s: %s; expected %s\'s figures (%s)'
                             % (where, json.dumps(doc)[:120],
                                BENCHES[bench], ', '.join(FIELDS)))
    return doc


def measure(transport, vm_name, bin_dir, exec_prefix='', repeats=3,
            args=None, root='/', host=None, echo=None):
    """Run both benchmarks in each way; return the results document."""
    args = args or {}
    runs = []
    for bench, program in BENCHES.items():
        command = ' '.join(filter(None, (
            exec_prefix, shlex.quote('%s/%s' % (bin_dir.rstrip('/'),
                                                program)),
            args.get(bench, ''))))
        cost = switch_cost.SwitchCost(
            transport, vm_name, command, repeats=repeats, at=[0.5],
            runs=KINDS, echo=echo, capture=True)
        results = cost.run()
        for kind in KINDS:
            for rep, run in enumerate(results[kind]):
                where = '%s %s run %d' % (bench, kind, rep + 1)
                runs.append({
                    'bench': bench, 'kind': kind, 'repeat': rep + 1,
                    'seconds': run.seconds, 'round_trips': run.round_trips,
                    'switches': run.to_hap + run.to_shadow,
                    'switching_ns': run.switching_ns,
                    'result': parse_output(run.output, bench, where)})
    return {'format_version': FORMAT_VERSION,
            'host': host or socket.gethostname(),
            'generation': cpu.host_generation(cpu.cpuinfo_path(root)),
            'vm': vm_name, 'repeats': repeats, 'runs': runs,
            'modeled': any(r['result'].get('modeled') for r in runs)}
