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

"""Map a host CPU to the generation key its threshold profile is filed under.

Paging costs (page-walk latency, VM-exit cost, paging-structure caches)
change with the microarchitecture, so thresholds are calibrated per
generation.  A key is ``<vendor>-<generation>`` (``intel-nehalem``,
``intel-icelake-server``, ``amd-zen3``); a CPU this table does not know
maps to the stable key ``<vendor>-<family>-<model>`` (decimal), never to
an error, so a new CPU simply falls back to the default profile until
someone calibrates it.

Sources of truth, in order: the x86 family/model from CPUID (what
``/proc/cpuinfo`` and libvirt's host capabilities report), then the
libvirt CPU model name when the family/model is unknown (a libvirt model
names a feature baseline, not the silicon, so it only breaks ties).
"""

import os
import re

# (family, model) -> generation, for Intel family 6.
_INTEL_FAM6 = {
    0x1a: 'nehalem', 0x1e: 'nehalem', 0x1f: 'nehalem', 0x2e: 'nehalem',
    0x25: 'westmere', 0x2c: 'westmere', 0x2f: 'westmere',
    0x2a: 'sandybridge', 0x2d: 'sandybridge',
    0x3a: 'ivybridge', 0x3e: 'ivybridge',
    0x3c: 'haswell', 0x3f: 'haswell', 0x45: 'haswell', 0x46: 'haswell',
    0x3d: 'broadwell', 0x47: 'broadwell', 0x4f: 'broadwell',
    0x56: 'broadwell',
    0x4e: 'skylake', 0x5e: 'skylake', 0x8e: 'skylake', 0x9e: 'skylake',
    0x55: 'skylake-server',          # also Cascade/Cooper Lake: see below
    0x6a: 'icelake-server', 0x6c: 'icelake-server',
    0x7d: 'icelake', 0x7e: 'icelake',
    0x8c: 'tigerlake', 0x8d: 'tigerlake',
    0x97: 'alderlake', 0x9a: 'alderlake',
    0xb7: 'raptorlake', 0xba: 'raptorlake', 0xbf: 'raptorlake',
    0x8f: 'sapphirerapids-server',
    0xcf: 'emeraldrapids-server',
    0xad: 'graniterapids-server', 0xae: 'graniterapids-server',
    0xaf: 'sierraforest-server',
}

# AMD: family -> [(first model, last model, generation)].
_AMD = {
    0x17: [(0x00, 0x2f, 'zen'), (0x30, 0xff, 'zen2')],
    0x19: [(0x00, 0x0f, 'zen3'), (0x10, 0x1f, 'zen4'),
           (0x20, 0x5f, 'zen3'), (0x60, 0xaf, 'zen4')],
    0x1a: [(0x00, 0xff, 'zen5')],
}

# libvirt CPU model names (cpu_map) -> generation, after dropping the
# -IBRS/-noTSX/-v2... suffixes.
_LIBVIRT = {
    'nehalem': 'intel-nehalem', 'westmere': 'intel-westmere',
    'sandybridge': 'intel-sandybridge', 'ivybridge': 'intel-ivybridge',
    'haswell': 'intel-haswell', 'broadwell': 'intel-broadwell',
    'skylake-client': 'intel-skylake', 'skylake-server':
    'intel-skylake-server', 'cascadelake-server': 'intel-cascadelake-server',
    'cooperlake': 'intel-cooperlake-server',
    'icelake-client': 'intel-icelake', 'icelake-server':
    'intel-icelake-server', 'sapphirerapids': 'intel-sapphirerapids-server',
    'graniterapids': 'intel-graniterapids-server',
    'sierraforest': 'intel-sierraforest-server',
    'epyc': 'amd-zen', 'epyc-rome': 'amd-zen2', 'epyc-milan': 'amd-zen3',
    'epyc-genoa': 'amd-zen4', 'epyc-turin': 'amd-zen5',
}

_VENDORS = {'genuineintel': 'intel', 'intel': 'intel',
            'authenticamd': 'amd', 'amd': 'amd', 'hygongenuine': 'hygon'}

_SUFFIX = re.compile(r'(-(ibrs|notsx|v\d+))+$')


def vendor_key(vendor):
    """'GenuineIntel' / 'Intel' -> 'intel'; unknown vendors are slugged."""
    text = (vendor or 'unknown').strip().lower()
    return _VENDORS.get(text, re.sub(r'[^a-z0-9]+', '', text) or 'unknown')


