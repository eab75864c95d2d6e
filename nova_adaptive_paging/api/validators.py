"""Nova API validators for the ``hw:paging*`` flavor extra specs.

Loaded by nova-api through the ``nova.api.extra_spec_validators`` entry
point; from microversion 2.86 Nova rejects unknown ``hw:`` keys, so without
these even valid values are refused.  The value rules come from
:mod:`nova_adaptive_paging.policy`.

Nova validates one key at a time and hands a validator the key and its
value only, so a rule across keys can be checked where one request
carries them together: each of these validators reads the other extra
specs of the request it validates (:func:`request_extra_specs`) and
refuses what ``nova-paging policy check`` refuses, such as
``hw:paging=adaptive`` beside ``trait:CUSTOM_PAGING_SWITCHING=forbidden``
or ``hw:paging_interval`` beside ``hw:paging=hap``.  Keys set over
several requests are refused by the scheduler (RequestFilterFailed,
whose reason reaches the NoValidHost fault) and flagged by ``nova-paging
policy check``.
"""

import dataclasses
import sys

from nova.api.validation.extra_specs import base
from nova import exception

from nova_adaptive_paging import capabilities
from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary

# nova.api.openstack.compute.flavors_extraspecs.FlavorExtraSpecsController:
# the method that loops over one request's extra specs calling Nova's
# validate(name, value), and its argument holding them.
_CALLER, _ARGUMENT = '_check_extra_specs_value', 'specs'


def request_extra_specs(depth=8):
    """The extra specs of the API request being validated, or None when
    not called from Nova's loop over them (another Nova, a unit test):
    the cross-key rule is then the scheduler's alone."""
    frame = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            return None
        if frame.f_code.co_name == _CALLER:
            specs = frame.f_locals.get(_ARGUMENT)
            return specs if isinstance(specs, dict) else None
        frame = frame.f_back
    return None


@dataclasses.dataclass
class PagingValidator(base.ExtraSpecValidator):
    """Nova's validator, and the request's keys checked together."""

    def validate(self, name, value):
        super().validate(name, value)
        specs = request_extra_specs()
        if specs is None:
            return
        try:
            capabilities.flavor_policy(
                {str(k): str(v) for k, v in specs.items()})
        except policy.PolicyError as exc:
            raise exception.ValidationError(
                'Validation failed; %s.' % exc)


_PAIRS = ', '.join('%s: ``%s=%s``' % (
    paging.value, vocabulary.trait_spec_key(trait),
    vocabulary.TRAIT_REQUIRED)
    for paging, trait in vocabulary.REQUIRED_TRAIT.items())

EXTRA_SPEC_VALIDATORS = [
    PagingValidator(
        name=vocabulary.KEY_POLICY,
        description=(
            'Paging mode of the guest. ``adaptive`` lets the host switch '
            'between hardware-assisted (EPT/NPT) and shadow paging at run '
            'time (needs the adaptive-paging KVM patch); ``hap`` and '
            '``shadow`` pin one mode. Unset: no requirement (the host '
            'agent\'s default applies). The scheduler asks placement for '
            'the trait each mode needs (%s); ``nova-paging flavor set`` '
            'also writes it into the flavor. Some guests are refused by '
            'the host even so: nested virtualization in the guest CPU '
            'model, memory encryption.' % _PAIRS),
        value={'type': str, 'enum': list(vocabulary.POLICIES)},
    ),
    PagingValidator(
        name=vocabulary.KEY_INTERVAL,
        description=(
            'Sampling interval, in seconds, of the adaptive-paging '
            'decision. Only with ``hw:paging=adaptive``.'),
        value={'type': int, 'min': policy.INTERVAL_MIN,
               'max': policy.INTERVAL_MAX},
    ),
    PagingValidator(
        name=vocabulary.KEY_PROFILE,
        description=(
            'Name of the threshold profile to use instead of the one '
            'calibrated for the host CPU generation. Only with '
            '``hw:paging=adaptive``.'),
        value={'type': str, 'pattern': policy.PROFILE_PATTERN},
    ),
]


def register():
    return EXTRA_SPEC_VALIDATORS
