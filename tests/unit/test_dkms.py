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

"""The DKMS package of the KVM series (kvm-patch/dkms/), without building.

Parses dkms.conf the way dkms does (bash), and runs mkdkms.sh
--check-series, which sorts every file the series touches into what the
DKMS tree ships, what it leaves out (Documentation, tools) and what it
cannot ship at all (anything built into the kernel image or into other
modules): a patch added to the series that changes, say, mm/ fails here
rather than at a host's dkms build.  The real build is in
tests/kernel/test_dkms.py (NAP_KERNEL_TESTS=1).
"""

import os
import re
import shutil
import subprocess

import pytest

from tests.kernel import kpatch

DKMS = os.path.join(kpatch.ROOT, 'kvm-patch', 'dkms')
MKDKMS = os.path.join(DKMS, 'mkdkms.sh')
BASH = shutil.which('bash')
needs_bash = pytest.mark.skipif(BASH is None, reason='needs bash')


def dkms_conf(**subst):
    """dkms.conf's variables as bash sees them (dkms sources the file)."""
    with open(os.path.join(DKMS, 'dkms.conf')) as f:
        text = f.read()
    for key, value in subst.items():
        text = text.replace('#%s#' % key, value)
    script = (text + '\nset | grep -E "^(PACKAGE_|BUILT_MODULE_|DEST_'
              'MODULE_|BUILD_EXCLUSIVE_|AUTOINSTALL|MAKE|CLEAN)"\n')
    env = {'kernel_source_dir': '/lib/modules/K/build',
           'dkms_tree': '/var/lib/dkms', 'PATH': os.environ['PATH']}
    out = subprocess.run([BASH, '-c', script], env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return out


def check_series():
    out = subprocess.run([MKDKMS, '--check-series'], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    info = {'ship': []}
    for line in out.splitlines():
        key, _, value = line.partition(' ')
        if key == 'ship':
            info['ship'].append(value)
        else:
            info[key] = value
    return info


@needs_bash
def test_dkms_conf_names_the_three_modules():
    out = dkms_conf(MODULE_VERSION='6.12.117-x', KERNEL_REGEX='^x$')
    assert 'PACKAGE_NAME=nova-adaptive-paging-kvm' in out
    assert 'PACKAGE_VERSION=6.12.117-x' in out
    assert 'AUTOINSTALL=yes' in out
    names = re.search(r'^BUILT_MODULE_NAME=\((.*)\)$', out, re.M).group(1)
    assert re.findall(r'\[\d\]="([^"]*)"', names) == [
        'kvm', 'kvm-amd', 'kvm-intel']
    for var, value in (('BUILT_MODULE_LOCATION', 'arch/x86/kvm/'),
                       ('DEST_MODULE_LOCATION', '/updates/dkms')):
        arr = re.search(r'^%s=\((.*)\)$' % var, out, re.M).group(1)
        assert re.findall(r'\[\d\]="([^"]*)"', arr) == [value] * 3
    # The build is the kernel's kbuild on the tree's arch/x86/kvm.
    assert ('make -C /lib/modules/K/build M=/var/lib/dkms/nova-adaptive-'
            'paging-kvm/6.12.117-x/build/arch/x86/kvm modules') in out


@needs_bash
def test_mkdkms_help():
    out = subprocess.run([MKDKMS, '--help'], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    assert out.startswith('# Make the DKMS source tree')
    assert '--allow-abi-break' in out and 'set -euo' not in out


@needs_bash
def test_series_is_shippable_as_modules():
    info = check_series()
    touched = set()
    for patch in kpatch.series():
        with open(patch) as f:
            touched.update(re.findall(r'^diff --git a/(\S+) b/', f.read(),
                                      re.M))
    shipped = set(info['ship'])
    left_out = {p for p in touched
                if p.startswith(('Documentation/', 'tools/'))}
    assert shipped | left_out == touched
    assert 'arch/x86/include/asm/kvm_host.h' in shipped
    assert 'arch/x86/include' in info['include-dirs'].split()


@needs_bash
def test_kernel_regex_is_one_release_any_flavour():
    info = check_series()
    # The pinned source's release (kvm-patch/linux-version).
    release = kpatch.pinned_linux().kver
    assert info['version'].startswith(release + '-')
    major, minor, sub = release.split('.')
    other = '%s.%s.%d' % (major, minor, int(sub) - 10)
    regex = info['kernel-regex']
    # dkms matches BUILD_EXCLUSIVE_KERNEL with bash's =~.
    for kver, ok in ((release + '+deb12-amd64', True),
                     (release + '+deb12-cloud-amd64', True),
                     (release + '+deb12-rt-amd64', True),
                     (release, True),
                     (release + '0+deb12-amd64', False),
                     (other + '+deb12-amd64', False),
                     ('6.1.0-56-amd64', False)):
        rc = subprocess.run([BASH, '-c', '[[ $1 =~ $2 ]]', '-', kver,
                             regex]).returncode
        assert (rc == 0) == ok, kver
