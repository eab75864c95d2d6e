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

"""The simulated KVM host: VMs running traces behind the switching ABI.

A :class:`SimHost` owns a :class:`nova_adaptive_paging.abi.model.HostModel`
(the reference state machine, the single statement of the ABI's
semantics) and a set of :class:`SimVm`, each of which replays a workload
trace in (optionally accelerated) real time:

* its counters advance at the trace's rates, at the speed of its current
  mode on the hardware profile (see :mod:`.evaluator` for the cost model);
* every ``interval_ms`` of simulated time the in-kernel sampling timer
  runs: the VM's model gets the interval's instructions, TLB misses and
  guest page faults (intercepted ones in shadow mode; the guest's own
  counter, as user space would write it to ``paging_guest_faults``, when
  ``guest_faults`` is on), and the model's DSP engine decides;
* every switch, from the engine or from a write to ``paging_policy`` or
  ``paging_switch``, stalls the VM for the profile's switching cost.

On disk (see :func:`write_layout`) it lays out what the agent reads on a
compute node: libvirt's pid files and a libvirt test-driver node XML
with Nova's instance metadata.  The ABI files are served by
:mod:`.fusefs` under ``<root>/sys``.  Everything here is modeled.
"""

import contextlib
import dataclasses
import os
import threading
import time
import uuid as uuidlib

from nova_adaptive_paging.abi import model
from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import cpu
from nova_adaptive_paging import atomic_file
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging.costmodel import evaluator
from nova_adaptive_paging.simhost import libvirt_xml
from nova_adaptive_paging import vocabulary

# Where the agent (host.vm) looks for libvirt's pid files.
PID_DIR = vmfiles.LIBVIRT_PID_DIR
NODE_XML = 'libvirt/node.xml'
FIRST_PID = 20000
VM_FD = 11


class SimVmModel(model.VmModel):
    """The reference VM model, with switching costs and a clock hook."""

    def __init__(self, host, mode, can_hap, can_shadow, pmu, sim_vm):
        self.sim_vm = sim_vm
        super().__init__(host, mode, can_hap, can_shadow, pmu)

    def switch(self, mode, cost_ns=0):
        if mode == self.mode:
            return False
        vm = self.sim_vm
        vm.advance(self.host.clock())          # the old mode ran until now
        cost_ns = vm.switch_cost_ns(mode)
        vm.stall_ns += cost_ns
        return super().switch(mode, cost_ns)


class SimHostModel(model.HostModel):
    def add_sim_vm(self, name, sim_vm, mode, can_hap, can_shadow, pmu):
        vm = SimVmModel(self, mode, can_hap, can_shadow, pmu, sim_vm)
        self.vms[name] = vm
        return vm


@dataclasses.dataclass
class VmSpec:
    """What Nova would have created: a domain with a flavor."""

    name: str
    trace: object
    extra_specs: dict
    flavor: str = 'm1.sim'
    uuid: str = ''
    memory_mib: int = 1024
    vcpus: int = 1
    can_hap: bool = True
    can_shadow: bool = True
    # The simulated host writes the guest's fault count itself, as user
    # space would (an agent run against it may do so instead: balloon).
    guest_faults: bool = True
    # A virtio-balloon with statistics in the domain XML: libvirt's test
    # driver then reports balloon statistics (a constant fault count).
    balloon: bool = False


