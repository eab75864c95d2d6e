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

"""Fixtures shared by the tests that boot the kernel series."""

import pytest

from tests.kernel import kpatch


@pytest.fixture(scope='session')
def built_series():
    """The series applied, kernel, modules and static selftests built
    (kvm-patch/build.sh; ccache and objects under the kernel cache)."""
    kpatch.build_series()


@pytest.fixture(scope='session')
def guests(request, built_series):
    """Every emulated host the selected tests need, booted once for all
    its checks and all at once: each test module that takes this fixture
    names its boot as BOOT = (machine, run.sh arguments...), and gets
    ``guests[machine].wait()``.  QEMU TCG (the SVM half) and Bochs (the
    VMX half) run single-threaded, so on two cores they run side by side
    in the time of the longer one.  A module may name its boot BOOT_NAME
    (a second boot of one machine) and have it start once the boot named
    BOOT_AFTER has ended, on the core that one leaves."""
    boots = {}
    for item in request.session.items:
        boot = getattr(item.module, 'BOOT', None)
        if boot and 'guests' in item.fixturenames:
            name = getattr(item.module, 'BOOT_NAME', boot[0])
            boots[name] = (boot, getattr(item.module, 'BOOT_AFTER', None))
    # Those a boot waits for first, so that each finds its predecessor.
    running = {}
    for name, (boot, after) in sorted(boots.items(),
                                      key=lambda b: b[1][1] is not None):
        running[name] = kpatch.Guest(*boot, name=name,
                                     after=running.get(after))
    yield running
    for guest in running.values():
        guest.cancel()
    for guest in running.values():
        guest.stop()
