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

"""Hardware cost profiles: what each event costs in each paging mode.

A profile is a YAML file (format in doc/source/simulation.rst)::

    format_version: 1
    name: nehalem
    description: free text
    event_cost_ns:          # extra cost over native, per event
      hap:    {tlb_miss: 4, page_fault: 0, cr3_write: 0}
      shadow: {tlb_miss: 0, page_fault: 10000, cr3_write: 2000}
    switch_cost_ns:
      to_hap: 100000        # load the EPT pointer, flush
      to_shadow: 1000000    # fixed part of entering shadow mode
      to_shadow_per_mib: 27000   # rebuilding the shadow table on demand
    calibration:
      reference_ips: 2000000000       # instructions per native second
      reference_working_set_mib: 1024
      clock_hz: 3000000000            # optional: cycles per second
    sources: {field: where its number comes from}

All numbers are modeled figures; ``sources`` says which come from a paper
and which are assumptions.
"""

import dataclasses
import functools
import os

import yaml

from nova_adaptive_paging import profiles
from nova_adaptive_paging import costmodel
from nova_adaptive_paging import cpu
from nova_adaptive_paging import dsp
from nova_adaptive_paging import vocabulary

FORMAT_VERSION = 1
MODES = vocabulary.MODES
EVENTS = vocabulary.COST_EVENTS
SWITCHES = ('to_hap', 'to_shadow', 'to_shadow_per_mib')
CALIBRATION = ('reference_ips', 'reference_working_set_mib', 'clock_hz')
# A clock for profiles that name none: only the simulated host's cycle
# counter (hap_walk_cycles) uses it.
DEFAULT_CLOCK_HZ = 3e9
# MODELED: what a TLB miss's walk takes natively (one dimension, the
# paging-structure caches warm), beneath each mode's extra cost.  Only
# the difference between the modes' walks prices anything (the engine,
# the profiler), so its value moves no price; it does move the simulated
# host's walk seconds (both modes'), as a real host's walk events count
# the whole walk; and a walk of the shadow tables takes time: a count of
# 0 is no walk.
NATIVE_WALK_NS = 10.0
TOP = ('format_version', 'name', 'generation', 'description',
       'event_cost_ns', 'switch_cost_ns', 'calibration', 'sources')


class HardwareError(profiles.ProfileError):
    """A malformed hardware profile: names the file, field and problem."""


@dataclasses.dataclass(frozen=True)
class Hardware:
    name: str
    description: str
    event_cost_ns: dict           # mode -> event -> ns
    switch_cost_ns: dict          # SWITCHES -> ns
    reference_ips: float
    reference_working_set_mib: float
    sources: dict
    # The CPU generation key (cpu.py) the costs were measured on, if any.
    generation: str = None
    clock_hz: float = DEFAULT_CLOCK_HZ

    def cost_s(self, mode, event):
        return self.event_cost_ns[mode][event] * 1e-9

    def extra_cost_s(self, mode, event):
        """Seconds ``event`` costs in ``mode`` over the other mode."""
        return (self.cost_s(mode, event)
                - self.cost_s(vocabulary.other_mode(mode), event))

    def fault_handling_s(self):
        """Seconds the kernel's shadow maintenance counts for a guest page
        fault in shadow mode.  MODELED as what a fault costs shadow over
        hap, all of it: the real counter times the handler, without the
        VM exit and entry around it and with work hap mode does too, so
        a real VM's measured price is off by those."""
        return max(self.extra_cost_s(vocabulary.SHADOW,
                                     vocabulary.EVENT_PAGE_FAULT), 0.0)

    def walk_s(self, mode):
        """Seconds a TLB miss's walk takes in ``mode``, as the walk-cycle
        events count it (modeled: the native walk and the mode's extra
        cost)."""
        return (NATIVE_WALK_NS * 1e-9
                + max(self.cost_s(mode, vocabulary.EVENT_TLB_MISS), 0.0))

    def guard(self):
        """The switch guard's prices on this hardware (a dsp.Guard): a
        switch is the dearer direction at the reference working set, and
        one into shadow mode costs its part per MiB for each MiB of the
        VM's memory; a load of CR3 what it costs shadow over hap."""
        return dsp.Guard(
            tlb_cost_ps=max(0, round(self.extra_cost_s(
                vocabulary.HAP, vocabulary.EVENT_TLB_MISS) * 1e12)),
            pf_cost_ps=max(0, round(self.extra_cost_s(
                vocabulary.SHADOW, vocabulary.EVENT_PAGE_FAULT) * 1e12)),
            switch_cost_ns=round(max(
                self.switch_s(m, self.reference_working_set_mib)
                for m in MODES) * 1e9),
            switch_ns_per_gib=round(
                self.switch_cost_ns['to_shadow_per_mib'] * 1024),
            cr3_cost_ps=max(0, round(self.extra_cost_s(
                vocabulary.SHADOW, vocabulary.EVENT_CR3_WRITE) * 1e12)))

    def switch_s(self, to_mode, working_set_mib):
        """Seconds one switch into ``to_mode`` takes (modeled)."""
        s = self.switch_cost_ns
        if to_mode == vocabulary.HAP:
            return s['to_hap'] * 1e-9
        return (s['to_shadow']
                + s['to_shadow_per_mib'] * working_set_mib) * 1e-9