class SimVm:
    """One running VM: its trace replay and its model."""

    def __init__(self, host, spec_, pid, start_ns):
        self.host = host
        self.spec = spec_
        self.pid = pid
        self.dirname = '%d-%d' % (pid, VM_FD)
        self.replay = evaluator.Replay(spec_.trace, host.hardware)
        self.domain = libvirt_xml.domain_text(libvirt_xml.domain(spec_))
        self.row, self.off = 0, 0.0
        self.finished = False
        self.stall_ns = 0
        self.maint_s = 0.0                     # the overhead counter
        self.walk_s = 0.0                      # the walk-cycle events'
        self.prev_walk = 0
        self.cr3_loads = 0.0                   # its vCPUs' paging_cr3_loads
        self.prev_cr3 = 0
        self.pid_written = None
        self.finished_at_ns = None
        self.at_ns = start_ns
        self.next_sample_ns = None
        self.prev = (0, 0, 0)
        # A host that cannot use TDP (a stock kernel's shadow pool) runs
        # every guest with shadow paging.
        self.model = host.model.add_sim_vm(
            self.dirname, self,
            vocabulary.HAP if host.model.tdp else vocabulary.SHADOW,
            spec_.can_hap, spec_.can_shadow, True)
        self.model.vcpus = spec_.vcpus
        self.model.memory_mib = spec_.memory_mib
        self.model.sampled_from(start_ns)
        self._schedule(start_ns)

    def _schedule(self, now_ns):
        interval = self.model.effective_thresholds().interval_ms
        self.next_sample_ns = now_ns + interval * 1000000

    def switch_cost_ns(self, mode):
        row = min(self.row, len(self.replay.dur) - 1)
        return int(self.host.hardware.switch_s(
            mode, self.spec.trace.working_set_mib[row]) * 1e9)

    def advance(self, now_ns):
        """Run the trace from the last point to ``now_ns`` (sim time)."""
        budget = (now_ns - self.at_ns) * 1e-9
        self.at_ns = now_ns
        stall = min(self.stall_ns * 1e-9, budget)
        self.stall_ns -= int(stall * 1e9)
        budget -= stall
        dur = self.replay.dur
        mode = self.model.mode
        rate = self.replay.rate[evaluator.MODE_NAMES.index(mode)]
        n = len(dur)
        while budget > 0 and self.row < n:
            r = rate[self.row]
            rem = (dur[self.row] - self.off) * r
            if rem > budget:
                self._overhead(mode, self.row, budget / r)
                self.off += budget / r
                return
            self._overhead(mode, self.row, dur[self.row] - self.off)
            budget -= rem
            self.row += 1
            self.off = 0.0
        if self.row >= n and not self.finished:
            self.finished = True
            self.finished_at_ns = now_ns - int(budget * 1e9)

    def _overhead(self, mode, row, native_s):
        """Charge ``native_s`` of the row to the kernel's shadow
        maintenance and to the PMU's walk-cycle events, at what the
        hardware profile says they count (the model times the kernel's
        counters by mode)."""
        hw, trace = self.host.hardware, self.spec.trace
        share = native_s / trace.interval_s[row]
        if mode == vocabulary.SHADOW:
            self.maint_s += (hw.fault_handling_s() * trace.page_faults[row]
                             * share)
            self.model.stats['shadow_maint_ns'] = int(self.maint_s * 1e9)
            # Every load of CR3 exits with shadow paging (none with TDP).
            self.cr3_loads += trace.cr3_writes[row] * share
        self.walk_s += hw.walk_s(mode) * trace.tlb_misses[row] * share

    def counters(self):
        """Cumulative (instructions, TLB misses, guest faults) so far."""
        r = self.replay
        if self.row >= len(r.dur):
            return tuple(int(c[-1] + 0.5)
                         for c in (r.cum_insns, r.cum_tlb, r.cum_pf))
        f = self.off / r.dur[self.row]
        return tuple(r._at(c, self.row, f)
                     for c in (r.cum_insns, r.cum_tlb, r.cum_pf))

    def run_until(self, now_ns):
        """Take every sample due by ``now_ns``; the model may switch."""
        while self.next_sample_ns <= now_ns and not self.finished:
            at = self.next_sample_ns
            self.advance(at)
            cur = self.counters()
            delta = [c - p for c, p in zip(cur, self.prev)]
            self.prev = cur
            walk = int(self.walk_s * self.host.hardware.clock_hz)
            walk, self.prev_walk = walk - self.prev_walk, walk
            cr3 = int(self.cr3_loads + 0.5)
            cr3, self.prev_cr3 = cr3 - self.prev_cr3, cr3
            self._schedule(at)
            if self.host.model.inject:
                continue            # dsp_inject=Y: the timer does not sample
            if self.spec.guest_faults:
                self.model.write(spec.FILE_GUEST_FAULTS, '%d\n' % cur[2])
            # The timer fired at ``at``, however late this tick handles
            # it: a switch it makes starts there, and the time before it
            # is the old mode's.
            with self.host.model_time(at):
                self.model.timer_sample(delta[0], delta[1], delta[2],
                                        walk, cr3)
        self.advance(now_ns)


