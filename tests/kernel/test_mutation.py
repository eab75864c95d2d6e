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

"""The series' selftests against a planted defect: they must fail.

kvm-patch/mutations/noop-switch.patch, applied after the series, leaves
every vCPU in the mode it has while its VM's mode, paging_mode and
switch counters still change.  A selftest that trusted the VM's mode
would pass; the storm, access, cr3 and remap selftests and part 1's
paging_mode_test read each vCPU's own paging_shadow statistic, and each
must fail on that, naming a vCPU that runs with TDP where its VM is in
shadow mode.

Opt-in (tox -e kvm-mutation, NAP_KERNEL_MUTATION=1), never in the gate:
it builds the whole kernel in a cache of its own (NAP_CACHE; the env
sets it apart from the gate's) and boots the TCG (SVM) host once.
"""

import os
import re

import pytest

from tests.kernel import kpatch

MUTATION = os.environ.get('NAP_KERNEL_MUTATION') == '1'
NOOP_SWITCH = os.path.join(kpatch.KVM_PATCH, 'mutations', 'noop-switch.patch')
# vcpu_paging_assert() of the selftests' library (patch 30).
VCPU_AT_HAP = re.compile(r'vCPU \d+ runs in hap mode, not shadow '
                         r'\(paging_shadow\)')
# paging_mode_test's own check (patch 16), at its first switch.
MODE_AT_HAP = re.compile(r'shadow: paging_shadow 0, paging_switches \d+; '
                         r'expected 1, \d+')
# Each test: the name guest/init reports its run under (NAP-RESULT), the
# test, the label of its output lines (NAP-OUT) and what they must say.
CAUGHT_BY = (
    ('switch-2000:2:hap:200', 'paging_switch_storm_test', 'storm',
     VCPU_AT_HAP),
    ('access', 'paging_switch_access_test', 'access', VCPU_AT_HAP),
    ('cr3', 'paging_switch_cr3_test', 'cr3', VCPU_AT_HAP),
    ('remap', 'paging_switch_remap_test', 'remap', VCPU_AT_HAP),
    ('mode', 'paging_mode_test', 'mode', MODE_AT_HAP),
)


@pytest.mark.skipif(not MUTATION, reason='set NAP_KERNEL_MUTATION=1 (tox -e '
                    'kvm-mutation): a kernel build of its own')
def test_the_selftests_fail_when_no_vcpu_switches():
    """With no vCPU following its VM, each of the five selftests fails,
    and on a vCPU's own mode (not a crash or a timeout), while the guest
    reports to the end."""
    gate = os.path.realpath(kpatch.gate_cache())
    assert os.path.realpath(kpatch.cache()) != gate, (
        'kvm-mutation must not build in the gate\'s cache %s' % gate)
    kpatch.build_series(mutation=NOOP_SWITCH)
    run = kpatch.run_guest(
        'tcg', 'nap.modes=none', 'nap.abi_test=0', 'nap.lockdown=0',
        'nap.cr0_cycles=', 'nap.memcg=0', 'nap.pmu=0', 'nap.cost=0',
        'nap.pae=0', 'nap.walk=0', 'nap.cpuid=0', 'nap.nested=0',
        'nap.hyperv=0', 'nap.noncoherent=0', 'nap.avic=0',
        'nap.storm_switches=2000:2:hap:200', 'nap.cr3_rounds=20',
        'nap.access=1', 'nap.remap=1024')
    assert 'NAP-DONE' in run.out, run.report
    verdicts = {(mode, test): verdict
                for mode, test, verdict, _, _ in kpatch.results(run.out)}
    for mode, test, label, why in CAUGHT_BY:
        assert verdicts.get((mode, test)) == 'FAIL', (
            '%s passed or did not run with no vCPU switching\n%s'
            % (test, run.report))
        said = [line for line in run.out.splitlines()
                if line.startswith('NAP-OUT %s:' % label)]
        assert any(why.search(line) for line in said), (
            '%s failed, but not on a vCPU\'s mode\n%s' % (test, run.report))
