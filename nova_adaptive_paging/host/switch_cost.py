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

"""What switching costs a running workload (``nova-paging abi switch-cost``).

The method of the seed paper's Section 4.4 (Tables 4 and 5), for a real
VM on a patched host.  A workload runs in the VM four ways, each
``repeats`` times:

``hap``, ``shadow``
    the VM's policy fixed at that mode for the whole run;
``h-s-h``
    the VM in hap, switched to shadow and straight back to hap (one
    *round trip*) at each point of the schedule;
``s-h-s``
    the same starting from shadow.

The paper does a round trip every second, so that the number of round
trips roughly equals the run time in seconds; ``--period`` is that
schedule, ``--at`` puts the round trips at fractions of the static run's
median time instead.  The cost of switching is the difference between
the median run time with round trips and the static run in the start
mode: ``h-s-h`` against ``hap`` is the cost of switching to shadow and
back with no guest instruction run in shadow mode; ``s-h-s`` against
``shadow`` adds the rebuilding of the shadow page tables that the
switch to hap destroyed.

The workload is a command run on the host that blocks until the guest's
workload has finished (for example ``ssh guest ./bench`` or a
``virsh qemu-agent-command`` loop); its wall-clock time is the run time.
Round trips use ``paging_switch`` under policy ``adaptive``, with a
per-VM threshold override that keeps the in-kernel engine from deciding
during the measurement (its window is the longest the interface allows).
The VM's policy, mode and thresholds are put back as they were when the
command ends, also on an error, Ctrl-C or SIGTERM.
"""

import statistics
import subprocess
import tempfile
import time

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import exception
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging import vocabulary

# The static runs are the modes; a round-trip run is named after its
# path, starting and ending in its start mode.
HSH, SHS = 'h-s-h', 's-h-s'
RUNS = vocabulary.MODES + (HSH, SHS)
START = {vocabulary.HAP: vocabulary.HAP, vocabulary.SHADOW: vocabulary.SHADOW,
         HSH: vocabulary.HAP, SHS: vocabulary.SHADOW}
OTHER = {vocabulary.HAP: vocabulary.SHADOW, vocabulary.SHADOW: vocabulary.HAP}


class MeasurementError(exception.Error):
    """A run whose figures cannot be trusted (or whose workload failed)."""


class Run:
    def __init__(self, kind, seconds, round_trips, to_hap, to_shadow,
                 switching_ns, output=None):
        self.kind = kind
        # The workload's standard output, when the measurement keeps it
        # (calibration reads the benchmark's figures from it).
        self.output = output
        self.seconds = seconds
        self.round_trips = round_trips
        self.to_hap = to_hap
        self.to_shadow = to_shadow
        self.switching_ns = switching_ns


