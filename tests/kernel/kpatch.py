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

"""Helpers for tests of the kernel patch series in kvm-patch/patches/."""

import collections
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from nova_adaptive_paging.abi import spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PATCH_DIR = os.path.join(ROOT, 'kvm-patch', 'patches')
SERIES = os.path.join(PATCH_DIR, 'series')
KVM_PATCH = os.path.join(ROOT, 'kvm-patch')
RESULT = re.compile(r'^NAP-RESULT (\S+) (\S+) (PASS|FAIL|SKIP) (\d+) (\d+)')


class GuestRun(collections.namedtuple('GuestRun', 'rc out err')):
    """How kvm-patch/<machine>/run.sh ended: its exit status, the guest's
    NAP- report (stdout) and run.sh's own account (stderr: how the
    emulator ended and, if the guest did not finish, the tail of the
    console log and of the emulator's output and log)."""

    @property
    def report(self):
        """Both, for an assertion message: a dead emulator says why."""
        return '%s\n--- run.sh exited %d; its stderr:\n%s' % (
            self.out, self.rc, self.err)


class Guest(object):
    """kvm-patch/<machine>/run.sh (tcg or bochs) booting the built series
    in the background, so that both emulated hosts run at once (each
    emulator keeps one core busy).  A Guest started ``after`` another
    boots once that one's run.sh has ended, on the core it frees."""

    def __init__(self, machine, *args, name=None, after=None):
        self.name = name or machine
        self._argv = [os.path.join(KVM_PATCH, machine, 'run.sh')] + list(args)
        self._out = tempfile.TemporaryFile(mode='w+')
        self._err = tempfile.TemporaryFile(mode='w+')
        self._proc = None
        self._run = None
        self._cancelled = threading.Event()
        self._starter = threading.Thread(target=self._start, args=(after,))
        self._starter.start()

    def _start(self, after):
        if after is not None:
            after._starter.join()
            if after._proc is not None:
                after._proc.wait()
        if not self._cancelled.is_set():
            # A session of its own: stop() ends the emulator run.sh
            # started.
            self._proc = subprocess.Popen(
                self._argv, stdin=subprocess.DEVNULL, stdout=self._out,
                stderr=self._err, text=True, start_new_session=True)

    def wait(self):
        """The GuestRun, once run.sh has ended."""
        if self._run is None:
            self._starter.join()
            rc = self._proc.wait()
            self._out.seek(0)
            self._err.seek(0)
            self._run = GuestRun(rc, self._out.read(), self._err.read())
            # The CI log keeps how long each emulator ran.
            sys.stderr.write('[%s] %s' % (self.name, self._run.err))
        return self._run

    def cancel(self):
        """Do not boot if not booted yet (stop() then has nothing to end)."""
        self._cancelled.set()

    def stop(self):
        self.cancel()
        self._starter.join()
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            self._proc.wait()


PinnedLinux = collections.namedtuple('PinnedLinux',
                                     'debian_version kver kabi headers')


def pinned_linux():
    """The kernel the series is tested against, as kvm-patch/lib.sh
    resolves it (kvm-patch/linux-version, or NAP_LINUX_DEBIAN_VERSION:
    tox -e kvm-newest): the Debian package version, the kernel version,
    Debian's ABI name and the headers package."""
    out = subprocess.run(
        ['bash', '-c', '. "$1" && echo "$LINUX_DEBIAN_VERSION" "$KVER" '
         '"$KABI" "$LINUX_HEADERS_PACKAGE"', '-',
         os.path.join(KVM_PATCH, 'lib.sh')],
        check=True, stdout=subprocess.PIPE, text=True).stdout
    return PinnedLinux(*out.split())


def cache(environ=None):
    """The kernel cache kvm-patch/lib.sh resolves in ENVIRON (default: this
    process's environment): NAP_CACHE, else the gate's."""
    return subprocess.run(
        ['bash', '-c', '. "$1" && echo "$CACHE"', '-',
         os.path.join(KVM_PATCH, 'lib.sh')], check=True,
        env=os.environ if environ is None else environ,
        stdout=subprocess.PIPE, text=True).stdout.strip()


