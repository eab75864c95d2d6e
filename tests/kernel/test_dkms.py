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

"""The DKMS package of the series, built for real against Debian's headers.

Makes the DKMS tree with kvm-patch/dkms/mkdkms.sh (version
<kernel>-test, under /usr/src), builds it with "dkms build" for the
Debian kernel kvm-patch/linux-version pins (the newest the archive serves
under tox -e kvm-newest), whose headers are installed (installing dkms
and those headers at that version with apt if missing; the kernel itself
need not be installed or running) and checks the modules with modinfo:
kvm, kvm-amd and kvm-intel are built for that kernel, kvm carries the
paging_switch_abi parameter, and the KVM code was compiled with the
series' kvm_host.h, not the one in the kernel headers.  Nothing is
installed into /lib/modules; the dkms registration and the /usr/src tree
are removed afterwards.

Slow (about 3 minutes on two cores) and needs root and apt: it runs only
with NAP_KERNEL_TESTS=1, as the tox environment "kvm" sets.
"""

import glob
import os
import shutil
import subprocess

import pytest

from tests.kernel import kpatch

ENABLED = os.environ.get('NAP_KERNEL_TESTS') == '1'
pytestmark = pytest.mark.skipif(not ENABLED,
                                reason='set NAP_KERNEL_TESTS=1 to run')
MKDKMS = os.path.join(kpatch.ROOT, 'kvm-patch', 'dkms', 'mkdkms.sh')
PKG = 'nova-adaptive-paging-kvm'
LINUX = kpatch.pinned_linux() if ENABLED else None
VERSION = LINUX.kver + '-test' if ENABLED else None
# Debian's name of the kernel the modules are built for.
KVER = LINUX.kabi if ENABLED else None
MODULES = ('kvm', 'kvm-amd', 'kvm-intel')


def run(*cmd, **kw):
    proc = subprocess.run(cmd, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kw)
    return proc.stdout


def dkms_remove():
    if os.path.isdir('/var/lib/dkms/%s/%s' % (PKG, VERSION)):
        run('dkms', 'remove', '-m', PKG, '-v', VERSION, '--all')
    shutil.rmtree('/usr/src/%s-%s' % (PKG, VERSION), ignore_errors=True)


@pytest.fixture(scope='module')
def headers():
    build = '/lib/modules/%s/build' % KVER
    if shutil.which('dkms') is None or not os.path.isdir(build):
        run('apt-get', 'install', '-y', '-q', 'dkms',
            '%s=%s' % (LINUX.headers, LINUX.debian_version),
            env=dict(os.environ, DEBIAN_FRONTEND='noninteractive'))
    return build


@pytest.fixture(scope='module')
def built(headers):
    """The dkms build of the tree, with the layout check on."""
    dkms_remove()
    run(MKDKMS, '--version', VERSION)
    try:
        run('dkms', 'add', '-m', PKG, '-v', VERSION)
        run('dkms', 'build', '-m', PKG, '-v', VERSION, '-k', KVER)
        tree = '/var/lib/dkms/%s/%s' % (PKG, VERSION)
        found = {}
        for mod in MODULES:
            hits = glob.glob('%s/%s/x86_64/module/%s.ko*' % (tree, KVER,
                                                             mod))
            assert len(hits) == 1, (mod, hits)
            found[mod] = hits[0]
        yield tree, found
    finally:
        dkms_remove()


def modinfo(path, *args):
    return run('modinfo', *args, path).strip()


def test_modules_built_for_the_kernel(built):
    _, found = built
    for mod, path in found.items():
        assert modinfo(path, '-F', 'name') == mod.replace('-', '_')
        vermagic = modinfo(path, '-F', 'vermagic')
        assert vermagic.split()[0] == KVER, vermagic
    assert 'kvm' in modinfo(found['kvm-amd'], '-F', 'depends').split(',')


def test_kvm_has_the_paging_switch_parameters(built):
    _, found = built
    params = modinfo(found['kvm'], '-p')
    names = {line.split(':')[0] for line in params.splitlines()}
    assert 'paging_switch_abi' in names, params


@pytest.fixture
def tree(headers, tmp_path):
    """A tree made by mkdkms.sh without --allow-abi-break."""
    dest = str(tmp_path / 'tree')
    run(MKDKMS, '--version', VERSION, '--dest', dest)
    return dest


def make_asm_offsets(headers, tree, *args):
    """Build kvm-asm-offsets.s only (includes kvm_host.h; seconds)."""
    return subprocess.run(
        ['make', '-C', headers, 'M=%s/arch/x86/kvm' % tree] + list(args)
        + ['kvm-asm-offsets.s'],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_compiled_with_the_patched_headers(headers, tree):
    """The dependencies name the tree's KVM headers, not the kernel's.

    (dkms deletes its build directory, with the .cmd files, after a
    build, so this builds one file of a tree of its own.)
    """
    proc = make_asm_offsets(headers, tree)
    assert proc.returncode == 0, proc.stdout
    with open(os.path.join(tree, 'arch', 'x86', 'kvm',
                           '.kvm-asm-offsets.s.cmd')) as f:
        cmd = f.read()
    own = os.path.realpath(os.path.join(tree, 'arch', 'x86', 'include'))
    for header in ('kvm_host.h', 'kvm-x86-ops.h'):
        deps = [w for w in cmd.split() if w.endswith('/asm/' + header)]
        assert deps, header
        assert all(os.path.realpath(d).startswith(own + os.sep)
                   for d in deps), deps


def test_layouts_the_kernel_image_reads_are_unchanged(headers, tree):
    """Without the override, arch/x86/kvm/Kbuild's layout check passes."""
    proc = make_asm_offsets(headers, tree)
    assert 'changes layouts built into the kernel image' not in \
        proc.stdout, proc.stdout
    assert proc.returncode == 0, proc.stdout