class SwitchCost:
    """Runs the workload in each way and collects the figures."""

    def __init__(self, transport, vm_name, workload, repeats=3, period=1.0,
                 at=None, runs=RUNS, clock=time.monotonic, echo=None,
                 capture=False):
        self.t = transport
        self.vm = vmfiles.Vm(transport, vm_name)
        self.workload = workload
        self.repeats = repeats
        self.period = period
        self.at = sorted(at) if at else None
        self.runs = tuple(runs)
        self.clock = clock
        self.echo = echo or (lambda line: None)
        self.capture = capture
        self.results = {kind: [] for kind in self.runs}

    def run(self):
        """All repeats of all runs; the VM's state is restored after."""
        vmfiles.check_abi(self.t)
        if not self.t.exists(self.vm.rel(spec.FILE_POLICY)):
            raise vmfiles.Refused(self.vm.rel(spec.FILE_POLICY), 'missing',
                                  'the per-VM files of a running VM')
        saved = vmfiles.Saved(self.vm)
        self.vm.stats()
        try:
            # Policy adaptive needs both modes: the one write that shows
            # the VM can be switched, before any run, without switching it.
            self.vm.set_policy(vocabulary.ADAPTIVE)
            for rep in range(self.repeats):
                for kind in self.runs:
                    result = self.measure(kind)
                    self.results[kind].append(result)
                    self.echo('run %d/%d %s: %.3f s, %d round trip(s)'
                              % (rep + 1, self.repeats, kind,
                                 result.seconds, result.round_trips))
        finally:
            try:
                saved.restore()
            except vmfiles.Refused as exc:
                raise MeasurementError('the VM could not be put back to %s: '
                                       '%s' % (saved.describe(), exc))
        return self.results

    def schedule(self, kind):
        """Seconds after the start at which to do a round trip."""
        if kind in vocabulary.MODES:
            return iter(())
        if self.at is None:
            return (self.period * k for k in range(1, 1 << 62))
        base = [r.seconds for r in self.results.get(START[kind], [])]
        if not base:
            raise MeasurementError(
                '--at needs the static %s run before %s' % (START[kind],
                                                            kind))
        median = statistics.median(base)
        return iter([f * median for f in self.at])

    def prepare(self, kind):
        mode = START[kind]
        self.vm.set_policy(mode)
        if kind in (HSH, SHS):
            current, _ = self.vm.thresholds()
            quiet = vmfiles.no_engine_thresholds(current)
            self.vm.write(spec.FILE_THRESHOLDS, quiet.format().strip(),
                          'a per-VM threshold override')
            self.vm.set_policy(vocabulary.ADAPTIVE)
        if self.vm.word(spec.FILE_MODE) != mode:
            raise MeasurementError('%s reads %s after setting policy %s'
                                   % (self.vm.rel(spec.FILE_MODE),
                                      self.vm.word(spec.FILE_MODE), mode))

    def measure(self, kind):
        self.prepare(kind)
        mode = START[kind]
        before = self.vm.stats()
        trips = 0
        when = self.schedule(kind)
        due = next(when, None)
        start = self.clock()
        out = tempfile.TemporaryFile() if self.capture else None
        proc = subprocess.Popen(self.workload, shell=True, stdout=out)
        try:
            while True:
                timeout = None if due is None else max(
                    0.0, start + due - self.clock())
                try:
                    rc = proc.wait(timeout)
                    break
                except subprocess.TimeoutExpired:
                    pass
                self.vm.switch(OTHER[mode])
                self.vm.switch(mode)
                trips += 1
                due = next(when, None)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        seconds = self.clock() - start
        output = None
        if out is not None:
            out.seek(0)
            output = out.read().decode('utf-8', 'replace')
            out.close()
        after = self.vm.stats()
        if rc != 0:
            raise MeasurementError('the workload %r exited with status %d'
                                   % (self.workload, rc))
        delta = {k: after[k] - before[k] for k in (
            'switches_to_hap', 'switches_to_shadow', 'time_switching_ns')}
        if (delta['switches_to_hap'], delta['switches_to_shadow']) != (
                trips, trips):
            raise MeasurementError(
                '%s run: %d round trip(s) written but %s counts %d to hap '
                'and %d to shadow; something else switched the VM'
                % (kind, trips, self.vm.rel(spec.FILE_STATS),
                   delta['switches_to_hap'], delta['switches_to_shadow']))
        if after['mode'] != mode:
            raise MeasurementError('%s run ended in %s mode, not %s'
                                   % (kind, after['mode'], mode))
        return Run(kind, seconds, trips, delta['switches_to_hap'],
                   delta['switches_to_shadow'], delta['time_switching_ns'],
                   output)


def table(results):
    """The report: medians per run and the cost per round trip."""
    lines = ['%-7s %5s %10s %10s %10s %6s %12s %9s %14s' % (
        'run', 'reps', 'median_s', 'min_s', 'max_s', 'trips',
        'switching_ms', 'ovhd_%', 'per_trip_ms')]
    med = {kind: statistics.median(r.seconds for r in runs)
           for kind, runs in results.items() if runs}
    for kind, runs in results.items():
        if not runs:
            continue
        secs = [r.seconds for r in runs]
        trips = statistics.median(r.round_trips for r in runs)
        switching = statistics.median(r.switching_ns for r in runs) / 1e6
        ovhd = per_trip = '-'
        base = START[kind] if kind in (HSH, SHS) else None
        if base in med:
            ovhd = '%.2f' % ((med[kind] - med[base]) / med[base] * 100)
            if trips:
                per_trip = '%.3f' % ((med[kind] - med[base]) / trips * 1e3)
        lines.append('%-7s %5d %10.3f %10.3f %10.3f %6g %12.3f %9s %14s' % (
            kind, len(runs), med[kind], min(secs), max(secs), trips,
            switching, ovhd, per_trip))
    lines.append('ovhd_% = (median - median of the static run in the start '
                 'mode) / that median;')
    lines.append('per_trip_ms = the same difference per round trip (two '
                 'switches); switching_ms = time_switching_ns of the run')
    return lines
