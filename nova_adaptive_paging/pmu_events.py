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

"""The PMU events that count a guest's page-walk cycles, per CPU
generation.

No generic perf event counts the cycles of data-TLB walks, and the event
that does changes with the generation, so this table, keyed by
:mod:`.cpu`'s generation keys, is the one place that knows them.  The
agent writes the host's pair to kvm's ``dsp_walk_events`` (raw configs:
event select | umask << 8); the kernel then counts two-dimensional walk
cycles in hap mode (``hap_walk_cycles``) and shadow-table walk cycles in
shadow mode (``shadow_walk_cycles``), and the profiler divides them by
the TLB misses.

Source: Intel's perfmon event tables as Linux 6.12 carries them,
``tools/perf/pmu-events/arch/x86/<dir>/virtual-memory.json`` (the
directory is the one ``mapfile.csv`` gives for the family and model),
and AMD's in ``arch/x86/amdzen<n>/memory.json``.  A generation without a
walk-duration event is named in :data:`NO_EVENT` with why, so that
``host capabilities`` and the profiler can say so instead of reporting a
silent zero.
"""

import dataclasses

from nova_adaptive_paging.abi import spec


@dataclasses.dataclass(frozen=True)
class Event:
    name: str
    code: int
    umask: int

    @property
    def config(self):
        """perf's raw config (PERF_TYPE_RAW) on x86."""
        return self.code | self.umask << 8


@dataclasses.dataclass(frozen=True)
class WalkEvents:
    """A generation's walk-cycle events, or why it has none."""
    generation: str
    load: Event = None
    store: Event = None
    source: str = None        # the perf-events directory they come from
    reason: str = None        # set when there is no such event

    @property
    def counted(self):
        return self.load is not None

    def configs(self):
        """{dsp_walk_events key: raw config}, 0 where none."""
        return {key: (ev.config if ev else 0) for key, ev in
                zip(spec.WALK_EVENT_KEYS, (self.load, self.store))}

    def describe(self):
        """One line for ``host capabilities`` and the profiler."""
        if not self.counted:
            return 'none: %s' % self.reason
        return '%s (0x%x) + %s (0x%x), from Linux tools/perf/pmu-events/' \
            'arch/x86/%s' % (self.load.name, self.load.config,
                             self.store.name, self.store.config, self.source)


def _pair(kind, load_code, load_umask, store_code, store_umask, source):
    return (Event('DTLB_LOAD_MISSES.' + kind, load_code, load_umask),
            Event('DTLB_STORE_MISSES.' + kind, store_code, store_umask),
            source)


# Generation (cpu.generation_key() without the vendor) -> (load, store,
# perf-events directory), Intel family 6.
_INTEL = {
    # Westmere names the store event DTLB_MISSES (loads and stores).
    'westmere': (Event('DTLB_LOAD_MISSES.WALK_CYCLES', 0x08, 0x04),
                 Event('DTLB_MISSES.WALK_CYCLES', 0x49, 0x04),
                 'westmereep-dp'),
    'sandybridge': _pair('WALK_DURATION', 0x08, 0x04, 0x49, 0x04,
                         'sandybridge'),
    'ivybridge': _pair('WALK_DURATION', 0x08, 0x84, 0x49, 0x04,
                       'ivybridge'),
    'haswell': _pair('WALK_DURATION', 0x08, 0x10, 0x49, 0x10, 'haswell'),
    'broadwell': _pair('WALK_DURATION', 0x08, 0x10, 0x49, 0x10,
                       'broadwell'),
    'skylake': _pair('WALK_PENDING', 0x08, 0x10, 0x49, 0x10, 'skylake'),
    'skylake-server': _pair('WALK_PENDING', 0x08, 0x10, 0x49, 0x10,
                            'skylakex'),
    'cascadelake-server': _pair('WALK_PENDING', 0x08, 0x10, 0x49, 0x10,
                                'cascadelakex'),
    'cooperlake-server': _pair('WALK_PENDING', 0x08, 0x10, 0x49, 0x10,
                               'cascadelakex'),
    'icelake': _pair('WALK_PENDING', 0x08, 0x10, 0x49, 0x10, 'icelake'),
    'icelake-server': _pair('WALK_PENDING', 0x08, 0x10, 0x49, 0x10,
                            'icelakex'),
    'tigerlake': _pair('WALK_PENDING', 0x08, 0x10, 0x49, 0x10,
                       'tigerlake'),
    'sapphirerapids-server': _pair('WALK_PENDING', 0x12, 0x10, 0x13, 0x10,
                                   'sapphirerapids'),
    'emeraldrapids-server': _pair('WALK_PENDING', 0x12, 0x10, 0x13, 0x10,
                                  'emeraldrapids'),
    'graniterapids-server': _pair('WALK_PENDING', 0x12, 0x10, 0x13, 0x10,
                                  'graniterapids'),
    'sierraforest-server': _pair('WALK_PENDING', 0x08, 0x10, 0x49, 0x10,
                                 'sierraforest'),
}

# Generation key -> why it has no walk-cycle event.
_ZEN_COUNTS = ('counts table walks (ls_tablewalker, event 0x46, '
               'amdzen%d/memory.json), not their cycles')
NO_EVENT = {
    'intel-nehalem': 'counts completed walks (DTLB_LOAD_MISSES.'
                     'WALK_COMPLETED, nehalemep/virtual-memory.json), not '
                     'their cycles',
    'intel-alderlake': 'hybrid: P- and E-cores count walk cycles with '
                       'different events, and a vCPU thread moves between '
                       'them',
    'intel-raptorlake': 'hybrid: P- and E-cores count walk cycles with '
                        'different events, and a vCPU thread moves between '
                        'them',
    'amd-zen': _ZEN_COUNTS % 1,
    'amd-zen2': _ZEN_COUNTS % 2,
    'amd-zen3': _ZEN_COUNTS % 3,
    'amd-zen4': 'has no table-walk event in amdzen4/memory.json',
    'amd-zen5': 'has no table-walk event in amdzen5/memory.json',
}

UNKNOWN = 'not in the table of walk-cycle events (nova_adaptive_paging.' \
    'pmu_events): a generation nobody has looked up'


def walk_events(generation):
    """:class:`WalkEvents` of a generation key; never raises."""
    vendor, _, gen = (generation or '').partition('-')
    if vendor == 'intel' and gen in _INTEL:
        load, store, source = _INTEL[gen]
        return WalkEvents(generation, load, store, source)
    return WalkEvents(generation,
                      reason=NO_EVENT.get(generation, UNKNOWN))
