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

"""Nova API validators for the ``hw:paging*`` flavor extra specs.

Loaded by nova-api through the ``nova.api.extra_spec_validators`` entry
point; from microversion 2.86 Nova rejects unknown ``hw:`` keys, so without
these even valid values are refused.  The value rules come from
:mod:`nova_adaptive_paging.policy`.

Nova validates one key at a time and hands a validator the key and its
value only, so these check each key's value alone.  The rules across keys
(the companions only with ``hw:paging=adaptive``; no trait key that
forbids what ``hw:paging`` needs) are checked where the whole flavor is
seen: by the scheduler (RequestFilterFailed, whose reason reaches the
NoValidHost fault; AdaptivePagingFilter when the request filter is off),
by ``nova-paging policy check`` and by ``nova-paging flavor set`` (which
refuses to leave a flavor that contradicts itself).  A request's other
keys are not the flavor, and Nova gives a validator no way to see either.
"""

from nova.api.validation.extra_specs import base

from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary

_PAIRS = ', '.join('%s: ``%s=%s``' % (
    paging.value, vocabulary.trait_spec_key(trait),
    vocabulary.TRAIT_REQUIRED)
    for paging, trait in vocabulary.REQUIRED_TRAIT.items())

EXTRA_SPEC_VALIDATORS = [
    base.ExtraSpecValidator(
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
    base.ExtraSpecValidator(
        name=vocabulary.KEY_INTERVAL,
        description=(
            'Sampling interval, in seconds, of the adaptive-paging '
            'decision. Only with ``hw:paging=adaptive``.'),
        value={'type': int, 'min': policy.INTERVAL_MIN,
               'max': policy.INTERVAL_MAX},
    ),
    base.ExtraSpecValidator(
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
