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

"""Reference model of the switching interface: what each read and write does.

A pure-Python statement of the spec's state machine, with no files and no
time of its own.  The simulated host serves it under a root directory; the
conformance suite is tested against it; the kernel patch implements the
same behaviour in C.  Errors are raised as ``OSError(errno, message)``,
the way a failing write(2) on the real files reports them.
"""

import errno
import os

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import dsp
from nova_adaptive_paging import vocabulary


def _fail(code, message):
    raise OSError(code, '%s: %s' % (os.strerror(code), message))


# A host that names no clock: 3 GHz.
DEFAULT_TSC_KHZ = 3000000


class HostModel:
    """Host-wide parameters of one (simulated or reference) host.
    ``text_interface`` False: a kernel with the series' part 1 alone,
    whose one control is ``KVM_SET_PAGING_MODE`` (:meth:`set_mode`),
    with none of the interface's parameters or per-VM files and no
    in-kernel engine."""

    def __init__(self, thresholds, clock, vendor='kvm_amd', tdp=True,
                 text_interface=True):
        self.thresholds = thresholds      # spec.ThresholdSet
        self.inject = False
        self.pmu_all = False
        self.walk_events = dict.fromkeys(spec.WALK_EVENT_KEYS, 0)
        self.clock = clock                # () -> monotonic nanoseconds
        self.vms = {}                     # "<pid>-<fd>" -> VmModel
        self.vendor = vendor              # kvm_amd or kvm_intel
        self.tdp = tdp                    # its npt= / ept= parameter
        self.text_interface = text_interface
        # The cycle counter's rate, which turns walk cycles into time (the
        # kernel's tsc_khz).
        self.tsc_khz = DEFAULT_TSC_KHZ

    def read_param(self, name):
        if not self.text_interface and name != spec.PARAM_TDP_MMU:
            _fail(errno.ENOENT, name)   # part 1 adds no parameter
        if name == spec.PARAM_ABI:
            return '%d\n' % spec.ABI_VERSION
        if name == spec.PARAM_THRESHOLDS:
            return self.thresholds.format()
        if name == spec.PARAM_INJECT:
            return spec.format_bool(self.inject)
        if name == spec.PARAM_PMU_ALL:
            return spec.format_bool(self.pmu_all)
        if name == spec.PARAM_WALK_EVENTS:
            return spec.format_walk_events(self.walk_events)
        if name == spec.PARAM_TDP_MMU:
            return 'Y\n'
        if name == spec.PARAM_SWITCH_SUPPORTED:
            return spec.format_bool(self.tdp)
        _fail(errno.ENOENT, name)

    def write_param(self, name, text):
        try:
            if name == spec.PARAM_THRESHOLDS:
                self.thresholds = spec.ThresholdSet.parse(text)
                for vm in self.vms.values():
                    vm.host_thresholds_changed()
            elif name == spec.PARAM_INJECT:
                self.inject = spec.parse_bool(text)
            elif name == spec.PARAM_PMU_ALL:
                self.pmu_all = spec.parse_bool(text)
            elif name == spec.PARAM_WALK_EVENTS:
                self.walk_events = spec.parse_walk_events(text)
            else:
                _fail(spec.EPERM, '%s is read-only' % name)
        except spec.AbiFormatError as exc:
            _fail(spec.EINVAL, '%s: %s' % (name, exc))

    # -- the same read/write/listdir/exists interface as a root directory --
    def _resolve(self, rel):
        parts = rel.strip('/').split('/')
        params = spec.PARAMS_DIR.split('/')
        debugfs = spec.DEBUGFS_DIR.split('/')
        if parts[:-1] == params:
            return 'param', parts[-1]
        if (parts[:-1] == spec.vendor_params_dir(self.vendor).split('/')
                and parts[-1] == self._tdp_param()):
            return 'vendor', parts[-1]
        if parts[:len(debugfs)] == debugfs and len(parts) == len(debugfs) + 2:
            vm = self.vms.get(parts[-2])
            if (vm is not None and parts[-1] in spec.VM_FILES
                    and self.text_interface):
                return vm, parts[-1]
        _fail(errno.ENOENT, rel)

    def _tdp_param(self):
        return dict(spec.VENDOR_TDP_PARAMS)[self.vendor]

    def read(self, rel):
        where, name = self._resolve(rel)
        if where == 'param':
            return self.read_param(name)
        if where == 'vendor':
            return 'Y\n' if self.tdp else 'N\n'
        return where.read(name)

    def write(self, rel, text):
        where, name = self._resolve(rel)
        if where == 'param':
            return self.write_param(name, text)
        if where == 'vendor':
            _fail(spec.EPERM, '%s is read-only' % name)
        return where.write(name, text)

    def set_mode(self, vm, mode):
        """``KVM_SET_PAGING_MODE``: the VM runs in ``mode`` under that
        fixed mode.  With the text interface that is the write of the mode
        to the VM's policy (``kvm_paging_switch_set_mode()``); without it,
        the same switch, with no engine to hand the VM to."""
        if not self.paging_mode_cap():
            _fail(spec.EOPNOTSUPP, 'no switching on this host')
        if vm not in self.vms:
            _fail(errno.ENOENT, vm)
        if mode not in spec.KVM_PAGING_MODE:
            _fail(spec.EINVAL, mode)
        return self.vms[vm].write(spec.FILE_POLICY, mode + '\n')

    def paging_mode_cap(self):
        """``KVM_CHECK_EXTENSION(KVM_CAP_PAGING_MODE)``: the kernel
        switches on this host (a TDP host; the model has no AVIC)."""
        return self.tdp

    def vcpus_in_shadow(self, vm):
        """``(vCPUs in shadow mode, vCPUs)`` as their ``paging_shadow``
        statistics say: the VM's mode, but for those whose guest has
        paging off, which run at TDP."""
        if vm not in self.vms:
            _fail(errno.ENOENT, vm)
        model = self.vms[vm]
        on = model.vcpus - model.vcpus_paging_off
        return (on if model.mode == vocabulary.SHADOW else 0, model.vcpus)

    def listdir(self, rel):
        if rel.strip('/') == spec.DEBUGFS_DIR:
            return list(self.vms)
        if rel.strip('/') == spec.PARAMS_DIR and not self.text_interface:
            return [spec.PARAM_TDP_MMU]
        if rel.strip('/') == spec.PARAMS_DIR:
            return [spec.PARAM_ABI, spec.PARAM_THRESHOLDS, spec.PARAM_INJECT,
                    spec.PARAM_PMU_ALL, spec.PARAM_WALK_EVENTS,
                    spec.PARAM_TDP_MMU, spec.PARAM_SWITCH_SUPPORTED]
        if rel.strip('/') == spec.vendor_params_dir(self.vendor):
            return [self._tdp_param()]
        _fail(errno.ENOENT, rel)

    def exists(self, rel):
        try:
            self._resolve(rel)
        except OSError:
            return False
        return True

    def add_vm(self, name, mode=None, can_hap=None, can_shadow=True,
               pmu=True):
        """A new VM; by default in the mode and with the hap ability the
        vendor module's parameter gives new VMs."""
        if can_hap is None:
            can_hap = self.tdp
        if mode is None:
            mode = vocabulary.HAP if self.tdp else vocabulary.SHADOW
        vm = VmModel(self, mode, can_hap, can_shadow, pmu)
        self.vms[name] = vm
        return vm