class SimHost:
    """A simulated compute node under ``root``."""

    # libvirt's test driver at this URI is one state per process, shared
    # by every connection: what one client starts, another's lifecycle
    # events report (a file's URI gives each connection a copy of its
    # own, read once).
    SHARED_URI = 'test:///default'

    def __init__(self, root, hardware, profile, speed=1.0, clock=None,
                 shared_libvirt=False, tdp=True):
        self.root = os.path.abspath(root)
        # shared_libvirt: the guests are also started and destroyed in
        # the shared test driver, so that an agent in this process sees
        # them come and go by their lifecycle events, as on a compute
        # node.  The driver's own "test" domain is stopped.
        self._libvirt = None
        if shared_libvirt:
            import libvirt
            self._libvirt = libvirt.open(self.SHARED_URI)
            for dom in self._libvirt.listAllDomains(
                    libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
                dom.destroy()
        self.hardware = hardware
        self.speed = float(speed)
        self._t0 = time.monotonic()
        self._clock = clock or self._accelerated
        self._handled_at = None        # sim ns of the timer being handled
        # tdp: the vendor module's npt=/ept= (N: every guest shadowed).
        self.model = SimHostModel(spec.ThresholdSet.from_profile(profile),
                                  self._model_clock, tdp=tdp)
        self.model.tsc_khz = int(hardware.clock_hz // 1000)
        self.vms = {}                  # domain name -> SimVm
        self.gone = {}                 # domain name -> 'stopped'|'migrated'
        self.lock = threading.RLock()
        self._next_pid = FIRST_PID

    def _accelerated(self):
        return int((time.monotonic() - self._t0) * self.speed * 1e9)

    def now_ns(self):
        return self._clock()

    def now_s(self):
        """Modeled seconds: the clock of an agent driving this host."""
        return self.now_ns() / 1e9

    def _model_clock(self):
        if self._handled_at is not None:
            return self._handled_at
        return self.now_ns()

    @contextlib.contextmanager
    def model_time(self, at_ns):
        """The model's clock reads ``at_ns`` inside this block."""
        self._handled_at = at_ns
        try:
            yield
        finally:
            self._handled_at = None

    def tick(self):
        """Take every sample that is due.  A VM's workload is advanced
        lazily: at its samples and before each of its switches."""
        with self.lock:
            now = self.now_ns()
            for vm in self.vms.values():
                if vm.next_sample_ns <= now and not vm.finished:
                    vm.run_until(now)

    def next_due_ns(self):
        with self.lock:
            due = [vm.next_sample_ns for vm in self.vms.values()
                   if not vm.finished]
        return min(due) if due else None

    # -- the VM lifecycle -----------------------------------------------
    def start_vm(self, vm_spec):
        with self.lock:
            if vm_spec.name in self.vms:
                raise ValueError('domain %s is already running'
                                 % vm_spec.name)
            if not vm_spec.uuid:
                vm_spec.uuid = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL,
                                                 'sim:' + vm_spec.name))
            vm = SimVm(self, vm_spec, self._next_pid, self.now_ns())
            self._next_pid += 1
            self.vms[vm_spec.name] = vm
            self.gone.pop(vm_spec.name, None)
            self.write_layout()
            if self._libvirt is not None:
                self._libvirt.createXML(vm.domain.strip(), 0)
            return vm

    def stop_vm(self, name, why='stopped'):
        """Destroy the domain (``why='migrated'``: it left the host)."""
        with self.lock:
            vm = self.vms.pop(name)
            del self.model.vms[vm.dirname]
            self.gone[name] = why
            self.write_layout()
            if self._libvirt is not None:
                self._libvirt.lookupByName(name).destroy()
            return vm

    def reboot_vm(self, name):
        """A guest reboot: the same QEMU, its domain's reboot event."""
        if self._libvirt is not None:
            self._libvirt.lookupByName(name).reboot(0)

    def migrate_vm(self, name):
        return self.stop_vm(name, 'migrated')

    def adopt_vm(self, vm, stall_ns=0):
        """``vm`` (a SimVm another host let go of with migrate_vm())
        arrives here live: its workload goes on where it was, in this
        host's mode, after ``stall_ns`` of modeled migration cost."""
        with self.lock:
            vm.advance(self.now_ns())
            new = self.start_vm(vm.spec)
            new.row, new.off = vm.row, vm.off
            new.finished, new.finished_at_ns = vm.finished, vm.finished_at_ns
            new.prev = new.counters()
            new.stall_ns = vm.stall_ns + int(stall_ns)
            return new

    # -- what user space sees besides the ABI files --------------------
    def write_layout(self):
        """Pid files and the test driver's node XML, written atomically."""
        pid_dir = os.path.join(self.root, PID_DIR)
        os.makedirs(pid_dir, exist_ok=True)
        wanted = {name + '.pid' for name in self.vms}
        for entry in os.listdir(pid_dir):
            if entry.endswith('.pid') and entry not in wanted:
                os.unlink(os.path.join(pid_dir, entry))
        for name, vm in self.vms.items():
            path = os.path.join(pid_dir, name + '.pid')
            if vm.pid_written != path:
                atomic_file.atomic_write(path, '%d\n' % vm.pid)
                vm.pid_written = path
        cpuinfo = cpu.cpuinfo_path(self.root)
        if not os.path.exists(cpuinfo):
            os.makedirs(os.path.dirname(cpuinfo), exist_ok=True)
            # The clock the agent converts hap_walk_cycles with, and a
            # CPU of the hardware profile's generation (cpu-generation).
            mhz = self.hardware.clock_hz / 1e6
            ident = cpu.cpuid_of(self.hardware.generation)
            lines = ['processor\t: 0']
            if ident:
                lines += ['vendor_id\t: %s' % ident[0],
                          'cpu family\t: %d' % ident[1],
                          'model\t\t: %d' % ident[2]]
            lines.append('cpu MHz\t\t: %.3f' % mhz)
            atomic_file.atomic_write(cpuinfo, '\n'.join(lines) + '\n\n')
        xml = libvirt_xml.node_xml([vm.domain for vm in self.vms.values()])
        path = os.path.join(self.root, NODE_XML)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_file.atomic_write(path, xml)

    @property
    def libvirt_uri(self):
        if self._libvirt is not None:
            return self.SHARED_URI
        return 'test://' + os.path.join(self.root, NODE_XML)

    def close(self):
        """Stop the guests this host started in the shared driver."""
        if self._libvirt is not None:
            for name in list(self.vms):
                self.stop_vm(name)
            self._libvirt.close()
            self._libvirt = None

    def status(self):
        """A JSON-able snapshot (modeled figures)."""
        with self.lock:
            vms = {}
            for name, vm in self.vms.items():
                vms[name] = {
                    'dir': vm.dirname, 'pid': vm.pid,
                    'trace': vm.spec.trace.name,
                    'policy': vm.model.policy, 'mode': vm.model.mode,
                    'finished': vm.finished,
                    'progress': vm.row / len(vm.replay.dur),
                    'switches': (vm.model.stats['switches_to_hap']
                                 + vm.model.stats['switches_to_shadow'])}
            return {'modeled': True, 'sim_time_s': self.now_ns() / 1e9,
                    'vms': vms, 'gone': dict(self.gone)}