def _libvirt_generation(model_name):
    if not model_name:
        return None
    return _LIBVIRT.get(_SUFFIX.sub('', model_name.strip().lower()))


def generation_key(vendor, family, model, libvirt_model=None,
                   stepping=None):
    """The generation key of a CPU; never raises for well-typed input.

    ``family`` and ``model`` are the displayed (extended) CPUID values, as
    in /proc/cpuinfo.  ``stepping`` separates Skylake-SP from Cascade Lake
    and Cooper Lake, which share model 0x55.
    """
    vendor = vendor_key(vendor)
    gen = None
    if vendor == 'intel' and family == 6:
        gen = _INTEL_FAM6.get(model)
        if gen == 'skylake-server' and stepping is not None:
            if stepping >= 10:
                gen = 'cooperlake-server'
            elif stepping >= 5:
                gen = 'cascadelake-server'
    elif vendor == 'amd':
        for first, last, name in _AMD.get(family, ()):
            if first <= model <= last:
                gen = name
                break
    if gen is not None:
        return '%s-%s' % (vendor, gen)
    from_libvirt = _libvirt_generation(libvirt_model)
    if from_libvirt and from_libvirt.startswith(vendor + '-'):
        return from_libvirt
    return '%s-%d-%d' % (vendor, family, model)


_VENDOR_IDS = {'intel': 'GenuineIntel', 'amd': 'AuthenticAMD'}


def cpuid_of(key):
    """(vendor_id, family, model) of a CPU that ``generation_key()`` maps
    to ``key`` (the first in the tables), or None; the simulated host
    writes it into its /proc/cpuinfo."""
    vendor, _, gen = (key or '').partition('-')
    if vendor == 'intel':
        for model, name in _INTEL_FAM6.items():
            if name == gen:
                return _VENDOR_IDS[vendor], 6, model
    elif vendor == 'amd':
        for family, ranges in _AMD.items():
            for first, _, name in ranges:
                if name == gen:
                    return _VENDOR_IDS[vendor], family, first
    return None


def parse_cpuinfo(text):
    """(vendor, family, model, stepping) of the first CPU in /proc/cpuinfo."""
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(':')
        fields[key.strip()] = value.strip()
    try:
        return (fields.get('vendor_id', 'unknown'),
                int(fields.get('cpu family', '0')),
                int(fields.get('model', '0')),
                int(fields['stepping']) if 'stepping' in fields else None)
    except ValueError as exc:
        raise ValueError('/proc/cpuinfo: unexpected field value: %s' % exc)


def cpuinfo_path(root='/'):
    """The host's /proc/cpuinfo under ``root`` ([adaptive_paging]
    host_root: a simulated host has its own)."""
    return os.path.join(root, 'proc/cpuinfo')


def host_generation(cpuinfo_path='/proc/cpuinfo', libvirt_model=None):
    """The generation key of the CPU this process runs on."""
    with open(cpuinfo_path, encoding='utf-8') as f:
        vendor, family, model, stepping = parse_cpuinfo(f.read())
    return generation_key(vendor, family, model, libvirt_model, stepping)


def clock_hz(root='/'):
    """The first CPU's clock in cycles per second, from ``cpu MHz`` in
    ``<root>/proc/cpuinfo``; None where it gives none."""
    try:
        with open(cpuinfo_path(root), encoding='utf-8') as f:
            for line in f:
                key, _, value = line.partition(':')
                if key.strip() == 'cpu MHz':
                    hz = float(value) * 1e6
                    return hz if hz > 0 else None
                if not line.strip():
                    break
    except (OSError, ValueError):
        pass
    return None


# The fallback form generation_key() gives a CPU its tables do not know.
_FALLBACK_KEY = re.compile(r'[a-z0-9]+-\d+-\d+')


def named_keys():
    """Every generation key the tables above name."""
    keys = {'intel-%s' % gen for gen in _INTEL_FAM6.values()}
    keys |= {'intel-cascadelake-server', 'intel-cooperlake-server'}
    keys |= {'amd-%s' % gen for ranges in _AMD.values()
             for _, _, gen in ranges}
    return keys | set(_LIBVIRT.values())


def is_generation_key(key):
    """Whether generation_key() can return ``key`` for some CPU: a named
    generation or the ``<vendor>-<family>-<model>`` fallback.  A profile
    filed under anything else would never be selected."""
    return isinstance(key, str) and (key in named_keys()
                                     or bool(_FALLBACK_KEY.fullmatch(key)))
