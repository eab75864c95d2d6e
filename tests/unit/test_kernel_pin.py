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

"""The one pin of the kernel the gate tests (kvm-patch/linux-version).

kvm-patch/pinned-packages.sh is what .ci/run asks, right after apt-get
update, for the exact packages to install; here apt-cache is a stand-in
(a script on PATH printing what ``apt-cache madison`` prints for an
archive the test makes up), because whether Debian's archive serves a
given version is the one thing this test cannot choose.
"""

import os
import re
import stat
import subprocess

import pytest

from tests.kernel import kpatch

SCRIPT = os.path.join(kpatch.KVM_PATCH, 'pinned-packages.sh')
PIN_FILE = os.path.join(kpatch.KVM_PATCH, 'linux-version')


def pin():
    """The pinned Debian version, read here without the scripts."""
    with open(PIN_FILE) as f:
        lines = [line.strip() for line in f
                 if line.strip() and not line.startswith('#')]
    assert len(lines) == 1, lines
    return lines[0]


def archive(tmp_path, served):
    """A PATH whose apt-cache serves {package: [versions]}."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    table = tmp_path / 'madison'
    table.write_text(''.join(
        ' %s | %s | http://deb.debian.org/debian-security '
        'bookworm-security/main amd64 Packages\n' % (pkg, ver)
        for pkg, versions in served.items() for ver in versions))
    fake = bin_dir / 'apt-cache'
    fake.write_text('#!/bin/sh\n[ "$1" = madison ] || exit 100\n'
                    'grep "^ $2 |" "%s"\nexit 0\n' % table)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return dict(os.environ, PATH='%s:%s' % (bin_dir, os.environ['PATH']))


def packages(version):
    kver = version.split('-')[0]
    return {'source': 'linux-source-6.12',
            'headers': 'linux-headers-%s+deb12-amd64' % kver,
            'image': 'linux-image-%s+deb12-amd64-unsigned' % kver}


def run(env):
    env = dict(env)
    env.pop('NAP_LINUX_DEBIAN_VERSION', None)
    return subprocess.run([SCRIPT], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)


def test_the_pin_is_a_debian_package_version_of_linux_6_12():
    assert re.match(r'^6\.12\.\d+-\d+~deb12u\d+$', pin()), pin()


def test_a_served_pin_gives_the_exact_source_and_headers(tmp_path):
    version = pin()
    names = packages(version)
    env = archive(tmp_path, {name: ['6.12.107-1~deb12u1', version]
                             for name in names.values()})
    done = run(env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ['%s=%s' % (names['source'], version),
                                   '%s=%s' % (names['headers'], version)]


@pytest.mark.parametrize('missing', ['source', 'headers', 'image'])
def test_a_pin_the_archive_dropped_fails_with_the_line_to_change(
        tmp_path, missing):
    version = pin()
    newer = '6.12.%d-1~deb12u1' % (int(version.split('.')[2].split('-')[0])
                                   + 3)
    served = {}
    for role, name in packages(version).items():
        served[name] = [newer] + ([] if role == missing else [version])
    for name in packages(newer).values():
        served.setdefault(name, []).append(newer)
    done = run(archive(tmp_path, served))
    assert done.returncode == 1
    assert done.stdout == ''
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert version in lines[0] and newer in lines[0]
    assert packages(version)[missing] in lines[0]
    assert 'kvm-patch/linux-version' in lines[0]


def test_newest_is_the_highest_version_the_archive_serves(tmp_path):
    # Debian's versions sort as versions, not as strings: 6.12.99 is
    # older than 6.12.118.
    env = archive(tmp_path, {'linux-source-6.12': [
        '6.12.99-1~deb12u1', '6.12.121-1~deb12u1', '6.12.118-1~deb12u1']})
    env['NAP_LINUX_DEBIAN_VERSION'] = 'newest'
    out = subprocess.run(
        ['bash', '-c', '. "$1" && echo "$LINUX_DEBIAN_VERSION $KVER $KABI"',
         '-', os.path.join(kpatch.KVM_PATCH, 'lib.sh')], env=env,
        stdout=subprocess.PIPE, text=True, check=True).stdout.split()
    assert out == ['6.12.121-1~deb12u1', '6.12.121', '6.12.121+deb12-amd64']
