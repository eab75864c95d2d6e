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

"""The host switching interface, version 6: names, formats, error codes.

The normative text is ``kvm-patch/Documentation/paging-switch-abi.rst``;
this module is its machine-readable half, used by the agent, the
reference model, the simulated host and the conformance suite.  Text
formats are parsed and printed here and nowhere else.
"""

import errno
import re
import struct

from nova_adaptive_paging import dsp
from nova_adaptive_paging import exception
from nova_adaptive_paging import vocabulary

ABI_VERSION = 6

# Host-wide, under <root>/sys/module/kvm/parameters/.
PARAMS_DIR = 'sys/module/kvm/parameters'
PARAM_ABI = 'paging_switch_abi'
PARAM_THRESHOLDS = 'dsp_thresholds'
PARAM_INJECT = 'dsp_inject'
# Perf events on every VM, not only adaptive ones (profiling hosts).
PARAM_PMU_ALL = 'dsp_pmu_all'
# The raw PMU configs that count page-walk cycles (nova_adaptive_paging.
# pmu_events picks them per CPU generation): "load=<u64> store=<u64>".
PARAM_WALK_EVENTS = 'dsp_walk_events'
WALK_EVENT_KEYS = ('load', 'store')
WALK_CONFIG_MAX = 2 ** 32 - 1
# The bool parameters: what the kernel reads back, and what it takes.
BOOL_WORDS = {'Y': True, 'N': False, 'y': True, 'n': False,
              '1': True, '0': False}

# The vendor modules' switch for two-dimensional paging: unchanged by the
# patch, read by user space to know whether hap is possible at all.
VENDOR_TDP_PARAMS = (('kvm_amd', 'npt'), ('kvm_intel', 'ept'))
# kvm's (upstream, read-only) TDP MMU switch under PARAMS_DIR: the series
# switches only with the TDP MMU.
PARAM_TDP_MMU = 'tdp_mmu'
# Whether the kernel lets VMs on this host switch (read-only, Y/N; earlier
# builds of the series lack it): N where TDP or the TDP MMU is off, and where
# KVM runs on Hyper-V with its enlightened TLB flush.
PARAM_SWITCH_SUPPORTED = 'paging_switch_supported'


def param_path(name):
    """A kvm parameter's file, relative to the host root."""
    return '%s/%s' % (PARAMS_DIR, name)


def vm_path(vm, name):
    """A VM's file (``vm`` is its ``<pid>-<fd>`` name), relative to the
    host root."""
    return '%s/%s/%s' % (DEBUGFS_DIR, vm, name)


def vendor_params_dir(module):
    return 'sys/module/%s/parameters' % module


# Per VM, under <root>/sys/kernel/debug/kvm/<pid>-<fd>/.
DEBUGFS_DIR = 'sys/kernel/debug/kvm'
VM_DIR_RE = re.compile(r'^(?P<pid>\d+)-(?P<fd>\d+)$')
FILE_POLICY = 'paging_policy'
FILE_MODE = 'paging_mode'
FILE_SWITCH = 'paging_switch'
FILE_THRESHOLDS = 'paging_thresholds'
FILE_GUEST_FAULTS = 'paging_guest_faults'
FILE_INJECT = 'paging_inject'
FILE_STATS = 'paging_stats'
VM_FILES = (FILE_POLICY, FILE_MODE, FILE_SWITCH, FILE_THRESHOLDS,
            FILE_GUEST_FAULTS, FILE_INJECT, FILE_STATS)

# The same per-VM files through the VM file descriptor (version 2), which a
# kernel in lockdown leaves open: KVM_PAGING_SWITCH_IO takes struct
# kvm_paging_switch_io {char name[32]; u32 flags; u32 size; u64 data;}.
VM_FD_LINK = 'anon_inode:kvm-vm'    # readlink of a VM fd in /proc
IO_STRUCT = struct.Struct('=32sIIQ')
IO_NAME_MAX = 31                    # name[32], NUL-terminated
IO_WRITE = 1 << 0
IO_READ_MAX = 4096                  # a file's text fits in a page
_IOC_READ_WRITE, _KVMIO = 3, 0xAE
KVM_PAGING_SWITCH_IO = ((_IOC_READ_WRITE << 30) | (IO_STRUCT.size << 16)
                        | (_KVMIO << 8) | 0xf0)

# The mechanism's own control (the series' part 1), which a kernel without
# the text interface has too: KVM_SET_PAGING_MODE takes struct
# kvm_paging_mode {u32 mode; u32 flags;}.  On a kernel with the text
# interface it is a write of the mode to the VM's paging_policy.
MODE_STRUCT = struct.Struct('=II')
KVM_PAGING_MODE = {vocabulary.HAP: 0, vocabulary.SHADOW: 1}
_IOC_WRITE = 1
KVM_SET_PAGING_MODE = ((_IOC_WRITE << 30) | (MODE_STRUCT.size << 16)
                       | (_KVMIO << 8) | 0xf1)
