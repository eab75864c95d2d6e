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