def _number(doc, key, source, where):
    value = doc.get(key) if isinstance(doc, dict) else None
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or value < 0 or value != value or value == float('inf')):
        raise HardwareError(source, where, 'expected a non-negative '
                            'number, got %r' % (value,))
    return float(value)


def _mapping(doc, key, source, allowed):
    value = doc.get(key)
    if not isinstance(value, dict):
        raise HardwareError(source, key, 'expected a mapping with %s'
                            % ', '.join(allowed))
    for k in value:
        if k not in allowed:
            raise HardwareError(source, '%s.%s' % (key, k), 'unknown field')
    return value


def from_dict(doc, source='<hardware>'):
    if not isinstance(doc, dict):
        raise HardwareError(source, '(document)', 'expected a mapping')
    for key in doc:
        if key not in TOP:
            raise HardwareError(source, key, 'unknown field')
    if doc.get('format_version') != FORMAT_VERSION:
        raise HardwareError(source, 'format_version', 'expected %d, got %r'
                            % (FORMAT_VERSION, doc.get('format_version')))
    name = doc.get('name')
    if not isinstance(name, str) or not name:
        raise HardwareError(source, 'name', 'expected a non-empty string')
    generation = doc.get('generation')
    if generation is not None and not cpu.is_generation_key(generation):
        raise HardwareError(source, 'generation', 'expected a CPU '
                            'generation key as "nova-paging cpu-generation" '
                            'prints it, got %r' % (generation,))
    events = _mapping(doc, 'event_cost_ns', source, MODES)
    costs = {}
    for mode in MODES:
        per_mode = events.get(mode)
        where = 'event_cost_ns.%s' % mode
        if not isinstance(per_mode, dict):
            raise HardwareError(source, where, 'expected a mapping with %s'
                                % ', '.join(EVENTS))
        for k in per_mode:
            if k not in EVENTS:
                raise HardwareError(source, '%s.%s' % (where, k),
                                    'unknown field')
        costs[mode] = {e: _number(per_mode, e, source, '%s.%s' % (where, e))
                       for e in EVENTS}
    sw = _mapping(doc, 'switch_cost_ns', source, SWITCHES)
    switch = {k: _number(sw, k, source, 'switch_cost_ns.%s' % k)
              for k in SWITCHES}
    cal = _mapping(doc, 'calibration', source, CALIBRATION)
    ips = _number(cal, 'reference_ips', source, 'calibration.reference_ips')
    if ips <= 0:
        raise HardwareError(source, 'calibration.reference_ips',
                            'must be > 0')
    wss = _number(cal, 'reference_working_set_mib', source,
                  'calibration.reference_working_set_mib')
    clock = DEFAULT_CLOCK_HZ
    if 'clock_hz' in cal:
        clock = _number(cal, 'clock_hz', source, 'calibration.clock_hz')
        if clock <= 0:
            raise HardwareError(source, 'calibration.clock_hz',
                                'must be > 0')
    sources = doc.get('sources', {})
    if not isinstance(sources, dict):
        raise HardwareError(source, 'sources', 'expected a mapping')
    return Hardware(name, str(doc.get('description', '')), costs, switch,
                    ips, wss, {str(k): str(v) for k, v in sources.items()},
                    generation, clock)


def loads(text, source='<hardware>'):
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise HardwareError(source, '(document)', 'not valid YAML: %s' % exc)
    return from_dict(doc, source)


def builtin_names():
    return [p.name[:-len('.yaml')]
            for p in costmodel.data_files('hardware', '.yaml')]


def _builtin(name):
    res = costmodel.data_dir('hardware') / (name + '.yaml')
    return loads(res.read_text(encoding='utf-8'), 'builtin:%s' % name)


@functools.lru_cache(maxsize=None)
def _by_generation():
    # Package data: read once a process, not at every resolve().
    return tuple((_builtin(name).generation, name)
                 for name in builtin_names())


def builtin_generations():
    """CPU generation key -> shipped profile name: the generation key is
    the one name a generation has everywhere (profiles, traits,
    ``--generation``); the file's short name is an alias."""
    return dict(_by_generation())


def generation_key(name):
    """The generation key for ``name``: itself, or the generation of the
    shipped cost profile ``name`` names (``nehalem`` -> ``intel-nehalem``)."""
    if name in builtin_names():
        return _builtin(name).generation
    return name


def resolve(name_or_path):
    """A shipped profile by generation key or short name, or a profile
    file by path."""
    name_or_path = builtin_generations().get(name_or_path, name_or_path)
    if name_or_path in builtin_names():
        return _builtin(name_or_path)
    if not os.path.exists(name_or_path):
        raise HardwareError(name_or_path, '(file)', 'no such file, and not '
                            'a shipped profile (%s)' % ', '.join(
                                '%s or %s' % kv for kv in sorted(
                                    builtin_generations().items())))
    try:
        with open(name_or_path, encoding='utf-8') as f:
            return loads(f.read(), name_or_path)
    except OSError as exc:
        raise HardwareError(name_or_path, '(file)', str(exc))


def for_generation(generation, fallback='nehalem'):
    """The shipped cost profile measured on ``generation``, else
    ``fallback`` (all MODELED)."""
    return resolve(builtin_generations().get(generation, fallback))