def gate_cache():
    """The cache of the gate's build (lib.sh's default)."""
    return cache({k: v for k, v in os.environ.items() if k != 'NAP_CACHE'})


def build_series(variant='test', mutation=None):
    """kvm-patch/build.sh: the series applied, kernel, modules and static
    selftests built for VARIANT (ccache and objects under the cache); with
    MUTATION, that file of kvm-patch/mutations/ applied after it."""
    subprocess.run([os.path.join(KVM_PATCH, 'build.sh'), '--variant',
                    variant, '--selftests'] +
                   (['--mutation', mutation] if mutation else []),
                   check=True)


def run_guest(machine, *args):
    """Boot the built series with kvm-patch/<machine>/run.sh and wait."""
    return Guest(machine, *args).wait()


def guest_selftests():
    """The upstream selftests the test guest runs (GUEST_SELFTESTS of
    kvm-patch/lib.sh), in order."""
    with open(os.path.join(KVM_PATCH, 'lib.sh')) as f:
        m = re.search(r'^GUEST_SELFTESTS="([^"]*)"', f.read(), re.M)
    return m.group(1).split()


def assert_access_matrix(out, report):
    """paging_switch_access_test passed: 18,432 accesses in each of hap,
    shadow and switching, none differing from the architecture's rules:
    at CPL0 64 PTEs x 4 PDEs x CR0.WP, SMEP, SMAP, EFER.NXE x read, write,
    fetch (12,288), at CPL3 the same with SMEP and SMAP set together
    (6,144)."""
    assert re.search(r'^NAP-RESULT access paging_switch_access_test PASS',
                     out, re.M), report
    counts = re.findall(r'(hap|shadow|switching) (\d+) accesses \((\d+) at '
                        r'CPL3\) (\d+) mismatches', out)
    assert sorted((mode, int(n), int(user), int(bad))
                  for mode, n, user, bad in counts) == [
        ('hap', 18432, 6144, 0), ('shadow', 18432, 6144, 0),
        ('switching', 18432, 6144, 0)], report
    assert 'smep on smap on' in out, report


