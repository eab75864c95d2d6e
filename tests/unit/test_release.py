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

"""The release's one version (setup.cfg) against what the docs, the
example inventory and the collection pin, and the check that
``tox -e release`` runs on what it built (tools/release.py)."""

import io
import os
import shutil
import sys
import tarfile
import zipfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
sys.path.insert(0, os.path.join(REPO, 'tools'))
import release  # noqa: E402


def test_the_docs_and_the_collection_pin_the_release():
    assert release.version() == '0.1.0'       # setup.cfg, read as pbr does
    assert release.wrong_pins(release.version()) == []


def test_a_pin_to_another_version_is_found(tmp_path):
    for rel in ('setup.cfg', 'README.md', 'ansible/README.md',
                'ansible/galaxy.yml', 'doc/source/deployment.rst'):
        os.makedirs(tmp_path / os.path.dirname(rel), exist_ok=True)
        shutil.copy(os.path.join(REPO, rel), tmp_path / rel)
    assert release.wrong_pins('0.1.0', str(tmp_path)) == []
    page = tmp_path / 'doc' / 'source' / 'deployment.rst'
    page.write_text(page.read_text() +
                    '\n   pip install nova-adaptive-paging==0.1.0.dev312\n')
    wrong = release.wrong_pins('0.1.0', str(tmp_path))
    assert len(wrong) == 1
    assert wrong[0].startswith('doc/source/deployment.rst:')
    assert wrong[0].endswith('nova-adaptive-paging==0.1.0.dev312')
    # The collection is released with the package, at its version.
    assert release.wrong_pins('0.2.0', str(tmp_path))[-1] == \
        'ansible/galaxy.yml: version: 0.1.0'


def test_the_built_versions_come_from_the_files_metadata(tmp_path):
    # Named one way, versioned another: the metadata is what pip installs.
    with zipfile.ZipFile(tmp_path / 'nap-0.1.0-py3-none-any.whl', 'w') as z:
        z.writestr('nap-0.1.0.dist-info/METADATA',
                   'Metadata-Version: 2.1\nName: nap\nVersion: 0.1.0.dev3\n')
    with tarfile.open(tmp_path / 'nap-0.1.0.tar.gz', 'w:gz') as t:
        data = b'Metadata-Version: 2.1\nName: nap\nVersion: 0.1.0\n'
        info = tarfile.TarInfo('nap-0.1.0/PKG-INFO')
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    assert release.built_versions(str(tmp_path)) == {
        'nap-0.1.0-py3-none-any.whl': '0.1.0.dev3',
        'nap-0.1.0.tar.gz': '0.1.0'}
