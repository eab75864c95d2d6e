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

import pytest
import yaml

from nova_adaptive_paging import dsp
from nova_adaptive_paging import profiles

GOOD = profiles.builtin().to_dict()


def write(tmp_path, doc, name='p.yaml'):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return str(path)


def test_builtin_is_table2_with_provenance():
    p = profiles.builtin('intel-nehalem')
    assert p.generation == profiles.FALLBACK_GENERATION == 'intel-nehalem'
    assert p.to_dict()['thresholds'] == {
        'tlb_upper': 10, 'tlb_lower': 0.1, 'pf_upper': 5000,
        'pf_lower': 100, 'pt_upper': 200, 'pt_lower': 150}
    assert (p.history_samples, p.interval_s) == (3, 5)
    assert p.provenance.method == 'paper'
    assert 'i7-860' in p.provenance.source


def test_dump_load_round_trip(tmp_path):
    p = profiles.builtin()
    assert profiles.load(write(tmp_path, p.dump())) == p


@pytest.mark.parametrize('value,milli', [(10, 10000), (0.1, 100),
                                         ('0.001', 1), (0, 0)])
def test_to_milli_is_exact(value, milli):
    assert profiles.to_milli(value) == milli
    assert profiles.to_milli(profiles.from_milli(milli)) == milli


@pytest.mark.parametrize('value', [0.0001, -1, 'x', None, True, float('nan')])
def test_to_milli_refuses(value):
    with pytest.raises(ValueError):
        profiles.to_milli(value)


def mutate(path, value):
    doc = yaml.safe_load(yaml.safe_dump(GOOD))
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


@pytest.mark.parametrize('path,value,field,problem', [
    (('thresholds', 'tlb_upper'), 'ten', 'thresholds.tlb_upper',
     'expected a number'),
    (('thresholds', 'pf_lower'), KeyError, 'thresholds.pf_lower', 'missing'),
    (('thresholds', 'pt_lower'), 500, 'thresholds',
     'pt_lower (500000) must not exceed pt_upper'),
    (('thresholds', 'tlb_lower'), 0.00001, 'thresholds.tlb_lower',
     'at most 3 decimals'),
    (('history_samples',), 0, 'history_samples', 'expected an integer'),
    (('history_samples',), 65, 'history_samples', 'expected an integer'),
    (('interval_s',), 'soon', 'interval_s', 'expected an integer'),
    (('format_version',), 2, 'format_version', 'expected 1'),
    (('generation',), 'Intel Nehalem', 'generation', 'expected a key'),
    (('provenance', 'method'), 'guess', 'provenance.method',
     'expected one of'),
    (('provenance', 'hosts'), -3, 'provenance.hosts', 'non-negative'),
    (('thresholds', 'tlb_uper'), 1, 'thresholds.tlb_uper', 'unknown field'),
])
def test_malformed_profile_names_file_field_problem(
        tmp_path, path, value, field, problem):
    f = write(tmp_path, mutate(path, value))
    with pytest.raises(profiles.ProfileError) as err:
        profiles.load(f)
    assert err.value.source == f
    assert err.value.field == field
    assert problem in err.value.problem
    assert str(err.value).startswith('%s: %s: ' % (f, field))


def test_not_yaml_names_the_line(tmp_path):
    f = write(tmp_path, 'format_version: 1\nthresholds: [unclosed\n')
    with pytest.raises(profiles.ProfileError, match=r'\(line \d+\)'):
        profiles.load(f)


def test_missing_file(tmp_path):
    with pytest.raises(profiles.ProfileError, match='No such file'):
        profiles.load(str(tmp_path / 'absent.yaml'))


def test_bad_file_keeps_the_last_good_set(tmp_path):
    found = profiles.ProfileSet()
    zen = mutate(('generation',), 'amd-zen3')
    zen['thresholds']['tlb_upper'] = 4
    found.reload([write(tmp_path, zen, 'zen3.yaml')])
    assert found.for_generation('amd-zen3').thresholds.tlb_upper == 4000
    # zen3.yaml turns bad: it keeps its last good version; a second bad
    # file is dropped on its own, and a good file beside them applies.
    zen3 = write(tmp_path, mutate(('thresholds', 'tlb_upper'), 'x'),
                 'zen3.yaml')
    broken = write(tmp_path, mutate(('thresholds', 'tlb_upper'), 'y'),
                   'broken.yaml')
    zen4 = mutate(('generation',), 'amd-zen4')
    errors = found.reload([zen3, broken,
                           write(tmp_path, zen4, 'zen4.yaml')])
    assert sorted(str(e).split(':')[0] for e in errors) == [broken, zen3]
    assert found.for_generation('amd-zen3').thresholds.tlb_upper == 4000
    assert found.has('amd-zen4')
    # Two files for one generation: the first applies, the second is
    # reported.
    errors = found.reload([write(tmp_path, zen4, 'a.yaml'),
                           write(tmp_path, zen4, 'b.yaml')])
    assert len(errors) == 1 and 'b.yaml' in str(errors[0])


def test_unknown_generation_falls_back_to_builtin():
    found = profiles.ProfileSet()
    assert not found.has('amd-zen5')
    assert found.for_generation('amd-zen5') == profiles.builtin()


def test_file_overrides_builtin_of_same_generation(tmp_path):
    found = profiles.ProfileSet()
    doc = mutate(('provenance', 'method'), 'calibrated')
    found.reload([write(tmp_path, doc)])
    assert found.for_generation('intel-nehalem').provenance.method == \
        'calibrated'
    assert isinstance(found.for_generation('intel-nehalem').thresholds,
                      dsp.Thresholds)
