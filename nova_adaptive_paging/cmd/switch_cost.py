"""``nova-paging abi switch-cost``: what switching costs a running workload.

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

import errno
import os
import signal
import statistics
import subprocess
import time

import click

from nova_adaptive_paging.abi import conformance
from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.cmd import common
from nova_adaptive_paging.cmd import sim_host
from nova_adaptive_paging import dsp
from nova_adaptive_paging import sim
from nova_adaptive_paging.sim import host as simhost

RUNS = ('hap', 'shadow', 'h-s-h', 's-h-s')
START = {'hap': 'hap', 'shadow': 'shadow', 'h-s-h': 'hap', 's-h-s': 'shadow'}
OTHER = {'hap': 'shadow', 'shadow': 'hap'}


class Refused(Exception):
    """The interface or the VM does not allow what the measurement needs."""

    def __init__(self, rel, value, expected):
        super().__init__('%s: %s; expected %s' % (rel, value, expected))


class MeasurementError(Exception):
    """A run whose figures cannot be trusted (or whose workload failed)."""


# The spec's names for the errors it defines (EOPNOTSUPP is ENOTSUP to
# errno.errorcode on Linux).
ERRNO_NAMES = {spec.EINVAL: 'EINVAL', spec.EPERM: 'EPERM',
               spec.EOPNOTSUPP: 'EOPNOTSUPP'}


def _errname(exc):
    return ERRNO_NAMES.get(exc.errno) or errno.errorcode.get(
        exc.errno, str(exc.errno))


def check_abi(transport):
    """Refuse a host without the interface, or with another version."""
    rel = '%s/%s' % (spec.PARAMS_DIR, spec.PARAM_ABI)
    expected = 'ABI version %d (kernel with the paging-switch patch)' % (
        spec.ABI_VERSION)
    if not transport.exists(rel):
        raise Refused(rel, 'missing', expected)
    value = transport.read(rel).strip()
    if value != str(spec.ABI_VERSION):
        raise Refused(rel, value, expected)


def vm_for_domain(root, transport, domain):
    """The ``<pid>-<fd>`` directory of a libvirt domain's QEMU process."""
    pid_file = os.path.join(root, simhost.PID_DIR,
                            domain + '.pid')
    try:
        with open(pid_file, encoding='ascii') as f:
            pid = f.read().strip()
    except OSError as exc:
        raise Refused(pid_file, 'cannot be read (%s)' % exc.strerror,
                      'the pid file of a running libvirt domain')
    found = sorted(
        name for name in transport.listdir(spec.DEBUGFS_DIR)
        if (m := spec.VM_DIR_RE.match(name)) and m.group('pid') == pid
        and transport.exists('%s/%s/%s' % (spec.DEBUGFS_DIR, name,
                                           spec.FILE_POLICY)))
    if len(found) != 1:
        raise Refused('%s/%s-*' % (spec.DEBUGFS_DIR, pid),
                      '%d VM directories with %s' % (len(found),
                                                     spec.FILE_POLICY),
                      'exactly one (one VM per QEMU process)')
    return found[0]


class Vm:
    """One VM's per-VM files, with refusals that name file and value."""

    def __init__(self, transport, name):
        self.t = transport
        self.name = name

    def rel(self, name):
        return '%s/%s/%s' % (spec.DEBUGFS_DIR, self.name, name)

    def read(self, name):
        try:
            return self.t.read(self.rel(name))
        except OSError as exc:
            raise Refused(self.rel(name), 'cannot be read (%s)'
                          % _errname(exc), 'a VM of the ABI')

    def write(self, name, value, expected):
        try:
            self.t.write(self.rel(name), value + '\n')
        except OSError as exc:
            raise Refused(self.rel(name), 'writing %r failed with %s'
                          % (value, _errname(exc)), expected)

    def word(self, name):
        return self.read(name).strip()

    def parsed(self, name, parse):
        """``parse`` of the file's text; a bad format names the file."""
        try:
            return parse(self.read(name))
        except spec.AbiFormatError as exc:
            raise Refused(self.rel(name), str(exc),
                          'the format of ABI version %d' % spec.ABI_VERSION)

    def stats(self):
        return self.parsed(spec.FILE_STATS, spec.parse_stats)

    def thresholds(self):
        """The effective set and whether it is a per-VM override."""
        return self.parsed(spec.FILE_THRESHOLDS, spec.parse_vm_thresholds)

    def set_policy(self, policy):
        self.write(spec.FILE_POLICY, policy,
                   'a VM that can run in hap and in shadow mode')

    def switch(self, mode):
        self.write(spec.FILE_SWITCH, mode, 'policy adaptive')


def no_engine_thresholds(current):
    """The VM's thresholds with the longest window and interval: the
    engine cannot decide within ``HISTORY_MAX`` hours."""
    return spec.ThresholdSet(current.thresholds, dsp.HISTORY_MAX,
                             spec.INTERVAL_MS_RANGE[1])


class Saved:
    """A VM's policy, mode and threshold override, and how to restore them."""

    def __init__(self, vm):
        self.vm = vm
        self.policy = vm.word(spec.FILE_POLICY)
        self.mode = vm.word(spec.FILE_MODE)
        self.thresholds, self.override = vm.thresholds()

    def restore(self):
        vm = self.vm
        if self.policy == 'adaptive':
            vm.set_policy(self.mode)    # back to its mode, then hand over
        vm.write(spec.FILE_THRESHOLDS,
                 self.thresholds.format().strip() if self.override
                 else 'default', 'a per-VM threshold override')
        vm.set_policy(self.policy)

    def describe(self):
        return 'policy %s, mode %s, thresholds %s' % (
            self.policy, self.mode, 'override' if self.override
            else 'host default')


