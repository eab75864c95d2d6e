"""The extra-spec validators, loaded by the installed Nova the way nova-api
loads them (the ``nova.api.extra_spec_validators`` entry point)."""

import pytest

from nova.api.validation.extra_specs import validators as nova_validators
from nova import exception

from nova_adaptive_paging.api import validators
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
@pytest.mark.parametrize('value', ['adaptive', 'hap', 'shadow', 'HAP', '0',
                                   '1', '30', '60', '61', '-1', 'amd-zen3',
                                   'a', '.x', 'x' * 64, ''])
def test_nova_and_policy_agree(key, value):
    """One rule, two front doors: Nova's API and the policy parser.

    Nova compares the enum case-sensitively while the parser folds case;
    only the spellings Nova accepts are compared.
    """
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
    if nova_ok:
        assert ours
    elif key != vocabulary.KEY_POLICY:
        assert not ours
