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

"""Threshold profiles: the DSP thresholds calibrated for one CPU generation.

A profile is a YAML file (format documented in doc/source/profiles.rst)::

    format_version: 1
    generation: intel-nehalem
    thresholds:            # in the paper's units, at most 3 decimals
      tlb_upper: 10        # TLB misses per 1000 instructions
      tlb_lower: 0.1
      pf_upper: 5000       # page faults per 1000 instructions, x 10^7
      pf_lower: 100
      pt_upper: 200        # P-to-T: pf units / tlb units
      pt_lower: 150
    history_samples: 3
    interval_s: 5
    provenance:
      method: paper        # paper | calibrated | profiled | manual
      source: free text
      obtained: 2011-03-09
      hosts: 1
      samples: 12

Loading never half-applies: :class:`ProfileError` names the file, the field
and the problem, and the caller keeps whatever profile it had before.
"""

import dataclasses
import datetime
import decimal
import glob
import importlib.resources
import os
import re

import yaml

from nova_adaptive_paging import dsp
from nova_adaptive_paging import exception


FORMAT_VERSION = 1
FALLBACK_GENERATION = 'intel-nehalem'
METHODS = ('paper', 'calibrated', 'profiled', 'manual')
INTERVAL_RANGE = (1, 3600)
# Profile and generation names.  Matched whole (fullmatch, as Nova matches
# an extra spec's pattern): '$' alone would let a trailing newline in.
NAME_PATTERN = r'[a-z0-9][a-z0-9._-]{0,62}'
NAME_RE = re.compile(NAME_PATTERN)

_MILLI = decimal.Decimal(1000)


class ProfileError(exception.Error, ValueError):
    """A threshold profile is malformed; the message says where and why."""

    def __init__(self, source, field, problem):
        self.source, self.field, self.problem = source, field, problem
        self.kept = False       # set by ProfileSet.reload
        super().__init__('%s: %s: %s' % (source, field, problem))

    def left_out(self, echo=True):
        """The line a reload reports: the problem and what applies.
        ``echo=False`` for a file that may not be the operator's (the
        agent's profile directories): the line names the file and the
        field but repeats nothing the file holds, neither a value nor an
        unknown field's name, so a link to a secret leaks none of it."""
        text = str(self)
        if not echo:
            field = ('(an unknown field)' if self.problem == 'unknown field'
                     else self.field)
            problem = self.problem.split(', got ')[0]
            # YAML quotes what it found; a range check, the values.
            problem = re.sub(r"'[^'<][^']*'", '(not shown)',
                             re.sub(r'\s*\([^)]*\)', '', problem))
            text = '%s: %s: %s' % (self.source, field, problem)
        return '%s; left out%s' % (text, ', its last good version stays '
                                   'in force' if self.kept else '')


@dataclasses.dataclass(frozen=True)
class Provenance:
    method: str
    source: str = ''
    obtained: str = ''
    hosts: int = 0
    samples: int = 0


