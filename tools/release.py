#!/usr/bin/env python3
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

"""Build the release named in setup.cfg and check that what was built is
what the docs and the deployment examples pin (``tox -e release``).

    python tools/release.py check        # the pins only
    python tools/release.py build dist   # the pins, then sdist and wheel

One source of truth: ``[metadata] version`` in setup.cfg, pbr's
pre-version (the release being made).  Without a release tag pbr would
name a build ``<version>.devN``, a version no index holds and no
inventory pins; the build sets ``PBR_VERSION`` to the release instead,
as pbr documents for packagers, and fails unless the sdist and the
wheel carry exactly that version and every pin of the package in the
docs, the example inventory and the Ansible collection's galaxy.yml
names it.
"""

import configparser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
NAME = 'nova-adaptive-paging'
# Where an operator reads the version to install: the docs' examples
# (inventory included), the READMEs and the release notes' title.
PINNED_IN = ('README.md', 'ansible/README.md', 'doc/source')
PIN_RE = re.compile(r'%s==([0-9A-Za-z.+-]+)' % re.escape(NAME))


def version(repo=REPO):
    """The release being made: setup.cfg's ``[metadata] version``."""
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(repo, 'setup.cfg'))
    return cfg['metadata']['version'].strip()


def _texts(repo):
    for top in PINNED_IN:
        path = os.path.join(repo, top)
        if os.path.isfile(path):
            yield top, path
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = [d for d in dirnames if d not in ('api', 'build')]
            for name in sorted(filenames):
                if name.endswith(('.rst', '.md')):
                    full = os.path.join(dirpath, name)
                    yield os.path.relpath(full, repo), full


def wrong_pins(release, repo=REPO):
    """``file:line: pin`` for each pin of the package to another version,
    and for a collection whose version is not the release."""
    found = []
    for rel, path in _texts(repo):
        with open(path, encoding='utf-8') as f:
            for number, line in enumerate(f, 1):
                for match in PIN_RE.finditer(line):
                    if match.group(1) != release:
                        found.append('%s:%d: %s' % (rel, number,
                                                    match.group(0)))
    galaxy = os.path.join(repo, 'ansible', 'galaxy.yml')
    with open(galaxy, encoding='utf-8') as f:
        collection = str(yaml.safe_load(f).get('version'))
    if collection != release:
        found.append('ansible/galaxy.yml: version: %s' % collection)
    return found


def built_versions(dist):
    """{file name: version} of the sdists and wheels in ``dist``, from
    their own metadata (PKG-INFO, the wheel's METADATA)."""
    out = {}
    for name in sorted(os.listdir(dist)):
        path = os.path.join(dist, name)
        if name.endswith('.whl'):
            with zipfile.ZipFile(path) as z:
                meta = next(n for n in z.namelist()
                            if n.endswith('.dist-info/METADATA'))
                text = z.read(meta).decode('utf-8')
        elif name.endswith('.tar.gz'):
            with tarfile.open(path) as t:
                member = next(m for m in t.getmembers()
                              if m.name.count('/') == 1
                              and m.name.endswith('/PKG-INFO'))
                text = t.extractfile(member).read().decode('utf-8')
        else:
            continue
        out[name] = re.search(r'^Version: (\S+)$', text, re.M).group(1)
    return out


def check(release, repo=REPO):
    problems = wrong_pins(release, repo)
    for line in problems:
        print('release %s: pinned otherwise at %s' % (release, line),
              file=sys.stderr)
    return not problems


def build(release, dist, repo=REPO):
    shutil.rmtree(dist, ignore_errors=True)
    env = dict(os.environ, PBR_VERSION=release)
    subprocess.run([sys.executable, '-m', 'build', '--sdist', '--wheel',
                    '--outdir', dist, repo], check=True, env=env)
    built = built_versions(dist)
    ok = len(built) == 2
    for name, got in sorted(built.items()):
        if got != release:
            print('release %s: %s was built as %s' % (release, name, got),
                  file=sys.stderr)
            ok = False
    if len(built) != 2:
        print('release %s: expected one sdist and one wheel in %s, found %s'
              % (release, dist, ', '.join(built) or 'none'), file=sys.stderr)
    return ok


def main(argv):
    release = version()
    if argv[:1] == ['check'] and len(argv) == 1:
        ok = check(release)
    elif argv[:1] == ['build'] and len(argv) == 2:
        ok = check(release) and build(release, os.path.abspath(argv[1]))
    else:
        print('usage: release.py check | release.py build DIST',
              file=sys.stderr)
        return 2
    if ok:
        print('release %s: %s' % (release, 'built and pinned'
                                  if argv[0] == 'build' else 'pinned'))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
