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

"""Workload traces: the CSV format every simulation tool reads.

A trace describes a workload's intrinsic behaviour, slice by slice, in
time order; the counts do not depend on the paging mode::

    # comment lines start with '#'
    interval_s,instructions,tlb_misses,page_faults,cr3_writes,working_set_mib
    1.0,2000000000,1000000,50,2000,1700

``interval_s`` is the slice's duration at native speed (> 0);
``instructions``, ``tlb_misses`` and ``page_faults`` (guest page faults)
are required, ``cr3_writes`` (guest context switches) and
``working_set_mib`` (resident guest memory, which drives the cost of
rebuilding a shadow table) are optional.  All values are non-negative
numbers.  Columns may come in any order; other columns are ignored.
Rows may have any length: the evaluator splits and merges them.
"""

import csv
import dataclasses
import io
import math
import os

from nova_adaptive_paging import costmodel
from nova_adaptive_paging import exception

REQUIRED = ('interval_s', 'instructions', 'tlb_misses', 'page_faults')
# Counts per second of trace time a guest can produce at most: a 100-vCPU
# guest at 10 GHz retiring one instruction per cycle (events are rarer
# than instructions).  Beyond it a count is a typo (1e30), and replaying
# it would model years per row.
MAX_RATE = 1e12
COUNTS = ('instructions', 'tlb_misses', 'page_faults', 'cr3_writes')
OPTIONAL = ('cr3_writes', 'working_set_mib')
COLUMNS = REQUIRED + OPTIONAL


class TraceError(exception.Error, ValueError):
    """A malformed trace; the message names the file, line and column."""

    def __init__(self, source, line, column, problem):
        self.source, self.line, self.column = source, line, column
        self.problem = problem
        where = source if line is None else '%s:%d' % (source, line)
        if column:
            where += ': column %s' % column
        super().__init__('%s: %s' % (where, problem))


@dataclasses.dataclass(frozen=True)
class Trace:
    """A parsed trace: one tuple per column, all of the same length."""

    name: str
    interval_s: tuple
    instructions: tuple
    tlb_misses: tuple
    page_faults: tuple
    cr3_writes: tuple
    working_set_mib: tuple
    has_working_set: bool = False
    comment: str = ''

    def __len__(self):
        return len(self.interval_s)

    @property
    def native_s(self):
        return math.fsum(self.interval_s)

    def totals(self):
        return {col: math.fsum(getattr(self, col)) for col in COLUMNS
                if col != 'interval_s' and col != 'working_set_mib'}


def _number(text, source, line, column):
    try:
        value = float(text)
    except ValueError:
        raise TraceError(source, line, column,
                         'expected a number, got %r' % (text,))
    if not math.isfinite(value) or value < 0:
        raise TraceError(source, line, column,
                         'expected a non-negative number, got %r' % (text,))
    return value


def loads(text, source='<trace>', name=None):
    """Parse trace text; raise TraceError naming where it is malformed."""
    header = None
    rows = []
    comments = []
    last_data = None
    for lineno, raw in enumerate(io.StringIO(text), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith('#'):
            if header is None:
                comments.append(line[1:].strip())
            continue
        cells = [c.strip() for c in next(csv.reader([line]))]
        if header is None:
            header = cells
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                raise TraceError(source, lineno, missing[0],
                                 'missing column (the header must name %s)'
                                 % ', '.join(REQUIRED))
            index = {c: header.index(c) for c in COLUMNS if c in header}
            continue
        if len(cells) != len(header):
            raise TraceError(source, lineno, None, 'expected %d cells, got '
                             '%d' % (len(header), len(cells)))
        row = {c: _number(cells[i], source, lineno, c)
               for c, i in index.items()}
        if row['interval_s'] <= 0:
            raise TraceError(source, lineno, 'interval_s',
                             'must be > 0, got %r' % cells[index[
                                 'interval_s']])
        for c in COUNTS:
            rate = row.get(c, 0.0) / row['interval_s']
            if rate > MAX_RATE:
                raise TraceError(source, lineno, c, '%s in %s s is %.3g per '
                                 'second; expected at most %.0e per second '
                                 '(a 100-vCPU guest at 10 GHz)' % (
                                     cells[index[c]],
                                     cells[index['interval_s']], rate,
                                     MAX_RATE))
        last_data = (lineno, raw)
        rows.append(row)
    if header is None:
        raise TraceError(source, None, None, 'empty: no header row')
    if not rows:
        raise TraceError(source, None, None, 'no data rows')
    if not last_data[1].endswith('\n'):
        # A writer always ends its rows; a cut file loses the end of its
        # last number without losing a cell.
        raise TraceError(source, last_data[0], None, 'the last row has no '
                         'line end: the file looks truncated')
    columns = {c: tuple(r.get(c, 0.0) for r in rows) for c in COLUMNS}
    return Trace(name=name or _name_of(source),
                 has_working_set='working_set_mib' in index,
                 comment='\n'.join(comments), **columns)


def _name_of(source):
    base = os.path.basename(str(source))
    return base[:-4] if base.endswith('.csv') else base


def load(path):
    """Load a trace file."""
    try:
        with open(path, encoding='utf-8') as f:
            text = f.read()
    except OSError as exc:
        raise TraceError(str(path), None, None, exc.strerror or str(exc))
    except UnicodeDecodeError:
        raise TraceError(str(path), None, None, 'not UTF-8 text')
    return loads(text, str(path))


def dumps(rows, comment=''):
    """CSV text of ``rows`` (dicts keyed by column), with a comment."""
    present = [c for c in COLUMNS if any(c in r for r in rows)]
    out = io.StringIO()
    for line in comment.strip('\n').splitlines():
        out.write(('# ' + line).rstrip() + '\n')
    out.write(','.join(present) + '\n')
    for r in rows:
        out.write(','.join(_fmt(r.get(c, 0)) for c in present) + '\n')
    return out.getvalue()


def _fmt(value):
    if float(value).is_integer():
        return '%d' % value
    return repr(round(float(value), 6))


def builtin_paths():
    """The shipped traces."""
    return costmodel.data_files('traces', '.csv')


def builtin():
    """The shipped traces, parsed, by name."""
    return {_name_of(p.name): loads(p.read_text(encoding='utf-8'),
                                    'builtin:%s' % p.name,
                                    _name_of(p.name))
            for p in builtin_paths()}


def resolve(ref):
    """A shipped trace by name (``gcc``), or a trace file."""
    shipped = {p.name[:-4]: p for p in builtin_paths()}
    if ref in shipped:
        return loads(shipped[ref].read_text(encoding='utf-8'),
                     'builtin:%s' % ref, ref)
    if not os.path.exists(ref):
        hint = exception.did_you_mean(ref, shipped)
        raise TraceError(str(ref), None, None, 'no such file, and not a '
                         'shipped trace (%s)%s' % (
                             ', '.join(sorted(shipped)),
                             hint and '; ' + hint))
    return load(ref)