@dataclasses.dataclass(frozen=True)
class Profile:
    generation: str
    thresholds: dsp.Thresholds
    history_samples: int
    interval_s: int
    provenance: Provenance
    # The switch guard's prices; a profile written before them has none,
    # keeps its thresholds' meaning and gets only the rate cap.
    guard: dsp.Guard = dsp.Guard()

    def to_dict(self):
        """The profile as its YAML document (paper units)."""
        return {
            'format_version': FORMAT_VERSION,
            'generation': self.generation,
            'thresholds': {name: from_milli(getattr(self.thresholds, name))
                           for name in dsp.Thresholds.FIELDS},
            'history_samples': self.history_samples,
            'interval_s': self.interval_s,
            'provenance': dataclasses.asdict(self.provenance),
            'guard': dict(zip(dsp.Guard.FIELDS, self.guard.as_tuple())),
        }

    def dump(self):
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def to_milli(value):
    """Paper units (int, float or decimal string) -> fixed-point integer.

    Raises ValueError unless the value is a non-negative number with at
    most three decimals, so that no threshold is silently rounded.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError('expected a number, got %r' % (value,))
    try:
        exact = decimal.Decimal(str(value)) * _MILLI
    except decimal.InvalidOperation:
        raise ValueError('expected a number, got %r' % (value,))
    if not exact.is_finite() or exact < 0:
        raise ValueError('expected a non-negative number, got %r' % (value,))
    if exact != exact.to_integral_value():
        raise ValueError('at most 3 decimals are representable, got %r'
                         % (value,))
    return int(exact)


def from_milli(value):
    """Fixed-point integer -> the shortest exact paper-unit number."""
    if value % 1000 == 0:
        return value // 1000
    return float(decimal.Decimal(value) / _MILLI)


def _int_field(doc, key, low, high, source):
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProfileError(source, key, 'expected an integer in [%d, %d], '
                           'got %r' % (low, high, value))
    if not low <= value <= high:
        raise ProfileError(source, key, 'expected an integer in [%d, %d], '
                           'got %d' % (low, high, value))
    return value


def from_dict(doc, source='<profile>'):
    """Validate a parsed profile document; return a Profile."""
    if not isinstance(doc, dict):
        raise ProfileError(source, '(document)', 'expected a mapping')
    unknown = set(doc) - {'format_version', 'generation', 'thresholds',
                          'history_samples', 'interval_s', 'provenance',
                          'guard'}
    if unknown:
        raise ProfileError(source, sorted(unknown)[0], 'unknown field')
    if doc.get('format_version') != FORMAT_VERSION:
        raise ProfileError(source, 'format_version', 'expected %d, got %r'
                           % (FORMAT_VERSION, doc.get('format_version')))
    generation = doc.get('generation')
    if not isinstance(generation, str) or not NAME_RE.fullmatch(generation):
        raise ProfileError(source, 'generation', 'expected a key like '
                           '"intel-icelake-server", got %r' % (generation,))

    raw = doc.get('thresholds')
    if not isinstance(raw, dict):
        raise ProfileError(source, 'thresholds', 'expected a mapping with '
                           + ', '.join(dsp.Thresholds.FIELDS))
    for key in raw:
        if key not in dsp.Thresholds.FIELDS:
            raise ProfileError(source, 'thresholds.%s' % key, 'unknown field')
    values = {}
    for name in dsp.Thresholds.FIELDS:
        if name not in raw:
            raise ProfileError(source, 'thresholds.%s' % name, 'missing')
        try:
            values[name] = to_milli(raw[name])
        except ValueError as exc:
            raise ProfileError(source, 'thresholds.%s' % name, str(exc))
    try:
        thresholds = dsp.Thresholds(**values)
    except ValueError as exc:
        raise ProfileError(source, 'thresholds', str(exc))

    history = _int_field(doc, 'history_samples', 1, dsp.HISTORY_MAX, source)
    interval = _int_field(doc, 'interval_s', *INTERVAL_RANGE, source=source)

    prov = doc.get('provenance')
    if not isinstance(prov, dict):
        raise ProfileError(source, 'provenance', 'expected a mapping with '
                           'method, source, obtained, hosts, samples')
    for key in prov:
        if key not in {f.name for f in dataclasses.fields(Provenance)}:
            raise ProfileError(source, 'provenance.%s' % key, 'unknown field')
    if prov.get('method') not in METHODS:
        raise ProfileError(source, 'provenance.method', 'expected one of %s, '
                           'got %r' % (', '.join(METHODS), prov.get('method')))
    obtained = prov.get('obtained', '')
    if isinstance(obtained, (datetime.date, datetime.datetime)):
        obtained = obtained.isoformat()
    for key in ('hosts', 'samples'):
        count = prov.get(key, 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ProfileError(source, 'provenance.%s' % key,
                               'expected a non-negative integer, got %r'
                               % (count,))
    provenance = Provenance(method=prov['method'],
                            source=str(prov.get('source', '')),
                            obtained=str(obtained),
                            hosts=prov.get('hosts', 0),
                            samples=prov.get('samples', 0))
    return Profile(generation, thresholds, history, interval, provenance,
                   _guard(doc, source))


def _guard(doc, source):
    raw = doc.get('guard', {})
    if not isinstance(raw, dict):
        raise ProfileError(source, 'guard', 'expected a mapping with '
                           + ', '.join(dsp.Guard.FIELDS))
    for key in raw:
        if key not in dsp.Guard.FIELDS:
            raise ProfileError(source, 'guard.%s' % key, 'unknown field')
    for key, value in raw.items():
        try:
            dsp.Guard(**{key: value})
        except ValueError as exc:
            raise ProfileError(source, 'guard.%s' % key, str(exc))
    return dsp.Guard(**raw)


def loads(text, source='<profile>'):
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = '(line %d)' % (mark.line + 1) if mark else '(document)'
        raise ProfileError(source, where, 'not valid YAML: %s'
                           % getattr(exc, 'problem', exc))
    return from_dict(doc, source)


def load(path):
    """Load and validate a profile file."""
    try:
        with open(path, encoding='utf-8') as f:
            text = f.read()
    except OSError as exc:
        raise ProfileError(str(path), '(file)', exc.strerror or str(exc))
    except UnicodeDecodeError:
        raise ProfileError(str(path), '(file)', 'not UTF-8 text')
    return loads(text, str(path))


def builtin_names():
    """Generation keys of the profiles shipped with the package."""
    root = importlib.resources.files('nova_adaptive_paging') / 'profiles'
    return sorted(p.name[:-len('.yaml')] for p in root.iterdir()
                  if p.name.endswith('.yaml'))


def builtin(generation=FALLBACK_GENERATION):
    """A shipped profile by generation key."""
    if generation not in builtin_names():
        raise KeyError(generation)
    res = (importlib.resources.files('nova_adaptive_paging') / 'profiles'
           / (generation + '.yaml'))
    return loads(res.read_text(encoding='utf-8'), 'builtin:%s' % generation)


def paths_in(directories):
    """The profile files (``*.yaml``) of ``directories``, in order."""
    paths = []
    for directory in directories:
        paths += sorted(glob.glob(os.path.join(directory, '*.yaml')))
    return paths


class ProfileSet:
    """Profiles by generation, with the built-in fallback.

    ``reload`` takes each file on its own: a file that does not load is
    left out alone (and keeps the profile it gave at the last reload, its
    last good state), and every other file still applies.
    """

    def __init__(self):
        self._profiles = {name: builtin(name) for name in builtin_names()}
        self._by_path = {}

    def reload(self, paths, loader=load):
        """Load ``paths`` (in order, each with ``loader``, :func:`load`
        unless the caller checks its files first) over the built-ins;
        return one ProfileError per file left out, for the caller to
        report once (its ``left_out()`` line)."""
        fresh = {name: builtin(name) for name in builtin_names()}
        by_path, errors, owner = {}, [], {}
        for path in paths:
            try:
                profile = loader(path)
                if profile.generation in owner:
                    raise ProfileError(path, 'generation', '%s is also the '
                                       'generation of %s, which applies' % (
                                           profile.generation,
                                           owner[profile.generation]))
            except ProfileError as exc:
                errors.append(exc)
                profile = self._by_path.get(path)
                exc.kept = profile is not None
                if profile is None or profile.generation in owner:
                    continue
            fresh[profile.generation] = profile
            owner[profile.generation] = path
            by_path[path] = profile
        self._profiles, self._by_path = fresh, by_path
        return errors

    def source_of(self, generation):
        """The file the profile for ``generation`` came from, or
        ``builtin:<generation>`` (the fallback's, if it has none)."""
        for path, profile in self._by_path.items():
            if profile.generation == generation:
                return path
        return 'builtin:%s' % self.for_generation(generation).generation

    def for_generation(self, generation):
        """The profile for ``generation``, else the fallback profile."""
        return self._profiles.get(generation,
                                  self._profiles[FALLBACK_GENERATION])

    def has(self, generation):
        return generation in self._profiles

    def names(self):
        return sorted(self._profiles)
