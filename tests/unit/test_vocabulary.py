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

"""The one vocabulary against the numbers and words others define."""

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import dsp
from nova_adaptive_paging import vocabulary


def test_modes_in_the_kernels_numeric_order():
    # The kernel interface numbers modes HAP=0, SHADOW=1 (dsp.Mode, the C
    # twin's enum); the words index by that number.
    assert vocabulary.MODES[dsp.Mode.HAP] == 'hap'
    assert vocabulary.MODES[dsp.Mode.SHADOW] == 'shadow'
    assert [str(m) for m in dsp.Mode] == list(vocabulary.MODES)


def test_policies_are_the_modes_and_adaptive():
    assert vocabulary.POLICIES == vocabulary.MODES + ('adaptive',)
    # The interface prints the same words (paging_policy, paging_stats).
    assert spec.POLICIES == vocabulary.POLICIES
    assert spec.STATS_WORDS['mode'] == vocabulary.MODES
