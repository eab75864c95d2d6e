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

"""Bad input gets one line naming the input, the value and what was
expected, exit status 2, no traceback and nothing half-written."""

import os

from click.testing import CliRunner
import pytest

from nova_adaptive_paging.cmd import cli
from nova_adaptive_paging.costmodel import evaluator
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import cpu
from nova_adaptive_paging import atomic_file
from nova_adaptive_paging import policy
from nova_adaptive_paging import profiles
from nova_adaptive_paging.tuning import derivation

HEADER = 'interval_s,instructions,tlb_misses,page_faults\n'
ROW = '5,10000000000,20000000,100000\n'


def invoke(*args, env=None):
    result = CliRunner().invoke(cli.main, list(args), env=env)
    return result


def one_error_line(result, *needles):
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception,
                                                  SystemExit), \
        result.exception
    assert result.stderr.startswith('error: '), result.stderr
    assert result.stderr.count('\n') == 1, result.stderr
    assert 'Traceback' not in result.output
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


def test_bad_config_file(tmp_path):
    bad = tmp_path / 'agent.conf'
    bad.write_text('[adaptive_paging\n')
    one_error_line(invoke('--config-file', str(bad), 'policy', 'check',
                          'hw:paging=hap'), str(bad), 'Invalid section')
    one_error_line(invoke('--config-file', str(tmp_path / 'absent.conf'),
                          'policy', 'check', 'hw:paging=hap'), 'absent.conf')
    bad.write_text('[adaptive_paging]\ndefault_policy = HAP\n')
    one_error_line(invoke('--config-file', str(bad), 'policy', 'check',
                          'hw:paging=hap'), 'default_policy', 'HAP')


def test_calibrate_into_an_unwritable_place(tmp_path):
    # Places even root cannot write: a missing directory, a path below a
    # regular file, a read-only file system.
    (tmp_path / 'afile').write_text('')
    for out in (tmp_path / 'absent' / 'p.yaml', tmp_path / 'afile' / 'p.yaml',
                '/proc/nova-paging-test.yaml'):
        one_error_line(invoke('calibrate', '--hardware', 'nehalem',
                              '--out', str(out)), str(out))
        assert not os.path.exists(str(out))
    assert sorted(os.listdir(tmp_path)) == ['afile']


def test_calibrate_writes_only_keys_a_host_can_have(tmp_path):
    out = tmp_path / 'p.yaml'
    trace = str(traces.builtin_paths()[0])
    one_error_line(invoke('calibrate', '--hardware', 'nehalem', '--trace',
                          trace, '--out', str(out), '--generation',
                          'nehalem'), "--generation 'nehalem'",
                   'nova-paging cpu-generation')
    assert not out.exists()
    # The fallback form a CPU the tables do not know gets is fine.
    key = cpu.generation_key('GenuineIntel', 6, 0x99)
    assert invoke('calibrate', '--hardware', 'nehalem', '--trace', trace,
                  '--out', str(out), '--generation', key).exit_code == 0
    assert profiles.load(str(out)).generation == key
    hw = hardware.resolve('nehalem')
    bare = hardware.Hardware(**dict(hw.__dict__, generation=None))
    with pytest.raises(derivation.CalibrationError, match='--generation'):
        derivation.generation_for(bare)


def test_plot_to_a_bad_path_fails_before_the_replay(tmp_path, monkeypatch):
    replayed = []
    monkeypatch.setattr(evaluator, 'evaluate',
                        lambda *a, **k: replayed.append(a))
    trace = str(traces.builtin_paths()[0])
    out = tmp_path / 'absent' / 'modes.png'
    one_error_line(invoke('simulate', '--hardware', 'nehalem', '--trace',
                          trace, '--plot', str(out)), str(out))
    assert replayed == []


def test_plot_without_a_display(tmp_path):
    # A backend that needs a display is asked for, and there is none: the
    # PNG is still drawn (files need no display).
    out = tmp_path / 'modes.png'
    trace = str(traces.builtin_paths()[0])
    result = invoke('simulate', '--hardware', 'nehalem', '--trace', trace,
                    '--plot', str(out),
                    env={'MPLBACKEND': 'TkAgg', 'DISPLAY': ''})
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


@pytest.mark.parametrize('row,needles', [
    ('5,1e30,1e28,1e20\n', (':2: column instructions', '1e30',
                            'at most 1e+12 per second')),
    ('5,1000,10,-1\n', (':2: column page_faults', 'non-negative')),
    ('5,1000,10\n', (':2:', 'expected 4 cells, got 3')),
    # Cut in the middle of its last number: every cell is there.
    ('5,10000000000,20000000,1000', (':2:', 'no line end', 'truncated')),
])
def test_trace_errors_name_file_line_and_column(tmp_path, row, needles):
    path = tmp_path / 'bad.csv'
    path.write_text(HEADER + row)
    one_error_line(invoke('simulate', '--hardware', 'nehalem', '--trace',
                          str(path)), str(path), *needles)


def test_a_trace_that_models_too_long_is_refused_not_replayed(tmp_path):
    # Each count is below the physical bound, but a page fault every 10
    # ns at 10 us each models a million seconds per trace second.
    path = tmp_path / 'faulty.csv'
    path.write_text(HEADER + '5,400000000000,0,400000000000\n' * 10)
    one_error_line(invoke('simulate', '--hardware', 'nehalem', '--trace',
                          str(path)), 'faulty on hardware nehalem',
                   'sampling intervals', 'at most 1000000')


def test_names_with_a_trailing_newline_are_refused():
    # Nova matches the extra spec's pattern whole; so must the parser.
    with pytest.raises(policy.PolicyError):
        policy.parse_profile('amd-zen3\n')
    doc = profiles.builtin().to_dict()
    doc['generation'] = 'amd-zen3\n'
    with pytest.raises(profiles.ProfileError, match='generation'):
        profiles.from_dict(doc, 'p.yaml')


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / 'p.yaml'
    path.write_text('old\n')

    def half(f):
        f.write('new, half')
        raise OSError(28, 'No space left on device')
    with pytest.raises(OSError) as err:
        atomic_file.atomic_write(str(path), writer=half)
    assert err.value.filename == str(path)
    assert path.read_text() == 'old\n'
    assert os.listdir(tmp_path) == ['p.yaml']