def assert_cr0_by_the_guest(out, report, cycles=100):
    """paging_switch_cr0_test's second half ran: the guest cleared and set
    CR0.PG with its own MOV to CR0 CYCLES times, a third of them with the
    VM in shadow mode throughout and the others with the VM switched
    while paging was off, each vCPU running with TDP while paging was off
    and in the VM's mode after (its paging_shadow statistic)."""
    assert re.search(r"^NAP-OUT cr0: %d cycles of paging off and on by the "
                     r"guest's MOV to CR0, %d of them across a switch, each "
                     r"vCPU's mode checked$" % (cycles, cycles - cycles // 3),
                     out, re.M), report


def assert_remap(out, report, replacements=4096, log_changes=16):
    """paging_switch_remap_test passed: two vCPUs read every page fresh
    after the host replaced it, while the VM flipped between shadow and
    hap every 16 replacements (each way once per 32) and dirty logging
    changed every 256 (the test's schedule; log_changes=0 when the run
    left dirty logging out)."""
    assert re.search(r'^NAP-RESULT remap paging_switch_remap_test PASS',
                     out, re.M), report
    flips = replacements // 32
    assert re.search(r'^NAP-OUT remap: %d pages replaced under 2 vCPUs: '
                     r'%d switches to shadow, %d to hap, [1-9]\d* rounds, '
                     r'dirty logging turned on or off %d times$'
                     % (replacements, flips, flips, log_changes), out,
                     re.M), report


def assert_abi(out, report, run='abi'):
    """paging_switch_abi_test passed (in @run: abi through debugfs,
    abi-lockdown through the VM fd), with its checks of a VM ruled out
    of shadow paging after its policy was set (PKU on its vCPU; the
    vendor's nested-virtualization bit on a vCPU added later and under
    the adaptive policy): each back at hap before its vCPU ran again."""
    assert re.search(r'^NAP-RESULT %s paging_switch_abi_test PASS' % run,
                     out, re.M), report
    late = re.findall(r'^NAP-OUT %s: ok \d+ EOPNOTSUPP after the fact: '
                      r'(PKU|SVM|VMX) set on (its|a new) vCPU under policy '
                      r'(shadow|adaptive) brings the VM back to hap$' % run,
                      out, re.M)
    assert len(late) == 3, report


def assert_lockdown(out, report):
    """With the kernel locked down (integrity) at the end of the run,
    paging_switch_abi_test passed again with every per-VM file reached
    through KVM_PAGING_SWITCH_IO, and saw debugfs refuse the writable
    files while paging_stats stayed readable; the ioctl's own checks
    (its errors, a short buffer, the same text as debugfs, a caller with
    another mm, a VM without a debugfs directory of its own) passed
    before the lockdown too."""
    assert re.search(r'^NAP-LOCKDOWN .*\[integrity\]', out, re.M), report
    assert re.search(r'^NAP-RESULT abi-lockdown paging_switch_abi_test '
                     r'PASS', out, re.M), report
    assert re.search(r'^NAP-OUT abi-lockdown: # per-VM files through '
                     r'KVM_PAGING_SWITCH_IO$', out, re.M), report
    assert re.search(r'^NAP-OUT abi-lockdown: # lockdown: debugfs refuses '
                     r'the writable files', out, re.M), report
    for run in ('abi', 'abi-lockdown'):
        assert re.search(r'^NAP-OUT %s: ok \d+ KVM_PAGING_SWITCH_IO: ' % run,
                         out, re.M), report
        # A VM whose debugfs name an earlier VM of its process holds.
        assert re.search(r'^NAP-OUT %s: ok \d+ a second VM on a taken '
                         r'<pid>-<fd> name' % run, out, re.M), report


def assert_cost(out, report):
    """paging_switch_cost_test passed: a VM of 4 vCPUs at hap ran no
    sampler in 5 intervals and its vCPUs got no PDP table (before the
    PDP table was allocated on first use and the sampler could idle,
    4-5 sampler runs and 8 PDP tables, two per vCPU, on both vendors),
    while dsp_pmu_all, adaptive and shadow were sampled
    and back at hap the sampler stopped once the rmaps had gone."""
    assert re.search(r'^NAP-RESULT cost paging_switch_cost_test PASS', out,
                     re.M), report
    assert re.search(r'^NAP-OUT cost: hap: no sampler run in 5 intervals, '
                     r'no PDP table for 4 vCPUs$', out, re.M), report
    # Its time at hap, in its binary stats, rose by the time between two
    # reads (CLOCK_MONOTONIC around each): before kvm_arch_sync_vm_stats()
    # it stood at what the VM had at its last switch (0 ns in 209 ms).
    assert re.search(r'^NAP-OUT cost: hap: its time at hap runs with the '
                     r'clock in its binary stats, not sampled$', out,
                     re.M), report


def assert_cost_without_tdp(out, report):
    """paging_switch_cost_test passed on a host whose vendor module was
    loaded without TDP (guest/init nap.tdp_off): a VM of 4 vCPUs, in
    shadow mode as every VM there is, ran no sampler in 5 intervals, and
    was sampled while dsp_pmu_all was set (before, a sampler ran every
    interval for the VM's life)."""
    assert re.search(r'^NAP-RESULT notdp paging_switch_cost_test PASS', out,
                     re.M), report
    assert re.search(r'^NAP-OUT notdp: no TDP: no sampler run in 5 '
                     r'intervals; sampled while the host profiles$', out,
                     re.M), report


def assert_pae(out, report, held):
    """paging_switch_pae_test passed: a 32-bit PAE guest whose PDPT was
    changed without a CR3 load read the same word at hap and in shadow
    mode after the switch, through the PDPTEs the CPU held (@held: VMX,
    where they are the VMCS's; an earlier build re-read memory)
    or through memory's (SVM with NPT), and its first switch allocated
    one PDP table."""
    assert re.search(r'^NAP-RESULT pae paging_switch_pae_test PASS', out,
                     re.M), report
    word, source = (('0x11111111', "the CPU's") if held else
                    ('0x22222222', "memory's"))
    assert re.search(r'^NAP-OUT pae: PDPT changed without a CR3 load: %s at '
                     r'hap and in shadow mode \(%s PDPTEs; reserved bit 5 '
                     r'set by the emulator in \d\); 1 PDP table allocated '
                     r'by its first switch$' % (word, source), out, re.M), \
        report


def assert_walk(out, report):
    """paging_switch_walk_test passed: with the VM back at hap, a vCPU
    still in shadow mode loaded a shadow root (KVM_PRE_FAULT_MEMORY: a
    root load without the switch request's check), and the other vCPU's
    page walk, with TDP, wrote the PML4E that root write-protected, in 3
    rounds.  Each write fault was retried after the root was zapped, not
    emulated, and the store at the PML4E's page offset landed in the data
    page.  With neither the retry nor the emulator's own translation
    (EMULTYPE_PF_GUEST_WALK) the store went into PML4E 0 in the first
    round, on both emulators; with the translation alone it was emulated."""
    assert re.search(r'^NAP-RESULT walk paging_switch_walk_test PASS', out,
                     re.M), report
    assert re.search(r'^NAP-OUT walk: mixed mode, 3 rounds: vCPU 1 loaded '
                     r'[1-9]\d* shadow page\(s\) while the VM was at hap; '
                     r'vCPU 0\'s page walks wrote the PML4E they '
                     r'write-protected, [1-9]\d* shadow page\(s\) zapped, '
                     r'no store emulated, each in the data page$', out,
                     re.M), \
        report


def assert_cpuid(out, report):
    """paging_switch_cpuid_test passed: the CPUID a VM got from TDP
    (1 GiB pages, the host's MAXPHYADDR) is served the same in shadow
    mode: a guest's 1 GiB page with 4 MiB of memory in it read and
    written, a GPA at the highest bit below MAXPHYADDR an MMIO exit, a
    PTE with bit MAXPHYADDR set a reserved-bit #PF, at hap, in shadow
    mode and at hap again."""
    assert re.search(r'^NAP-RESULT cpuid paging_switch_cpuid_test PASS', out,
                     re.M), report
    assert re.search(r'^NAP-OUT cpuid: CPUID kept: a 1 GiB page, MMIO at '
                     r'GPA bit (\d+) and reserved PTE bit (\d+) \(MAXPHYADDR '
                     r'\2\), the same at hap, in shadow mode and at hap '
                     r'again$', out, re.M), report


def assert_nested_svm(out, report):
    """paging_switch_nested_test passed on SVM (kvm_amd nested=1, VMs
    without SVM in their CPUID): EFER.SVME set by the host took a VM in
    shadow mode back to hap and shadow paging was refused from then on,
    and its guest's VMRUN ended in VMEXIT_INVALID (6.12 checks vmcb12's
    EFER against the vCPU's CPUID); a vCPU put in guest mode by the host
    before it followed its VM back to hap ran L2 in shadow mode and
    switched on its return to L1, with no kernel warning; and a vCPU added
    to an L1 hypervisor (SVM in its CPUID) whose L2 ran on nested NPT left
    KVM's shadow pages of nested NPT alone."""
    assert re.search(r'^NAP-RESULT nested paging_switch_nested_test PASS',
                     out, re.M), report
    assert re.search(r"^NAP-OUT nested: ok 1 hotadd: an added vCPU left "
                     r"L1's [1-9]\d* nested-NPT shadow pages$", out,
                     re.M), report
    assert re.search(r'^NAP-OUT nested: ok 2 svme: EFER\.SVME from the host '
                     r'ends shadow paging; VMRUN refused \(VMEXIT_INVALID',
                     out, re.M), report
    assert re.search(r'^NAP-OUT nested: ok 3 guest-mode: L2 keeps its '
                     r"vCPU's mode, L1 switches on its return$", out,
                     re.M), report


def assert_nested_vmx(out, report):
    """paging_switch_nested_test passed on VMX (kvm_intel nested=1):
    without VMX in its CPUID a vCPU gets neither CR4.VMXE nor a VMXON
    region from the host, and its VM keeps running in shadow mode."""
    assert re.search(r'^NAP-RESULT nested paging_switch_nested_test PASS',
                     out, re.M), report
    assert re.search(r'^NAP-OUT nested: ok 1 vmx: no VMX in CPUID, no VMX '
                     r'operation, still switching$', out, re.M), report


def assert_noncoherent_refused(out, report):
    """A VM in shadow mode given a device that does DMA without snooping
    (faked, guest/fakes: as VFIO reports one) went back to hap with a hap
    policy, and a later adaptive policy was refused: two refusals, the
    revocation and the write."""
    assert re.search(r'^NAP-NONCOHERENT before=shadow policy=hap mode=hap '
                     r'adaptive=EOPNOTSUPP refused=2$', out, re.M), report


def assert_hyperv_refused(out, report):
    """With Hyper-V's nested features faked (guest/fakes: the one
    thing that cannot exist here), the vendor module installs Hyper-V's
    enlightened remote TLB flush and KVM offers no switching (in an
    earlier build paging_switch_supported was Y there, on both vendors);
    loaded again without the fake, it switches."""
    assert re.search(r'^NAP-HYPERV paging_switch_supported=N .*no paging '
                     r'switch with Hyper-V', out, re.M), report
    assert re.search(r'^NAP-HYPERV after paging_switch_supported=Y$', out,
                     re.M), report


# The 4 KiB rmaps of one of paging_mode_test's 512 MiB memslots: one
# 8-byte rmap head (struct kvm_rmap_head) per page.
MODE_SLOT_RMAP_BYTES = (512 << 20) // 4096 * 8

# The rmaps of paging_switch_memcg_test's four 512 MiB memslots: one
# 8-byte rmap head per 4 KiB page (struct kvm_rmap_head), the 2 MiB and
# 1 GiB levels left out.
MEMCG_RMAP_BYTES = 4 * (512 << 20) // 4096 * 8


def assert_mode(out, report):
    """paging_mode_test passed: part 1's control, KVM_SET_PAGING_MODE,
    changed vCPU 0's mode six times, each change seen in the vCPU's
    binary statistics (paging_shadow, paging_switches) exactly where the
    test asked for one: none for a request for the mode the VM was in or
    for a second request for TDP (which gives the rmaps back), one for a
    request from a forked process, and the last when a vCPU added with
    PKU took the VM back to TDP, after which shadow paging was refused."""
    assert re.search(r'^NAP-RESULT mode paging_mode_test PASS', out,
                     re.M), report
    assert re.search(r'^NAP-OUT mode: 6 switches of vCPU 0, every one where '
                     r'it was asked$', out, re.M), report
    # A switch that ran out of the VM's memory cgroup part-way through
    # the rmaps of its six 512 MiB memslots: it gave them back, leaving
    # less than 1.5 memslots' rmaps charged (the write tracking of the
    # three it reached, 768 KiB, and a CPU's charge stock, 256 KiB; before
    # the partial free their rmaps stayed too: 3,928,064 bytes under TCG);
    # with room, the same switch charged at least what the six memslots'
    # rmaps alone take.
    failed = re.search(r'^NAP-OUT mode: a switch out of memory part-way: '
                       r'ENOMEM, (-?\d+) bytes left charged; with room, the '
                       r'switch charged (\d+) bytes$', out, re.M)
    assert failed, report
    assert int(failed.group(1)) < MODE_SLOT_RMAP_BYTES * 3 // 2, report
    assert int(failed.group(2)) >= 6 * MODE_SLOT_RMAP_BYTES, report


def assert_avic_refused(out, report):
    """kvm_amd loaded with AVIC forced on (no emulator has AVIC; the
    refusal needs none): no switching offered (paging_switch_supported=N,
    no KVM_CAP_PAGING_MODE), KVM_SET_PAGING_MODE refused for either mode
    and the vCPU run at NPT without a switch; loaded again without it,
    the host switches."""
    assert re.search(r'^NAP-AVIC avic=Y paging_switch_supported=N$', out,
                     re.M), report
    assert re.search(r'^NAP-RESULT avic paging_mode_test PASS', out,
                     re.M), report
    assert re.search(r'^NAP-OUT avic: no switch offered, none made$', out,
                     re.M), report
    assert re.search(r'^NAP-AVIC after paging_switch_supported=Y$', out,
                     re.M), report


def assert_memcg(out, report):
    """paging_switch_memcg_test passed: the VM's cgroup paid for the rmaps
    of a switch that another process asked for (the test's own bounds:
    at least 3/4 of them to the VM's, less than 1/4 to the writer's);
    back at hap, they were given back once the vCPU had left shadow
    paging (a second vCPU, halted in shadow mode, included), not
    within the second the VM may switch back in, and allocated
    again by the next switch to shadow paging."""
    assert re.search(r'^NAP-RESULT memcg paging_switch_memcg_test PASS',
                     out, re.M), report
    back = re.search(r'^NAP-OUT memcg: back at hap: cgroup vm shrank '
                     r'(-?\d+) bytes after (\d+) samples, (\d+) ms after '
                     r'the switch \(none while the vCPU held shadow '
                     r'pages, a halted one included\), and grew (-?\d+) '
                     r'bytes on the next switch '
                     r'to shadow paging$', out, re.M)
    assert back, report
    assert int(back.group(1)) >= MEMCG_RMAP_BYTES * 3 // 4, report
    assert int(back.group(3)) >= 1000, report
    assert int(back.group(4)) >= MEMCG_RMAP_BYTES * 3 // 4, report


def assert_pmu(out, report):
    """paging_switch_pmu_test passed: the kernel asked for perf events
    (a kprobe counted) only for the vCPU threads of an adaptive VM, or of
    any VM while dsp_pmu_all was set, and for at least the two events the
    interface document names as required (instructions and data-TLB load
    misses) per vCPU, plus one for each walk-cycle event dsp_walk_events
    names."""
    assert re.search(r'^NAP-RESULT pmu paging_switch_pmu_test PASS', out,
                     re.M), report
    asked = re.search(r'^NAP-OUT pmu: perf events asked for: (\d+) per vCPU '
                      r'under adaptive or dsp_pmu_all \(plus each walk '
                      r'event named\), none at hap, in shadow mode or '
                      r'without a vCPU thread$', out, re.M)
    assert asked and int(asked.group(1)) >= 2, report


def assert_linux_guest(out, report, modes, rounds, cpus='0-1'):
    """The Linux guest OS (guest/linux-init: Debian's kernel) booted by
    QEMU/KVM in the emulated host came up, ran its workload and rebooted
    back in each of MODES: two boots of one QEMU process, each with CPUS
    online, each copying 2 x ROUNDS times with every byte intact, piping
    16 MiB whose sum hashlib gives here, forking and context switching,
    without a warning from its kernel; its VM stayed in hap ("hap") or
    shadow mode ("shadow"), or went both ways under injected samples
    ("adaptive") and under the flips ("storm")."""
    # md5 of `yes | head -c 16777216` ("y\n" repeated), computed here.
    yes = hashlib.md5(b'y\n' * (16777216 // 2)).hexdigest()
    for mode in modes:
        assert re.search(r'^NAP-RESULT linux-%s linux-guest PASS' % mode,
                         out, re.M), report
        ups = re.findall(r'^NAP-LINUX %s up boot=(\S+) cpus=(\S+)$' % mode,
                         out, re.M)
        assert len(ups) == 2 and ups[0][0] != ups[1][0], report
        assert [c for _, c in ups] == [cpus, cpus], report
        sums = re.findall(r'^NAP-LINUX %s sums yes=(\w+) copies=(\d+) '
                          r'bad=(\d+)$' % mode, out, re.M)
        copies = str(rounds * len(cpus.split('-')))
        assert sums == [(yes, copies, '0')] * 2, report
        for forks, ctxt in re.findall(r'^NAP-LINUX %s counts forks=(\d+) '
                                      r'ctxt=(\d+)$' % mode, out, re.M):
            # 16 execs and 2 dd per round on each vCPU.
            assert int(forks) >= 18 * int(copies), report
            assert int(ctxt) >= int(forks), report
        # Mitigation notices that say "WARNING" about the CPU model
        # (TCG's EPYC, Bochs's Skylake-X), not kernel warnings.
        warnings = [line for line in re.findall(
            r'^NAP-LINUX %s dmesg (.*)$' % mode, out, re.M)
            if 'Speculative Return Stack Overflow' not in line and
            'RETBleed: WARNING: Spectre v2 mitigation leaves CPU' not in line]
        assert not warnings, report
        stats = re.search(r'^NAP-LINUX %s stats (.*)$' % mode, out, re.M)
        assert stats, report
        # paging_stats with its lines joined: one "key value" pair a line.
        words = stats.group(1).split()
        stats = spec.parse_stats('\n'.join(
            '%s %s' % pair for pair in zip(words[::2], words[1::2])))
        to_shadow = stats['switches_to_shadow']
        to_hap = stats['switches_to_hap']
        if mode == 'hap':
            assert (stats['mode'], to_shadow, to_hap) == ('hap', 0, 0), \
                report
        elif mode == 'shadow':
            assert (stats['mode'], to_shadow, to_hap) == ('shadow', 1, 0), \
                report
        else:
            assert to_shadow >= 2 and to_hap >= 2, report
        if mode == 'adaptive':
            assert stats['pf_source'] == 'inject', report


def skipped(results):
    """The (mode, test) pairs that reported SKIP: a skip is no pass."""
    return [(mode, test) for mode, test, verdict, _, _ in results
            if verdict == 'SKIP']


def results(out):
    """(mode, test, PASS|FAIL|SKIP, rc, seconds) of each NAP-RESULT line."""
    return [RESULT.match(line).groups() for line in out.splitlines()
            if RESULT.match(line)]


def series():
    """The patch files of the series, in order, as absolute paths."""
    with open(SERIES) as f:
        names = [line.strip() for line in f]
    return [os.path.join(PATCH_DIR, name) for name in names
            if name and not name.startswith('#')]


def patches_touching(path):
    """The patches of the series that create or change ``path``."""
    marker = 'diff --git a/%s b/%s\n' % (path, path)
    found = []
    for patch in series():
        with open(patch) as f:
            if marker in f.read():
                found.append(patch)
    return found


def extract(paths, dest):
    """Write ``paths`` as the series leaves them, under ``dest``.

    Applies every patch of the series in order with ``git apply``, limited
    to ``paths``, to an empty directory: the files must be created by the
    series (they are new files, not edits of upstream ones), and what is
    compiled is exactly what the series adds.
    """
    git = shutil.which('git')
    if git is None:
        raise RuntimeError('git is needed to apply the patch series')
    dest = os.path.abspath(dest)
    os.makedirs(dest, exist_ok=True)
    # Never let git find a repository above dest: apply as plain patch(1).
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=os.path.dirname(dest))
    for patch in series():
        cmd = [git, 'apply']
        cmd += ['--include=%s' % p for p in paths]
        cmd += ['--exclude=*', patch]
        subprocess.run(cmd, cwd=dest, env=env, check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    missing = [p for p in paths if not os.path.exists(os.path.join(dest, p))]
    if missing:
        raise RuntimeError('the series does not create %s' % missing)
    return [os.path.join(dest, p) for p in paths]