class VmModel:
    """One VM's per-VM files and the in-kernel DSP engine behind them."""

    def __init__(self, host, mode, can_hap, can_shadow, pmu):
        self.host = host
        self.can = {vocabulary.HAP: can_hap,
                    vocabulary.SHADOW: can_shadow}
        self.pmu = pmu                    # the host can count for it
        self._counting = False            # its counters are open
        self.policy = mode
        self.mode = mode
        self.override = None
        self.stats = {key: 0 for key in spec.STATS_KEYS}
        self.stats.update(abi_version=spec.ABI_VERSION,
                          pf_source=spec.PF_SOURCE_NONE)
        self._mode_since = host.clock()
        self._user_faults = None          # last cumulative value written
        self._user_delta = 0              # saturates at U64_MAX
        self._user_back = False           # the fed total went back
        self.vcpus = 1
        self.vcpus_paging_off = 0         # run at TDP whatever the mode
        self._switched = False            # switched between two samples
        self._walking = False             # walk events were named
        self._sampled_at = host.clock()   # the timer's last sample
        self._switching_at = 0            # time_switching_ns then
        self._maint_at = 0                # shadow_maint_ns then
        self.memory_mib = 0               # its memslots, for the guard
        self._holds_rmaps = False         # what shadow paging allocated
        self._hap_since = host.clock()
        self.engine = None
        self.engine = self._new_engine()

    def sampled_from(self, at_ns):
        """Where the timer's first interval starts, when it is not the
        clock's now (the simulated host starts VMs at modeled times)."""
        self._sampled_at = at_ns

    # -- helpers ---------------------------------------------------------
    def effective_thresholds(self):
        return self.override or self.host.thresholds

    def _new_engine(self):
        """An engine for the effective set, with no more credit than the
        engine it replaces had left (a VM's first has its own)."""
        t = self.effective_thresholds()
        engine = dsp.Engine(t.thresholds, t.history,
                            dsp.Mode.parse(self.mode), t.guard)
        if self.engine is not None:
            engine.keep_credit(self.engine.credit)
        return engine

    def host_thresholds_changed(self):
        if self.override is None:
            self.engine = self._new_engine()

    def _account(self):
        now = self.host.clock()
        self.stats['time_%s_ns' % self.mode] += now - self._mode_since
        self._mode_since = now

    def switch(self, mode, cost_ns=0):
        """Change the running mode; a no-op when already there."""
        if mode == self.mode:
            return False
        self._account()
        self.mode = mode
        if mode == vocabulary.SHADOW:
            self._holds_rmaps = True
        else:
            self._hap_since = self.host.clock()
        self._switched = True
        self.stats['switches_to_%s' % mode] += 1
        self.stats['time_switching_ns'] += cost_ns
        self.engine.reset(dsp.Mode.parse(mode))
        return True

    def forbid_shadow(self):
        """The VM became unable to run in shadow mode after its policy was
        set (a vCPU's CPUID, SEV init; section 8): back in hap mode with a
        hap policy, for good."""
        if not self.can[vocabulary.SHADOW]:
            return
        self.can[vocabulary.SHADOW] = False
        self.switch(vocabulary.HAP)
        if self.policy != vocabulary.HAP:
            self.policy = vocabulary.HAP
            self.stats['switches_refused'] += 1

    # -- the files -------------------------------------------------------
    def read(self, name):
        if name == spec.FILE_POLICY:
            return self.policy + '\n'
        if name == spec.FILE_MODE:
            return self.mode + '\n'
        if name == spec.FILE_THRESHOLDS:
            return spec.format_vm_thresholds(self.effective_thresholds(),
                                             self.override is not None)
        if name == spec.FILE_STATS:
            self._account()
            self.stats.update(policy=self.policy, mode=self.mode)
            return spec.format_stats(self.stats)
        _fail(spec.EPERM, '%s is write-only' % name)

    def write(self, name, text):
        try:
            handler = {
                spec.FILE_POLICY: self._write_policy,
                spec.FILE_SWITCH: self._write_switch,
                spec.FILE_THRESHOLDS: self._write_thresholds,
                spec.FILE_GUEST_FAULTS: self._write_guest_faults,
                spec.FILE_INJECT: self._write_inject,
            }.get(name)
            if handler is None:
                _fail(spec.EPERM, '%s is read-only' % name)
            handler(text)
        except spec.AbiFormatError as exc:
            _fail(spec.EINVAL, '%s: %s' % (name, exc))

    def _write_policy(self, text):
        policy = spec.parse_word(text, spec.POLICIES)
        needed = spec.MODES if policy == vocabulary.ADAPTIVE else (policy,)
        for mode in needed:
            if not self.can[mode]:
                self.stats['switches_refused'] += 1
                _fail(spec.EOPNOTSUPP, 'this VM cannot run in %s mode'
                      % mode)
        self.policy = policy
        if policy == vocabulary.ADAPTIVE:
            self.engine.reset(dsp.Mode.parse(self.mode))
            # Switches made under another policy are not the engine's.
            self._switching_at = self.stats['time_switching_ns']
        else:
            self.switch(policy)

    def _write_switch(self, text):
        mode = spec.parse_word(text, spec.MODES)
        if self.policy != vocabulary.ADAPTIVE:
            _fail(spec.EPERM, 'forced switches need policy adaptive, the '
                  'policy is %s' % self.policy)
        self.switch(mode)

    def _write_thresholds(self, text):
        if text.strip() == 'default':
            self.override = None
        else:
            self.override = spec.ThresholdSet.parse(text)
        self.engine = self._new_engine()

    def _write_guest_faults(self, text):
        total = spec.parse_u64(text)
        if self._user_faults is not None:
            # A smaller total (the guest's counter restarted, or a guest
            # that lies) makes this interval's count unknown.
            if total < self._user_faults:
                self._user_back = True
            else:
                self._user_delta = min(
                    self._user_delta + total - self._user_faults,
                    dsp.U64_MAX)
        self._user_faults = total

    def _write_inject(self, text):
        insns, tlb, faults, cr3 = spec.parse_inject(text)
        if not self.host.inject:
            _fail(spec.EPERM, 'counter injection is off (%s=N)'
                  % spec.PARAM_INJECT)
        # An injected sample is one nominal interval long.
        self.sample(insns, tlb, faults, pf_source=spec.PF_SOURCE_INJECT,
                    elapsed_ns=dsp.U64_MAX, cr3_loads=cr3)

    # -- the sampling timer ------------------------------------------------
    def guest_faults(self, intercepted, elapsed_ns):
        """This interval's guest page faults and where they came from.

        User space's counter wins when it has been fed (it counts the same
        way in both modes): none if it went back, at most one fault per
        GUEST_FAULT_MIN_NS of each vCPU; otherwise the intercepted #PF
        count, if the VM was in shadow mode for the whole interval;
        otherwise nothing.
        """
        if self._user_faults is not None:
            bound = elapsed_ns // spec.GUEST_FAULT_MIN_NS * self.vcpus
            delta, back = self._user_delta, self._user_back
            self._user_delta, self._user_back = 0, False
            if back or delta > bound:
                self.stats['guest_faults_clamped'] += 1
            if back:
                return None, spec.PF_SOURCE_NONE
            return min(delta, bound), 'user'
        if (self.mode == vocabulary.SHADOW and not self._switched
                and intercepted is not None):
            return intercepted, 'intercept'
        return None, spec.PF_SOURCE_NONE

    def wants_counters(self):
        """Whether the VM's perf events should be open: they take hardware
        counters from the guest's own PMU, so only while its engine
        decides on them, or on a host that profiles every VM."""
        return self.policy == vocabulary.ADAPTIVE or self.host.pmu_all

    def wants_sampler(self):
        """Whether the interval timer samples this VM (section 5): while
        its policy is adaptive or shadow, it runs in shadow mode or holds
        what shadow paging allocated, or the host profiles every VM; a VM
        kept at hap by its policy is not sampled, nor is any VM of a host
        whose VMs cannot switch unless the host profiles every VM."""
        if not self.host.tdp:
            return self.wants_counters()
        return (self.policy != vocabulary.HAP or self.wants_counters()
                or self.mode == vocabulary.SHADOW or self._holds_rmaps)

    def _give_back_rmaps(self, now):
        # At hap for as long as the engine needs to decide, and at least
        # a second: the kernel then frees what shadow paging allocated.
        t = self.effective_thresholds()
        keep = max(10 ** 9, t.history * t.interval_ms * 10 ** 6)
        if self.mode == vocabulary.HAP and now - self._hap_since >= keep:
            self._holds_rmaps = False

    def timer_sample(self, instructions, tlb_misses, intercepted,
                     walk_cycles=0, cr3_loads=0):
        """The interval timer: one sample from the guest's counters.

        ``instructions``, ``tlb_misses`` and ``walk_cycles`` (what the
        walk events count, in either mode) are what the guest ran this
        interval; they count only if the VM's counters were open for all
        of it, the walk cycles only if ``dsp_walk_events`` named an event
        then, and toward the mode of an interval without a switch.
        ``cr3_loads`` are the guest's loads of CR3 that exited in it (its
        vCPUs' ``paging_cr3_loads``): those it made with shadow paging.  After
        the sample the timer opens or closes them for the next interval
        (section 5).  Returns the mode the engine switched
        to, or None; a VM the timer does not sample (wants_sampler())
        takes nothing.  A switch the engine makes here starts the next
        interval, so unlike a switch between two samples it does not void
        that interval's count.
        """
        if not self.wants_sampler():
            return None
        now = self.host.clock()
        elapsed = max(now - self._sampled_at, 0)     # a monotonic clock
        faults, source = self.guest_faults(intercepted, elapsed)
        counted = self._counting
        self.stats['pmu'] = int(counted)
        self.stats['walk_pmu'] = int(counted and self._walking)
        walk_ns = 0
        if self.stats['walk_pmu'] and not self._switched:
            self.stats['%s_walk_cycles' % self.mode] += walk_cycles
            walk_ns = walk_cycles * 10 ** 6 // self.host.tsc_khz
        if not counted:
            instructions = tlb_misses = None
        switched = self.sample(instructions, tlb_misses, faults, source,
                               elapsed, walk_ns, cr3_loads)
        self._sampled_at = now
        self._switched = False
        self._counting = self.pmu and self.wants_counters()
        self._walking = any(self.host.walk_events.values())
        self._give_back_rmaps(now)
        return switched

    def sample(self, instructions, tlb_misses, page_faults, pf_source,
               elapsed_ns=0, walk_ns=0, cr3_loads=0):
        """One interval; return the mode the engine switched to, or None.

        ``instructions`` and ``tlb_misses`` are None without a PMU.  The
        guard's clock is ``elapsed_ns``, at most the nominal interval, so
        extra samples do not mint switch credit.  The engine also gets
        what the VM's switches took since the last sample, the time its
        vCPUs spent handling shadow page faults (``shadow_maint_ns``)
        and walking page tables (``walk_ns``), and the VM's memory; an
        injected sample's took none of them: it is the test's.  The
        guest's loads of CR3 that exited (``cr3_loads``) are counted like
        its faults: an injected sample's are the test's (version 6).
        """
        injected = pf_source == spec.PF_SOURCE_INJECT
        switching = self.stats['time_switching_ns']
        maint = self.stats['shadow_maint_ns']
        took = 0 if injected else max(switching - self._switching_at, 0)
        maint_ns = 0 if injected else max(maint - self._maint_at, 0)
        self._switching_at, self._maint_at = switching, maint
        s = dsp.Sample.from_counts(instructions, tlb_misses, page_faults)
        self.stats.update(
            samples=self.stats['samples'] + 1, pf_source=pf_source,
            last_instructions=instructions or 0,
            last_tlb_misses=tlb_misses or 0,
            last_page_faults=page_faults or 0,
            last_ftlb=s.ftlb, last_fpf=s.fpf, last_pt=s.pt,
            last_cr3_loads=cr3_loads)
        if self.policy != vocabulary.ADAPTIVE:
            return None
        nominal = self.effective_thresholds().interval_ms * 10 ** 6
        target = str(self.engine.step(s, min(elapsed_ns, nominal), took,
                                      self.memory_mib, maint_ns, walk_ns,
                                      cr3_loads))
        self.stats.update(last_rule=int(self.engine.last_rule),
                          last_htlb=self.engine.last_htlb,
                          last_hpt=self.engine.last_hpt)
        return target if self.switch(target) else None
