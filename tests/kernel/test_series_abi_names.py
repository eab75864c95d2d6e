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

"""The kernel patch spells the interface exactly as abi/spec.py does.

spec.py is the machine-readable half of the interface document; the kernel
series is its C implementation.  This test reads the names and formats out
of the C the series adds (paging_switch.c, applied to an empty directory)
and the statistics descriptors it adds to x86.c, and compares them with
spec.py, so that a renamed file, key or statistic cannot slip through
either side alone.
"""

import re

import pytest

from nova_adaptive_paging.abi import spec
from tests.kernel import kpatch

PAGING_SWITCH_C = 'arch/x86/kvm/paging_switch.c'


@pytest.fixture(scope='module')
def source(tmp_path_factory):
    path, = kpatch.extract([PAGING_SWITCH_C],
                           str(tmp_path_factory.mktemp('series')))
    with open(path) as f:
        return f.read()


def string_array(source, name):
    """The string literals of ``static const char * const name[] = {...}``."""
    m = re.search(r'\b%s\[\w*\]\s*=\s*\{(.*?)\};' % re.escape(name),
                  source, re.S)
    assert m, '%s not found in %s' % (name, PAGING_SWITCH_C)
    return tuple(re.findall(r'"([^"]*)"', m.group(1)))


def test_words(source):
    assert string_array(source, 'policy_names') == spec.POLICIES
    assert string_array(source, 'mode_names') == spec.MODES
    assert string_array(source, 'pf_source_names') == spec.PF_SOURCES
    assert string_array(source, 'dsp_keys') == spec.THRESHOLD_KEYS
    assert string_array(source, 'dsp_walk_keys') == spec.WALK_EVENT_KEYS


def test_abi_version_and_parameters(source):
    m = re.search(r'#define PAGING_SWITCH_ABI\s+(\d+)', source)
    assert m and int(m.group(1)) == spec.ABI_VERSION
    params = set(re.findall(r'module_param(?:_cb)?\((\w+),', source))
    assert params == {spec.PARAM_ABI, spec.PARAM_THRESHOLDS,
                      spec.PARAM_INJECT, spec.PARAM_PMU_ALL,
                      spec.PARAM_WALK_EVENTS}
    ranges = tuple(int(re.search(r'#define DSP_INTERVAL_MS_%s\s+(\d+)' % k,
                                 source).group(1)) for k in ('MIN', 'MAX'))
    assert ranges == spec.INTERVAL_MS_RANGE


def test_vm_files_in_order(source):
    m = re.search(r'paging_files\[\]\s*=\s*\{(.*?)\};', source, re.S)
    assert m
    names = tuple(re.findall(r'\{\s*"(\w+)"', m.group(1)))
    assert names == spec.VM_FILES


def test_stats_keys_in_order(source):
    body = source[source.index('static int show_stats('):]
    body = body[:body.index('PAGING_SWITCH_ABI,')]
    text = ''.join(re.findall(r'"((?:[^"\\]|\\.)*)"', body))
    keys = tuple(line.split(' ')[0] for line in text.split('\\n') if line)
    assert keys == spec.STATS_KEYS


def test_binary_stats_descriptors():
    added, vcpu = [], []
    for patch in kpatch.patches_touching('arch/x86/kvm/x86.c'):
        with open(patch) as f:
            text = f.read()
        added += re.findall(r'^\+\s*STATS_DESC_\w+\(VM, (paging_\w+)\)',
                            text, re.M)
        vcpu += re.findall(r'^\+\s*STATS_DESC_\w+\(VCPU, (paging_\w+)\)',
                           text, re.M)
    assert tuple(added) == spec.BINARY_STATS
    assert tuple(vcpu) == spec.VCPU_BINARY_STATS
    # The fields behind them: what the series adds and does not remove.
    fields = []
    for patch in kpatch.patches_touching('arch/x86/include/asm/kvm_host.h'):
        with open(patch) as f:
            for sign, name in re.findall(
                    r'^([+-])\s*(?:u64|atomic64_t) (paging_\w+);',
                    f.read(), re.M):
                if sign == '+':
                    fields.append(name)
                else:
                    fields.remove(name)
    assert sorted(fields) == sorted(
        spec.BINARY_STATS + spec.VCPU_BINARY_STATS)
