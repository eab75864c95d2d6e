"""Fixtures shared by the tests that boot the kernel series."""

import os
import subprocess

import pytest

from tests.kernel import kpatch


@pytest.fixture(scope='session')
def built_series():
    """The series applied, kernel, modules and static selftests built
    (kvm-patch/build.sh; ccache and objects under the kernel cache)."""
    subprocess.run([os.path.join(kpatch.KVM_PATCH, 'build.sh'),
                    '--selftests'], check=True)


@pytest.fixture(scope='session')
def guests(request, built_series):
    """Every emulated host the selected tests need, booted once for all
    its checks and all at once: each test module that takes this fixture
    names its boot as BOOT = (machine, run.sh arguments...), and gets
    ``guests[machine].wait()``.  QEMU TCG (the SVM half) and Bochs (the
    VMX half) run single-threaded, so on two cores they run side by side
    in the time of the longer one."""
    boots = {}
    for item in request.session.items:
        boot = getattr(item.module, 'BOOT', None)
        if boot and 'guests' in item.fixturenames:
            boots[boot[0]] = boot[1:]
    running = {machine: kpatch.Guest(machine, *args)
               for machine, args in boots.items()}
    yield running
    for guest in running.values():
        guest.stop()
