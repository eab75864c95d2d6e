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

from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary


@pytest.mark.parametrize('value,expected', [
    ('adaptive', vocabulary.Paging.ADAPTIVE), ('hap', vocabulary.Paging.HAP),
    ('shadow', vocabulary.Paging.SHADOW)])
def test_valid_paging_values(value, expected):
    assert policy.from_extra_specs({'hw:paging': value}).paging == expected


@pytest.mark.parametrize('value,hint', [
    ('HAP', 'hap'), (' hap', 'hap'), ('Shadow', 'shadow'), ('ept', 'hap'),
    # Misspellings get the closest word, as aliases get theirs.
    ('adaptiv', 'adaptive'), ('shadw', 'shadow'), ('Adaptve', 'adaptive')])
def test_near_misses_are_refused_with_a_hint(value, hint):
    # Nova's validator (an enum) refuses them; so must every parser here.
    with pytest.raises(policy.PolicyError) as err:
        policy.parse_paging(value)
    assert "did you mean '%s'?" % hint in str(err.value)


def test_bogus_value_names_key_value_and_choices():
    with pytest.raises(policy.PolicyError) as err:
        policy.from_extra_specs({'hw:paging': 'bogus'})
    assert str(err.value) == ("invalid hw:paging='bogus': expected one of "
                              "hap, shadow, adaptive")


@pytest.mark.parametrize('alias,hint', [('ept', 'hap'), ('npt', 'hap'),
                                        ('nested', 'hap'), ('dsp',
                                                            'adaptive')])
def test_aliases_are_refused_with_a_hint(alias, hint):
    with pytest.raises(policy.PolicyError, match="did you mean '%s'" % hint):
        policy.parse_paging(alias)


def test_missing_paging_takes_the_host_default():
    parsed = policy.from_extra_specs({'hw:cpu_policy': 'dedicated'})
    assert parsed.paging is None
    assert parsed.resolve('shadow').paging == vocabulary.Paging.SHADOW
    explicit = policy.from_extra_specs({'hw:paging': 'hap'})
    assert explicit.resolve('adaptive').paging == vocabulary.Paging.HAP


@pytest.mark.parametrize('value,seconds', [('1', 1), ('60', 60), (' 5', 5)])
def test_interval_range(value, seconds):
    parsed = policy.from_extra_specs({'hw:paging': 'adaptive',
                                      'hw:paging_interval': value})
    assert parsed.interval_s == seconds


@pytest.mark.parametrize('value', ['0', '61', '-1', '2.5', 'five', ''])
def test_interval_out_of_range(value):
    with pytest.raises(policy.PolicyError,
                       match='hw:paging_interval.*from 1 to 60'):
        policy.from_extra_specs({'hw:paging': 'adaptive',
                                 'hw:paging_interval': value})


def test_profile_name():
    parsed = policy.from_extra_specs({'hw:paging': 'adaptive',
                                      'hw:paging_profile': 'amd-zen3'})
    assert parsed.profile == 'amd-zen3'
    with pytest.raises(policy.PolicyError, match='hw:paging_profile'):
        policy.from_extra_specs({'hw:paging_profile': '../etc/passwd'})


@pytest.mark.parametrize('paging', ['hap', 'shadow'])
def test_companions_need_adaptive(paging):
    with pytest.raises(policy.PolicyError, match='only applies with'):
        policy.from_extra_specs({'hw:paging': paging,
                                 'hw:paging_interval': '5'})


def test_companions_checked_against_the_host_default():
    parsed = policy.from_extra_specs({'hw:paging_interval': '5'})
    assert parsed.resolve('adaptive').interval_s == 5
    with pytest.raises(policy.PolicyError, match='only applies with'):
        parsed.resolve('hap')


@pytest.mark.parametrize('key, near', [
    ('hw:paging_intervall', 'hw:paging_interval'),
    ('hw:pagin', 'hw:paging'),          # not under hw:paging at all
    ('hw:pageing', 'hw:paging'),
    ('hw:paging_profil', 'hw:paging_profile'),
])
def test_a_key_that_looks_like_ours_is_an_error_with_a_hint(key, near):
    with pytest.raises(policy.PolicyError) as info:
        policy.from_extra_specs({key: '5'})
    assert key in str(info.value)
    assert 'did you mean %s?' % near in str(info.value)


def test_nova_s_own_keys_are_left_alone():
    assert policy.from_extra_specs({'hw:mem_page_size': 'large',
                                    'hw:pmu': 'true'}).paging is None


def test_round_trip_to_extra_specs():
    specs = {'hw:paging': 'adaptive', 'hw:paging_interval': '10',
             'hw:paging_profile': 'intel-nehalem'}
    assert policy.from_extra_specs(specs).to_extra_specs() == specs
