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

"""The extra-spec validators, loaded by the installed Nova the way nova-api
loads them (the ``nova.api.extra_spec_validators`` entry point)."""

import pytest

from nova.api.validation.extra_specs import validators as nova_validators
from nova import exception

from nova_adaptive_paging.api import validators
from nova_adaptive_paging import capabilities
from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary


@pytest.fixture(scope='module', autouse=True)
def loaded():
    nova_validators.load_validators()


def test_registered_through_the_entry_point():
    for key in vocabulary.KEYS:
        assert nova_validators.VALIDATORS[key] in \
            validators.EXTRA_SPEC_VALIDATORS


@pytest.mark.parametrize('key,value', [
    ('hw:paging', 'adaptive'), ('hw:paging', 'hap'), ('hw:paging', 'shadow'),
    ('hw:paging_interval', '1'), ('hw:paging_interval', '60'),
    ('hw:paging_profile', 'amd-zen3')])
def test_nova_accepts(key, value):
    nova_validators.validate(key, value)


@pytest.mark.parametrize('key,value', [
    ('hw:paging', 'bogus'), ('hw:paging', 'ept'),
    ('hw:paging_interval', '0'), ('hw:paging_interval', '61'),
    ('hw:paging_interval', 'x'), ('hw:paging_profile', 'Bad Name'),
    ('hw:paging_sometypo', '1')])
def test_nova_rejects(key, value):
    with pytest.raises(exception.ValidationError):
        nova_validators.validate(key, value)


@pytest.mark.parametrize('key', vocabulary.KEYS)
@pytest.mark.parametrize('value', [
    'adaptive', 'hap', 'shadow', 'HAP', 'Shadow', ' hap', 'hap\n', 'ept',
    '0', '1', '30', '60', '61', '-1', ' 5', '5\n', '1e1', '0x10',
    'amd-zen3', 'amd-zen3\n', 'a', '.x', 'x' * 63, 'x' * 64, ''])
def test_nova_and_policy_agree(key, value):
    """One rule, two front doors: Nova's API and the policy parser (which
    the filter and the agent use) accept exactly the same values."""
    try:
        nova_validators.validate(key, value)
        nova_ok = True
    except exception.ValidationError:
        nova_ok = False
    parse = {vocabulary.KEY_POLICY: policy.parse_paging,
             vocabulary.KEY_INTERVAL: policy.parse_interval,
             vocabulary.KEY_PROFILE: policy.parse_profile}[key]
    try:
        parse(value)
        ours = True
    except policy.PolicyError:
        ours = False
    assert ours == nova_ok, (key, value, nova_ok)


def test_the_agreement_is_not_vacuous():
    # Each key has values on both sides of its rule in the list above.
    for key, good, bad in ((vocabulary.KEY_POLICY, 'hap', 'HAP'),
                           (vocabulary.KEY_INTERVAL, '60', '61'),
                           (vocabulary.KEY_PROFILE, 'a', '.x')):
        nova_validators.validate(key, good)
        with pytest.raises(exception.ValidationError):
            nova_validators.validate(key, bad)


def _check_request(specs):
    """What nova-api does with the body of POST
    /flavors/{id}/os-extra_specs at microversion 2.86 or later."""
    from nova.api.openstack.compute import flavors_extraspecs
    from nova.tests.unit.api.openstack import fakes
    controller = flavors_extraspecs.FlavorExtraSpecsController()
    controller._check_extra_specs_value(
        fakes.HTTPRequest.blank('', version='2.86'), specs)


CONTRADICTIONS = [
    ({'hw:paging': 'adaptive', 'trait:CUSTOM_PAGING_SWITCHING': 'forbidden'},
     ('trait:CUSTOM_PAGING_SWITCHING', 'hw:paging=adaptive')),
    ({'trait2:CUSTOM_PAGING_SHADOW': 'forbidden', 'hw:paging': 'shadow'},
     ('trait2:CUSTOM_PAGING_SHADOW', 'hw:paging=shadow')),
    ({'hw:paging': 'hap', 'hw:paging_interval': '5'},
     ('hw:paging_interval', 'adaptive')),
]


@pytest.mark.parametrize('specs, named', CONTRADICTIONS)
def test_nova_api_checks_each_key_alone(specs, named):
    """Nova hands a validator one key and its value: keys that contradict
    each other pass the API, in one request as in several (a request's
    keys are not the flavor's).  The whole flavor is checked where it is
    seen; the same specs are refused there with a reason naming both."""
    _check_request(specs)
    with pytest.raises(policy.PolicyError) as exc:
        capabilities.flavor_policy(specs)
    for word in named:
        assert word in str(exc.value)


def test_a_bad_value_is_refused_in_a_request_of_several_keys():
    with pytest.raises(exception.ValidationError) as exc:
        _check_request({'trait:CUSTOM_PAGING_SWITCHING': 'required',
                        'hw:paging': 'ept'})
    assert 'ept' in str(exc.value)
