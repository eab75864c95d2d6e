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

"""Files written whole get the mode a plain open() would give them: the
umask decides a new file's, an existing file keeps its own.  The oracle
is the kernel: a file open() creates beside it under the same umask."""

import contextlib
import os
import stat

from click.testing import CliRunner
import pytest

from nova_adaptive_paging import atomic_file
from nova_adaptive_paging.cmd import cli
from nova_adaptive_paging.costmodel import traces


@contextlib.contextmanager
def umask(mask):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def opened(path):
    """The mode open() gives a new file here, under the current umask."""
    with open(path, 'w'):
        pass
    return mode(path)


@pytest.mark.parametrize('mask', [0o022, 0o077, 0o002, 0o027])
def test_a_new_file_gets_the_umask(tmp_path, mask):
    with umask(mask):
        atomic_file.atomic_write(str(tmp_path / 'new'), 'text\n')
        expected = opened(tmp_path / 'oracle')
    assert mode(tmp_path / 'new') == expected == 0o666 & ~mask


def test_a_replaced_file_keeps_its_mode(tmp_path):
    path = tmp_path / 'profile.yaml'
    path.write_text('old\n')
    os.chmod(path, 0o640)
    with umask(0o077):
        atomic_file.atomic_write(str(path), 'new\n')
    assert mode(path) == 0o640 and path.read_text() == 'new\n'


def test_the_umask_is_read_without_being_changed():
    with umask(0o027):
        assert atomic_file._umask() == 0o027
        assert os.umask(0o027) == 0o027


def test_what_the_cli_writes_is_readable_as_the_umask_says(tmp_path):
    # calibrate --out: the profile an operator hands to the agent's user
    # (doc/source/agent.rst); --plot goes through the same write.
    trace = str(traces.builtin_paths()[0])
    out = tmp_path / 'intel-nehalem.yaml'
    plot = tmp_path / 'modes.png'
    with umask(0o022):
        for args in (('calibrate', '--hardware', 'nehalem', '--trace', trace,
                      '--out', str(out)),
                     ('simulate', '--hardware', 'nehalem', '--trace', trace,
                      '--plot', str(plot))):
            result = CliRunner().invoke(cli.main, list(args))
            assert result.exit_code == 0, result.output
    assert mode(out) == 0o644 and mode(plot) == 0o644