class Run:
    def __init__(self, kind, seconds, round_trips, to_hap, to_shadow,
                 switching_ns):
        self.kind = kind
        self.seconds = seconds
        self.round_trips = round_trips
        self.to_hap = to_hap
        self.to_shadow = to_shadow
        self.switching_ns = switching_ns


class SwitchCost:
    """Runs the workload in each way and collects the figures."""

    def __init__(self, transport, vm_name, workload, repeats=3, period=1.0,
                 at=None, runs=RUNS, clock=time.monotonic, echo=None):
        self.t = transport
        self.vm = Vm(transport, vm_name)
        self.workload = workload
        self.repeats = repeats
        self.period = period
        self.at = sorted(at) if at else None
        self.runs = tuple(runs)
        self.clock = clock
        self.echo = echo or (lambda line: None)
        self.results = {kind: [] for kind in self.runs}

    def run(self):
        """All repeats of all runs; the VM's state is restored after."""
        check_abi(self.t)
        if not self.t.exists(self.vm.rel(spec.FILE_POLICY)):
            raise Refused(self.vm.rel(spec.FILE_POLICY), 'missing',
                          'the per-VM files of a running VM')
        saved = Saved(self.vm)
        self.vm.stats()
        try:
            # Policy adaptive needs both modes: the one write that shows
            # the VM can be switched, before any run, without switching it.
            self.vm.set_policy('adaptive')
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
            except Refused as exc:
                raise MeasurementError('the VM could not be put back to %s: '
                                       '%s' % (saved.describe(), exc))
        return self.results

    def schedule(self, kind):
        """Seconds after the start at which to do a round trip."""
        if kind in ('hap', 'shadow'):
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
        if kind in ('h-s-h', 's-h-s'):
            current, _ = self.vm.thresholds()
            self.vm.write(spec.FILE_THRESHOLDS,
                          no_engine_thresholds(current).format().strip(),
                          'a per-VM threshold override')
            self.vm.set_policy('adaptive')
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
        proc = subprocess.Popen(self.workload, shell=True)
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
                   delta['switches_to_shadow'], delta['time_switching_ns'])


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
        base = START[kind] if kind in ('h-s-h', 's-h-s') else None
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


def modeled(root):
    """Whether ROOT is served by ``nova-paging sim-host``."""
    return os.path.isdir(os.path.join(root, sim_host.CONTROL_DIR))


@click.command('switch-cost')
@click.option('--root', default='/', show_default=True,
              type=click.Path(file_okay=False),
              help='Root of the interface\'s files.')
@click.option('--vm', metavar='PID-FD', help='The VM\'s debugfs directory '
              'name under sys/kernel/debug/kvm.')
@click.option('--domain', metavar='NAME', help='libvirt domain; its QEMU '
              'pid file gives the VM directory.')
@click.option('--workload', required=True, metavar='COMMAND',
              help='Shell command on this host that blocks until the '
                   'guest workload has finished.')
@click.option('--repeats', default=3, show_default=True,
              type=click.IntRange(1, 1000), help='Runs of each kind.')
@click.option('--period', default=1.0, show_default=True,
              type=click.FloatRange(min=0.001),
              help='Seconds between round trips (the paper: 1).')
@click.option('--at', 'at', metavar='F[,F...]',
              help='Round trips at these fractions of the static run\'s '
                   'median time instead of every --period.')
@click.option('--runs', default=','.join(RUNS), show_default=True,
              help='Which runs, in this order.')
def switch_cost(root, vm, domain, workload, repeats, period, at, runs):
    """Measure switching cost with the seed paper's H-S-H/S-H-S runs."""
    kinds = [k for k in runs.split(',') if k]
    bad = [k for k in kinds if k not in RUNS]
    if bad or not kinds:
        common.fail('--runs: %s; expected some of %s' % (
            ','.join(bad) or 'empty', ','.join(RUNS)))
    fractions = None
    if at:
        try:
            fractions = [float(f) for f in at.split(',')]
        except ValueError:
            common.fail('--at: %s; expected fractions like 0.25,0.5' % at)
        if any(not 0 < f < 1 for f in fractions):
            common.fail('--at: %s; expected fractions in (0, 1)' % at)
    if bool(vm) == bool(domain):
        common.fail('give exactly one of --vm and --domain')
    transport = conformance.FileTransport(root)
    is_modeled = modeled(root)
    # SIGTERM ends the command like Ctrl-C: the VM is restored first.
    old = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if domain:
            vm = vm_for_domain(root, transport, domain)
        cost = SwitchCost(transport, vm, workload, repeats, period,
                          fractions, kinds, echo=lambda line: click.echo(
                              line, err=True))
        note = sim.MODELED_NOTE if is_modeled else 'measured on this host'
        click.echo('switch cost of VM %s, workload %r (%s)'
                   % (vm, workload, note))
        results = cost.run()
    except (Refused, MeasurementError) as exc:
        common.fail(str(exc))
    except KeyboardInterrupt:
        common.fail('interrupted; the VM\'s policy was restored')
    finally:
        signal.signal(signal.SIGTERM, old)
    for line in table(results):
        click.echo(line)
    if is_modeled:
        click.echo(sim.MODELED_NOTE)


def _interrupt(signum, frame):
    raise KeyboardInterrupt()