KVM_CAP_PAGING_MODE = 1001
# KVM_CHECK_EXTENSION on /dev/kvm: whether the kernel has that control
# (a kernel with part 1 alone has no paging_switch_abi to read).
KVM_DEV = 'dev/kvm'
KVM_CHECK_EXTENSION = (_KVMIO << 8) | 0x03

POLICIES = vocabulary.POLICIES
MODES = vocabulary.MODES
# Where a sample's page faults came from; none: the sample had no data.
PF_SOURCE_NONE = 'none'
PF_SOURCE_INJECT = 'inject'
PF_SOURCES = (PF_SOURCE_NONE, 'user', 'intercept', PF_SOURCE_INJECT)

INTERVAL_MS_RANGE = (100, 3600 * 1000)
# A guest page fault takes a vCPU at least this long: a fed count beyond
# it in an interval is cut there (and counted in guest_faults_clamped).
GUEST_FAULT_MIN_NS = 100
# Version 2's keys, all required; version 3 adds the switch guard's, which
# default to dsp.Guard()'s (no per-event costs: the guard caps the rate),
# version 4 its price of a switch into shadow per GiB of the VM, and
# version 6 its price of a guest load of CR3 in shadow mode.
REQUIRED_THRESHOLD_KEYS = dsp.Thresholds.FIELDS + ('history', 'interval_ms')
THRESHOLD_KEYS = REQUIRED_THRESHOLD_KEYS + dsp.Guard.FIELDS

# paging_stats keys, in the order the kernel prints them.
STATS_KEYS = (
    'abi_version', 'policy', 'mode', 'pmu', 'pf_source',
    'switches_to_hap', 'switches_to_shadow', 'switches_refused',
    'time_hap_ns', 'time_shadow_ns', 'time_switching_ns',
    'shadow_maint_ns', 'hap_walk_cycles',
    'samples', 'last_rule',
    'last_instructions', 'last_tlb_misses', 'last_page_faults',
    'last_ftlb', 'last_fpf', 'last_pt', 'last_htlb', 'last_hpt',
    'guest_faults_clamped', 'shadow_walk_cycles', 'walk_pmu',
    # Version 6: the loads of CR3 the last sample gave the engine.
    'last_cr3_loads',
)
STATS_WORDS = {'policy': POLICIES, 'mode': MODES, 'pf_source': PF_SOURCES}

# The counters among them, also KVM binary statistics of the VM
# (KVM_GET_STATS_FD) under these names.
BINARY_STATS_PREFIX = 'paging_'
BINARY_STATS = tuple(
    BINARY_STATS_PREFIX + key
    for key in STATS_KEYS[STATS_KEYS.index('switches_to_hap'):
                          STATS_KEYS.index('samples') + 1])
# Each vCPU's own binary statistics (KVM_GET_STATS_FD on the vCPU): whether
# it runs with shadow paging now (a boolean; paging_mode is only where the
# VM's vCPUs are to go), how many times its mode changed, and the time it
# spent maintaining shadow pages (the VM's shadow_maint_ns is their sum);
# version 6: the guest's loads of CR3 that exited while it ran with shadow
# paging (each one does; with TDP none).
VCPU_BINARY_STATS = (BINARY_STATS_PREFIX + 'shadow',
                     BINARY_STATS_PREFIX + 'switches',
                     BINARY_STATS_PREFIX + 'maint_ns',
                     BINARY_STATS_PREFIX + 'cr3_loads')
# Each vCPU's paging_shadow statistic (part 1's): where a vCPU runs, the
# one mode a kernel without the text interface shows (in debugfs, as the
# sum over the VM's vCPUs; KVM answers a vCPU's KVM_GET_STATS_FD only to
# the VM's own process).
VCPU_STAT_SHADOW = VCPU_BINARY_STATS[0]

# Errors a write returns (as the errno of write(2)).
EINVAL = errno.EINVAL          # unparsable or out-of-range value
EPERM = errno.EPERM            # operation not allowed in the current state
EOPNOTSUPP = errno.EOPNOTSUPP  # this VM cannot run in the requested mode


class AbiFormatError(exception.Error, ValueError):
    """Text that does not follow the ABI's format (the kernel's EINVAL)."""


def parse_u64(text):
    word = text.strip()
    if not re.fullmatch(r'\d{1,20}', word) or int(word) > dsp.U64_MAX:
        raise AbiFormatError('expected a decimal u64, got %r' % (text,))
    return int(word)


def parse_bool(text):
    word = text.strip()
    if word not in BOOL_WORDS:
        raise AbiFormatError('expected Y or N, got %r' % (text,))
    return BOOL_WORDS[word]


def format_bool(value):
    return 'Y\n' if value else 'N\n'


def parse_word(text, allowed):
    word = text.strip()
    if word not in allowed:
        raise AbiFormatError('expected one of %s, got %r'
                             % ('|'.join(allowed), text))
    return word


