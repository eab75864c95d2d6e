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

"""Conformance suite for implementations of the switching interface.

Runs against a root directory (``/`` on a patched host, a simulated host's
directory in tests): ``nova-paging abi conformance --root DIR``.  It needs
one running VM that can run in both modes, changes its policy, thresholds
and the host's injection switch while it runs, and puts everything back
as it found it.  Adaptive decisions are checked against
:class:`nova_adaptive_paging.dsp.Engine`, the canonical implementation.
"""

import contextlib
import errno
import itertools
import os
import random

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import dsp
from nova_adaptive_paging import vocabulary


class Failure(AssertionError):
    pass


class Suite:
    """``reference(thresholds, history, mode, guard)`` builds the engine the
    implementation's decisions are checked against: dsp.Engine, the
    canonical one, unless a test brings an independent oracle (the model
    runs dsp.Engine itself, so checking it against dsp.Engine would
    compare the engine with itself)."""

    def __init__(self, transport, vm=None, reference=None):
        self.t = transport
        self.vm = vm
        self.reference = reference or dsp.Engine

    # -- helpers ---------------------------------------------------------
    def vm_file(self, name):
        return '%s/%s/%s' % (spec.DEBUGFS_DIR, self.vm, name)

    def expect_error(self, rel, text, code):
        before = self._readable_state(rel)
        try:
            self.t.write(rel, text)
        except OSError as exc:
            if exc.errno != code:
                raise Failure('writing %r to %s: expected %s, got %s'
                              % (text, rel, errno.errorcode[code],
                                 errno.errorcode.get(exc.errno, exc.errno)))
        else:
            raise Failure('writing %r to %s succeeded; expected %s'
                          % (text, rel, errno.errorcode[code]))
        after = self._readable_state(rel)
        if before != after:
            raise Failure('a rejected write to %s changed state: %r -> %r'
                          % (rel, before, after))

    def _readable_state(self, rel):
        # A write-only file's rejected write must leave the VM unchanged.
        if os.path.basename(rel) in (spec.FILE_SWITCH,
                                     spec.FILE_GUEST_FAULTS,
                                     spec.FILE_INJECT):
            return (self.t.read(self.vm_file(spec.FILE_POLICY)),
                    self.t.read(self.vm_file(spec.FILE_MODE)))
        return self.t.read(rel)

    def stats(self):
        try:
            return spec.parse_stats(self.t.read(self.vm_file(
                spec.FILE_STATS)))
        except spec.AbiFormatError as exc:
            raise Failure('%s: %s' % (spec.FILE_STATS, exc))

    def read_word(self, name):
        return self.t.read(self.vm_file(name)).strip()

    def write_word(self, name, word):
        self.t.write(self.vm_file(name), word + '\n')

    @contextlib.contextmanager
    def preserved(self):
        """Restore the VM policy, thresholds and host injection after."""
        policy = self.read_word(spec.FILE_POLICY)
        vm_thr = self.t.read(self.vm_file(spec.FILE_THRESHOLDS))
        inject = self.t.read(spec.param_path(spec.PARAM_INJECT)).strip()
        host_thr = self.t.read(spec.param_path(spec.PARAM_THRESHOLDS))
        try:
            yield
        finally:
            self.t.write(spec.param_path(spec.PARAM_THRESHOLDS), host_thr)
            try:
                saved, override = spec.parse_vm_thresholds(vm_thr)
            except spec.AbiFormatError:
                # Unreadable before the check (the check that made it so
                # has failed already): put the host set back.
                override = False
            self.t.write(self.vm_file(spec.FILE_THRESHOLDS),
                         saved.format() if override else 'default\n')
            self.t.write(spec.param_path(spec.PARAM_INJECT), inject + '\n')
            self.write_word(spec.FILE_POLICY, policy)

    # -- host-wide -------------------------------------------------------
    def check_discovery(self):
        text = self.t.read(spec.param_path(spec.PARAM_ABI)).strip()
        if text != str(spec.ABI_VERSION):
            raise Failure('%s reads %r; this suite checks ABI version %d'
                          % (spec.PARAM_ABI, text, spec.ABI_VERSION))

    def check_host_thresholds(self):
        rel = spec.param_path(spec.PARAM_THRESHOLDS)
        original = self.t.read(rel)
        try:
            current = spec.ThresholdSet.parse(original)
        except spec.AbiFormatError as exc:
            raise Failure('%s: %s' % (rel, exc))
        changed = spec.ThresholdSet(
            dsp.Thresholds(*(v + 1 for v in current.thresholds.as_tuple())),
            current.history % dsp.HISTORY_MAX + 1, current.interval_ms,
            dsp.Guard(*(v + 1 for v in current.guard.as_tuple()[:3]),
                      budget_ppm=current.guard.budget_ppm % dsp.PPM + 1,
                      cr3_cost_ps=current.guard.cr3_cost_ps % 1000 + 1))
        # A version 2 line, without the guard's keys: their defaults.
        old = ' '.join(changed.format().split()[
            :len(spec.REQUIRED_THRESHOLD_KEYS)])
        try:
            self.t.write(rel, changed.format())
            if spec.ThresholdSet.parse(self.t.read(rel)) != changed:
                raise Failure('%s did not read back what was written' % rel)
            self.t.write(rel, old + '\n')
            back = spec.ThresholdSet.parse(self.t.read(rel))
            if back.guard != dsp.Guard():
                raise Failure('%s: a set without the guard\'s keys reads '
                              'back %r, expected the defaults %r'
                              % (rel, back.guard, dsp.Guard()))
        finally:
            self.t.write(rel, original)

    def check_host_thresholds_rejects_bad_values(self):
        rel = spec.param_path(spec.PARAM_THRESHOLDS)
        good = spec.ThresholdSet.parse(self.t.read(rel)).format().strip()
        items = good.split()
        bad = [
            ' '.join(i for i in items                      # a key missing
                     if not i.startswith('interval_ms=')),
            good + ' history=3',                           # a key twice
            good.replace('tlb_upper=', 'tlb_upper=x'),     # not a number
            good.replace('tlb_upper=', 'tlb_upper=-'),     # negative
            good + ' bogus=1',                             # unknown key
            'tlb_upper=1 tlb_lower=2 ' + ' '.join(items[2:]),  # lower>upper
            ' '.join(i if not i.startswith('history=') else 'history=0'
                     for i in items),
            ' '.join(i if not i.startswith('interval_ms=')
                     else 'interval_ms=1' for i in items),
            ' '.join(i if not i.startswith('budget_ppm=')
                     else 'budget_ppm=1000001' for i in items),
            ' '.join(i if not i.startswith('pf_cost_ps=')
                     else 'pf_cost_ps=%d' % (dsp.METRIC_MAX + 1)
                     for i in items),
            '',
        ]
        for text in bad:
            self.expect_error(rel, text + '\n', spec.EINVAL)

    def check_bool_params(self):
        for name in (spec.PARAM_INJECT, spec.PARAM_PMU_ALL):
            rel = spec.param_path(name)
            original = self.t.read(rel)
            if original.strip() not in ('Y', 'N'):
                raise Failure('%s must read Y or N' % rel)
            flipped = spec.format_bool(original.strip() == 'N')
            try:
                self.t.write(rel, flipped)
                if self.t.read(rel) != flipped:
                    raise Failure('%s did not read back what was written'
                                  % rel)
            finally:
                self.t.write(rel, original)
            self.expect_error(rel, 'maybe\n', spec.EINVAL)

    def check_walk_events_param(self):
        rel = spec.param_path(spec.PARAM_WALK_EVENTS)
        original = self.t.read(rel)
        spec.parse_walk_events(original)
        written = 'store=%d load=%d\n' % (0x1049, 0x1008)
        want = spec.format_walk_events({'load': 0x1008, 'store': 0x1049})
        try:
            self.t.write(rel, written)
            if self.t.read(rel) != want:
                raise Failure('%s reads %r after %r; expected %r' % (
                    rel, self.t.read(rel), written, want))
            top = spec.WALK_CONFIG_MAX
            for bad in ('load=1', 'store=1', 'load=1 store=2 load=3',
                        'load=%d store=0' % (top + 1), 'load=0x10 store=0',
                        'load=1 store=2 walk=3', 'load=-1 store=0', ''):
                self.expect_error(rel, bad + '\n', spec.EINVAL)
        finally:
            self.t.write(rel, original)

    # -- per VM ------------------------------------------------------------
    def check_vm_files(self):
        missing = [n for n in spec.VM_FILES
                   if not self.t.exists(self.vm_file(n))]
        if missing:
            raise Failure('VM %s lacks %s' % (self.vm, ', '.join(missing)))
        if self.read_word(spec.FILE_POLICY) not in spec.POLICIES:
            raise Failure('bad %s' % spec.FILE_POLICY)
        if self.read_word(spec.FILE_MODE) not in spec.MODES:
            raise Failure('bad %s' % spec.FILE_MODE)
        stats = self.stats()
        if stats['abi_version'] != spec.ABI_VERSION:
            raise Failure('paging_stats abi_version is %d'
                          % stats['abi_version'])
        # A name that is no file of the interface is missing (ENOENT),
        # whichever way the files are reached.
        try:
            self.t.read(self.vm_file('paging_nothing'))
        except FileNotFoundError:
            pass
        else:
            raise Failure('VM %s reads a file paging_nothing' % self.vm)

    def check_fixed_policies_switch_and_count(self):
        with self.preserved():
            self.write_word(spec.FILE_POLICY, vocabulary.HAP)
            before = self.stats()
            for mode in (vocabulary.SHADOW, vocabulary.HAP) * 2:
                self.write_word(spec.FILE_POLICY, mode)
                if self.read_word(spec.FILE_MODE) != mode:
                    raise Failure('policy %s left the VM in %s mode'
                                  % (mode, self.read_word(spec.FILE_MODE)))
                if self.read_word(spec.FILE_POLICY) != mode:
                    raise Failure('policy did not read back as %s' % mode)
            after = self.stats()
            for key in ('switches_to_hap', 'switches_to_shadow'):
                if after[key] - before[key] != 2:
                    raise Failure('%s grew by %d over 2 switches'
                                  % (key, after[key] - before[key]))
            # Writing the current mode again is not a switch.
            self.write_word(spec.FILE_POLICY, vocabulary.HAP)
            if self.stats()['switches_to_hap'] != after['switches_to_hap']:
                raise Failure('re-writing the current policy counted a '
                              'switch')

    def check_policy_rejects_bad_values(self):
        # A NUL ends no text: a write is all of its bytes (section 1).
        for text in ('bogus\n', 'ept\n', '\n', 'hap shadow\n',
                     'shadow\x00junk\n', 'hap\x00'):
            self.expect_error(self.vm_file(spec.FILE_POLICY), text,
                              spec.EINVAL)

    def check_forced_switch(self):
        rel = self.vm_file(spec.FILE_SWITCH)
        with self.preserved():
            self.write_word(spec.FILE_POLICY, vocabulary.HAP)
            self.expect_error(rel, vocabulary.SHADOW + '\n', spec.EPERM)
            self.write_word(spec.FILE_POLICY, vocabulary.ADAPTIVE)
            self.expect_error(rel, 'sideways\n', spec.EINVAL)
            for mode in (vocabulary.SHADOW, vocabulary.HAP):
                self.write_word(spec.FILE_SWITCH, mode)
                if self.read_word(spec.FILE_MODE) != mode:
                    raise Failure('forced switch to %s did not happen'
                                  % mode)
            if self.read_word(spec.FILE_POLICY) != vocabulary.ADAPTIVE:
                raise Failure('a forced switch changed the policy')

    def check_vm_threshold_override(self):
        rel = self.vm_file(spec.FILE_THRESHOLDS)
        host = spec.ThresholdSet.parse(
            self.t.read(spec.param_path(spec.PARAM_THRESHOLDS)))
        mine = spec.ThresholdSet(dsp.Thresholds(5, 4, 3, 2, 1, 0), 2, 1000)
        with self.preserved():
            self.t.write(rel, 'default\n')
            text = self.t.read(rel)
            if self._vm_thresholds(rel, text) != (host, False):
                raise Failure('%s without override must read the host '
                              'thresholds and override=0, read %r'
                              % (rel, text))
            self.t.write(rel, mine.format())
            text = self.t.read(rel)
            if self._vm_thresholds(rel, text) != (mine, True):
                raise Failure('%s override did not read back: %r'
                              % (rel, text))
            self.expect_error(rel, 'tlb_upper=1\n', spec.EINVAL)
            # The set before a NUL is valid; the write is not.
            self.expect_error(rel, mine.format().rstrip('\n')
                              + '\x00 history=99\n', spec.EINVAL)

    @staticmethod
    def _vm_thresholds(rel, text):
        try:
            return spec.parse_vm_thresholds(text)
        except spec.AbiFormatError as exc:
            raise Failure('%s: %s' % (rel, exc))

    def check_guest_faults(self):
        rel = self.vm_file(spec.FILE_GUEST_FAULTS)
        for text in ('abc\n', '-5\n', '1 2\n', '%d\n' % (dsp.U64_MAX + 1),
                     '7\x008\n'):
            self.expect_error(rel, text, spec.EINVAL)

    def check_inject_needs_switch_on(self):
        with self.preserved():
            self.t.write(spec.param_path(spec.PARAM_INJECT), 'N\n')
            self.expect_error(self.vm_file(spec.FILE_INJECT), '1000 1 1\n',
                              spec.EPERM)
            self.t.write(spec.param_path(spec.PARAM_INJECT), 'Y\n')
            self.expect_error(self.vm_file(spec.FILE_INJECT), '1000 1\n',
                              spec.EINVAL)

    def _boundary_samples(self, t):
        """Counts whose metrics sit on and around every threshold.

        With 10^13 instructions FTLB is tlb // 10^7 and FPF is pf, and with
        FTLB = 1000 P-to-T equals FPF, so each threshold is hit exactly.
        """
        insns = 10 ** 13
        around = (lambda v: {max(v - 1, 0), v, v + 1})
        ftlbs = {0, 1, 1000, 4 * t.tlb_upper // 5, 4 * t.tlb_upper // 5 + 1}
        fpfs = {0, 4 * t.pf_upper // 5, 4 * t.pf_upper // 5 + 1}
        for v in (t.tlb_lower, t.tlb_upper):
            ftlbs |= around(v)
        for v in (t.pf_lower, t.pf_upper, t.pt_lower, t.pt_upper):
            fpfs |= around(v)
        for ftlb in sorted(ftlbs):
            for fpf in sorted(fpfs):
                yield insns, ftlb * 10 ** 7, fpf

    def _random_samples(self, steps, seed):
        # Phases of TLB-heavy and fault-heavy samples, with noise and
        # short bursts, so that every rule fires and the window matters.
        rng = random.Random(seed)
        shapes = [(30, 0), (0, 40), (2, 2), (0, 0), (12, 5), (1, 200)]
        shape = shapes[0]
        for _ in range(steps):
            if rng.random() < 0.15:
                shape = rng.choice(shapes)
            insns = rng.randrange(0, 10 ** 10) if rng.random() > 0.02 else 0
            yield (insns, shape[0] * insns // 1000 + rng.randrange(0, 1000),
                   shape[1] * insns // 10 ** 8 + rng.randrange(0, 3))

    def check_adaptive_follows_reference(self, steps=300, seed=1):
        """Injected samples drive the VM's engine exactly like dsp.Engine:
        every threshold's boundary (each sample held for a full window),
        then random phases."""
        # The paper's thresholds and machine (the Nehalem cost profile's
        # prices), at 0.5 s a switch so that the rate cap bites too.
        thresholds = spec.ThresholdSet(
            dsp.Thresholds(10000, 100, 5000000, 100000, 200000, 150000),
            3, 5000, dsp.Guard(4000, 10000000, 500000000, 5000))
        nominal_ns = thresholds.interval_ms * 10 ** 6
        held = [c for c in self._boundary_samples(thresholds.thresholds)
                for _ in range(thresholds.history)]
        with self.preserved():
            self.t.write(spec.param_path(spec.PARAM_INJECT), 'Y\n')
            self.t.write(self.vm_file(spec.FILE_THRESHOLDS),
                         thresholds.format())
            self.write_word(spec.FILE_POLICY, vocabulary.HAP)
            self.write_word(spec.FILE_POLICY, vocabulary.ADAPTIVE)
            ref = self.reference(thresholds.thresholds, thresholds.history,
                                 dsp.Mode.HAP, thresholds.guard)
            self._follow(ref, itertools.chain(
                held, self._random_samples(steps, seed)), nominal_ns)

    def _follow(self, ref, samples, nominal_ns):
        """Inject ``samples`` (instructions, TLB misses, faults and, if
        given, loads of CR3) one by one: after each, the VM's mode and
        rule are the ``ref`` engine's on the same sample, and its
        ``last_cr3_loads`` the loads given."""
        for step, counts in enumerate(samples):
            self.t.write(self.vm_file(spec.FILE_INJECT),
                         ' '.join(map(str, counts)) + '\n')
            cr3 = counts[3] if len(counts) > 3 else None
            expected = str(ref.step(dsp.Sample.from_counts(*counts[:3]),
                                    nominal_ns, cr3_loads=cr3 or 0))
            got = self.read_word(spec.FILE_MODE)
            stats = self.stats()
            if (got != expected or stats['last_rule'] != ref.last_rule
                    or cr3 not in (None, stats['last_cr3_loads'])):
                raise Failure(
                    'step %d (%s): mode %s rule %d CR3 loads %d, the '
                    'reference engine says %s rule %d' % (
                        step, ' '.join(map(str, counts)), got,
                        stats['last_rule'], stats['last_cr3_loads'],
                        expected, ref.last_rule))

    def check_cr3_loads_priced(self, samples=12):
        """The fourth count of an injected sample is the guest's loads
        of CR3 (version 6), which the engine prices in shadow mode: a
        TLB-bound guest in shadow mode (where Figure 5 keeps it) that
        loads CR3 a million times an interval at 2 us each costs 2 s an
        interval there against 1.2 s of walks in hap mode, so the
        reference engine sends it to hap mode over budget; the VM's must
        do the same, step by step.  Its new set starts a ledger in shadow
        mode with its last switch measured (injected samples measure no
        switch), and with no more credit than the VM had left: a first
        sample without data fills the credit of both engines (25 ms an
        interval for switches at 10 ms)."""
        thresholds = spec.ThresholdSet(
            dsp.Thresholds(10000, 100, 5000000, 100000, 200000, 150000),
            3, 5000, dsp.Guard(4000, 10000000, 10 ** 7, 5000,
                               cr3_cost_ps=2000000))
        insns, tlb, pf, cr3 = 10 ** 10, 3 * 10 ** 8, 0, 10 ** 6
        counts = [(0, 0, 0, 0)] + [(insns, tlb, pf, cr3)] * samples
        with self.preserved():
            self.t.write(spec.param_path(spec.PARAM_INJECT), 'Y\n')
            self.write_word(spec.FILE_POLICY, vocabulary.SHADOW)
            self.t.write(self.vm_file(spec.FILE_THRESHOLDS),
                         thresholds.format())
            self.write_word(spec.FILE_POLICY, vocabulary.ADAPTIVE)
            ref = self.reference(thresholds.thresholds, thresholds.history,
                                 dsp.Mode.SHADOW, thresholds.guard)
            self._follow(ref, counts, thresholds.interval_ms * 10 ** 6)
        if str(ref.mode) != str(dsp.Mode.HAP):
            raise Failure('the reference engine kept the CR3-bound guest '
                          'in shadow mode: the check proves nothing')

    def check_switch_rate_cap(self, samples=200):
        """Whatever the counts say, switches spend credit that accrues at
        budget_ppm of each (nominal) interval, from two switches' worth:
        samples that flip between TLB-bound and fault-bound, which Figure
        5 alone would follow at every one (a window of one), switch at
        most 2 + samples * interval_ms * budget_ppm / switch_cost_ns
        times."""
        guard = dsp.Guard(switch_cost_ns=10 ** 7, budget_ppm=5000)
        thresholds = spec.ThresholdSet(
            dsp.Thresholds(10000, 100, 5000000, 100000, 200000, 150000),
            1, spec.INTERVAL_MS_RANGE[0], guard)
        cap = 2 + (samples * thresholds.interval_ms * 10 ** 6
                   * guard.budget_ppm // dsp.PPM // guard.switch_cost_ns)
        flip = ('%d %d %d\n' % (10 ** 9, 3 * 10 ** 7, 0),      # TLB-bound
                '%d %d %d\n' % (10 ** 9, 10 ** 4, 10 ** 6))    # fault-bound
        with self.preserved():
            self.t.write(spec.param_path(spec.PARAM_INJECT), 'Y\n')
            self.t.write(self.vm_file(spec.FILE_THRESHOLDS),
                         thresholds.format())
            self.write_word(spec.FILE_POLICY, vocabulary.HAP)
            self.write_word(spec.FILE_POLICY, vocabulary.ADAPTIVE)
            before = self.stats()
            for step in range(samples):
                self.t.write(self.vm_file(spec.FILE_INJECT), flip[step % 2])
            after = self.stats()
        made = sum(after[k] - before[k]
                   for k in ('switches_to_hap', 'switches_to_shadow'))
        if not cap // 2 <= made <= cap:
            raise Failure('%d flipping samples made %d switches; the rate '
                          'cap allows %d (and that many are due)'
                          % (samples, made, cap))


CHECKS = [name for name in dir(Suite) if name.startswith('check_')]
HOST_CHECKS = ('check_discovery', 'check_host_thresholds',
               'check_host_thresholds_rejects_bad_values',
               'check_bool_params', 'check_walk_events_param')


def find_vm(transport):
    """A running VM that can run in both modes, or None."""
    for name in sorted(transport.listdir(spec.DEBUGFS_DIR)):
        if not spec.VM_DIR_RE.match(name):
            continue
        rel = '%s/%s/%s' % (spec.DEBUGFS_DIR, name, spec.FILE_POLICY)
        if not transport.exists(rel):
            continue
        policy = transport.read(rel).strip()
        try:
            transport.write(rel, vocabulary.ADAPTIVE + '\n')
        except OSError:
            continue
        transport.write(rel, policy + '\n')
        return name
    return None


def run(transport, vm=None, reference=None):
    """Run every check; return [(check name, None or failure message)]."""
    if vm is None:
        vm = find_vm(transport)
    suite = Suite(transport, vm, reference)
    results = []
    for name in CHECKS:
        if vm is None and name not in HOST_CHECKS:
            results.append((name, 'no running VM that can run in both '
                                  'modes under %s' % spec.DEBUGFS_DIR))
            continue
        try:
            getattr(suite, name)()
        except (Failure, OSError, spec.AbiFormatError) as exc:
            results.append((name, str(exc) or exc.__class__.__name__))
        else:
            results.append((name, None))
    return results
