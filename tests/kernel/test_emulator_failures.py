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

"""An emulator that dies says why, in the test output.

A guest that never reports leaves a test with nothing to assert on; what
the reader needs then is how the emulator ended and its own last words.
Both runners are made to fail here on purpose, the way they fail on a
machine that lacks something: Bochs refusing its configuration (as it
aborted on a machine without an ALSA device) and QEMU stopped by the
timeout (as a hung guest is).  Seconds each, after the kernel build.
"""

import os

import pytest

from tests.kernel import kpatch

ENABLED = os.environ.get('NAP_KERNEL_TESTS') == '1'
pytestmark = pytest.mark.skipif(not ENABLED,
                                reason='set NAP_KERNEL_TESTS=1 to run')


def test_bochs_start_up_failure_is_explained(built_series):
    run = kpatch.run_guest('bochs', '--cpu', 'no_such_cpu', '--timeout', '300')
    assert run.rc != 0, run.report
    assert not run.out.strip(), run.report
    # Bochs' own message, from the tail of its output.
    assert 'cpu directive malformed' in run.err, run.report
    assert 'run.sh: Bochs exited with status 1 after' in run.err, run.report
    assert 'bochs.out' in run.err, run.report


def test_qemu_timeout_is_explained(built_series):
    run = kpatch.run_guest('tcg', '--timeout', '15')
    assert run.rc != 0, run.report
    assert 'NAP-DONE' not in run.out, run.report
    assert 'run.sh: QEMU was stopped by its timeout after' in run.err, \
        run.report
    # The console log's tail: the kernel had started to boot.
    assert '--- last lines of ' in run.err, run.report
