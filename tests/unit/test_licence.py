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

"""The licence: Apache-2.0 in the package's metadata, the collection's
and the LICENSE file, and the standard OpenStack header in every Python
and shell source file outside the kernel series (GPL-2.0, kvm-patch/)."""

import configparser
import os
import re

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SOURCE_DIRS = ('nova_adaptive_paging', 'tests', 'bench', 'tools',
               'host-agent', 'ansible')
SUFFIXES = ('.py', '.sh')

# The header OpenStack projects carry (hacking's H102/H103 look for it),
# compared word by word: comment markers and line breaks do not count.
HEADER = """
Licensed under the Apache License, Version 2.0 (the "License"); you may
not use this file except in compliance with the License. You may obtain
a copy of the License at

     http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
License for the specific language governing permissions and limitations
under the License.
"""


def _words(text):
    return ' '.join(text.split())


def has_header(text):
    """Whether the comment block that opens ``text`` (after a shebang or
    a coding line) holds the standard header."""
    block = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith('#'):
            if stripped:
                break
            continue
        block.append(re.sub(r'^#+!?', '', stripped))
    return _words(HEADER) in _words('\n'.join(block))


def source_files():
    """Every .py and .sh file of the source directories; an empty file
    (a package's bare __init__.py) holds nothing to license."""
    for top in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(REPO, top)):
            dirnames[:] = [d for d in dirnames if not d.startswith('.')
                           and d != '__pycache__']
            for name in filenames:
                path = os.path.join(dirpath, name)
                if name.endswith(SUFFIXES) and os.path.getsize(path):
                    yield os.path.relpath(path, REPO)


def test_the_check_finds_the_header_and_its_absence():
    header = ''.join('#    %s\n' % line if line else '#\n'
                     for line in HEADER.strip().splitlines())
    assert has_header('#!/bin/sh\n# Copyright 2026 x\n#\n' + header +
                      '\nset -e\n')
    assert has_header(header + '\n"""Docstring."""\n')
    assert not has_header('"""Docstring."""\n' + header)
    assert not has_header(header.replace('AS IS', 'AS-IS'))
    assert not has_header('import os\n')


def test_the_source_tree_is_walked():
    found = set(source_files())
    assert 'nova_adaptive_paging/policy.py' in found
    assert any(path.startswith('bench/') for path in found)


def test_every_source_file_carries_the_apache_header():
    missing = []
    for rel in source_files():
        with open(os.path.join(REPO, rel), encoding='utf-8') as f:
            if not has_header(f.read()):
                missing.append(rel)
    assert not missing, 'no Apache-2.0 header in: %s' % ', '.join(missing)


def test_the_licence_is_apache_2_everywhere_it_is_declared():
    with open(os.path.join(REPO, 'LICENSE'), encoding='utf-8') as f:
        text = f.read()
    assert 'Apache License' in text and 'Version 2.0, January 2004' in text
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(REPO, 'setup.cfg'))
    assert cfg['metadata']['license'] == 'Apache-2.0'
    assert ('License :: OSI Approved :: Apache Software License'
            in cfg['metadata']['classifier'])
    with open(os.path.join(REPO, 'ansible', 'galaxy.yml')) as f:
        assert yaml.safe_load(f)['license'] == ['Apache-2.0']