def parse_pairs(text, keys, required):
    """'key=u64 ...' in any order -> {key: int}: each of ``keys`` at
    most once, every one of ``required``."""
    pairs = {}
    for item in text.split():
        key, sep, value = item.partition('=')
        if not sep or key not in keys:
            raise AbiFormatError('unknown item %r; expected %s' % (
                item, ' '.join(k + '=N' for k in keys)))
        if key in pairs:
            raise AbiFormatError('%s given twice' % key)
        pairs[key] = parse_u64(value)
    missing = [k for k in required if k not in pairs]
    if missing:
        raise AbiFormatError('missing %s' % ', '.join(missing))
    return pairs


def parse_walk_events(text):
    """dsp_walk_events text -> {load: config, store: config}."""
    pairs = parse_pairs(text, WALK_EVENT_KEYS, WALK_EVENT_KEYS)
    for key, value in pairs.items():
        if value > WALK_CONFIG_MAX:
            raise AbiFormatError('%s=%d: a raw config is at most %d'
                                 % (key, value, WALK_CONFIG_MAX))
    return pairs


def format_walk_events(configs):
    return ' '.join('%s=%d' % (k, configs[k]) for k in WALK_EVENT_KEYS) \
        + '\n'


class ThresholdSet:
    """The six thresholds, history length, interval and switch guard, as
    one value.

    Written as one line of ``key=value`` pairs with every key of
    REQUIRED_THRESHOLD_KEYS and any of the guard's, read back with every
    key of THRESHOLD_KEYS, so that a set is replaced atomically and can
    never be observed half-updated (for example with a lower bound above
    its upper bound).
    """

    def __init__(self, thresholds, history, interval_ms, guard=None):
        if not 1 <= history <= dsp.HISTORY_MAX:
            raise AbiFormatError('history must be in [1, %d], got %d'
                                 % (dsp.HISTORY_MAX, history))
        if not INTERVAL_MS_RANGE[0] <= interval_ms <= INTERVAL_MS_RANGE[1]:
            raise AbiFormatError('interval_ms must be in [%d, %d], got %d'
                                 % (INTERVAL_MS_RANGE + (interval_ms,)))
        self.thresholds = thresholds
        self.history = history
        self.interval_ms = interval_ms
        self.guard = guard if guard is not None else dsp.Guard()

    @classmethod
    def from_profile(cls, profile):
        return cls(profile.thresholds, profile.history_samples,
                   profile.interval_s * 1000, profile.guard)

    @classmethod
    def parse(cls, text):
        pairs = parse_pairs(text, THRESHOLD_KEYS, REQUIRED_THRESHOLD_KEYS)
        try:
            thresholds = dsp.Thresholds(
                **{k: pairs[k] for k in dsp.Thresholds.FIELDS})
            guard = dsp.Guard(**{k: pairs[k] for k in dsp.Guard.FIELDS
                                 if k in pairs})
        except ValueError as exc:
            raise AbiFormatError(str(exc))
        return cls(thresholds, pairs['history'], pairs['interval_ms'],
                   guard)

    def format(self):
        values = self.thresholds.as_tuple() + (
            self.history, self.interval_ms) + self.guard.as_tuple()
        return ' '.join('%s=%d' % kv
                        for kv in zip(THRESHOLD_KEYS, values)) + '\n'

    def __eq__(self, other):
        return (isinstance(other, ThresholdSet)
                and self.format() == other.format())

    def __repr__(self):
        return 'ThresholdSet(%s)' % self.format().strip()


def parse_vm_thresholds(text):
    """A read of paging_thresholds -> (ThresholdSet, override: bool)."""
    items = text.split()
    flag = items.pop() if items else ''
    if flag not in ('override=0', 'override=1'):
        raise AbiFormatError('expected the set followed by override=0 or '
                             'override=1, got %r' % (text,))
    return ThresholdSet.parse(' '.join(items)), flag == 'override=1'


def format_vm_thresholds(thresholds, override):
    """What a read of paging_thresholds returns."""
    return '%s override=%d\n' % (thresholds.format().rstrip('\n'),
                                 override)


def parse_stats(text):
    """paging_stats text -> dict; words stay str, numbers become int.
    Keys after the last one this version knows are skipped: a kernel
    adds keys at the end without changing the interface version."""
    stats = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, _, value = line.partition(' ')
        if key not in STATS_KEYS:
            if len(stats) == len(STATS_KEYS):
                continue
            raise AbiFormatError('line %d: unknown key %r' % (lineno, key))
        if key in STATS_WORDS:
            stats[key] = parse_word(value, STATS_WORDS[key])
        else:
            stats[key] = parse_u64(value)
    missing = [k for k in STATS_KEYS if k not in stats]
    if missing:
        raise AbiFormatError('missing %s' % ', '.join(missing))
    return stats


def format_stats(stats):
    return ''.join('%s %s\n' % (key, stats[key]) for key in STATS_KEYS)


def parse_inject(text):
    """'instructions tlb_misses page_faults [cr3_loads]' -> four u64
    (version 6 added the loads of CR3, 0 when not given)."""
    words = text.split()
    if len(words) not in (3, 4):
        raise AbiFormatError('expected "instructions tlb_misses '
                             'page_faults [cr3_loads]", got %r' % (text,))
    return tuple(parse_u64(w) for w in words + ['0'] * (4 - len(words)))
