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

"""The paging policy a flavor asks for, parsed from its extra specs.

This module is the single definition of the ``hw:paging*`` extra specs:
the Nova API validators (:mod:`nova_adaptive_paging.api.validators`), the
scheduler filter, the agent and ``nova-paging policy check`` all use it.

``hw:paging``            ``adaptive`` | ``hap`` | ``shadow``.  Missing means
                         the host's configured default
                         (``[adaptive_paging] default_policy``).
``hw:paging_interval``   DSP sampling interval in seconds, 1-60
                         (adaptive only; default: the threshold profile's).
``hw:paging_profile``    name of a threshold profile to use instead of the
                         host's CPU-generation profile (adaptive only).

Aliases such as ``ept``, ``npt`` or ``nested`` are refused with a hint
rather than accepted: a flavor is read by people and by placement-trait
matching, and one spelling per mode keeps both unambiguous.
"""

import dataclasses

from nova_adaptive_paging import exception
from nova_adaptive_paging import profiles
from nova_adaptive_paging import vocabulary

INTERVAL_MIN, INTERVAL_MAX = 1, 60
PROFILE_PATTERN = profiles.NAME_PATTERN

_ALIASES = {'ept': vocabulary.HAP, 'npt': vocabulary.HAP,
            'tdp': vocabulary.HAP, 'nested': vocabulary.HAP,
            'hardware': vocabulary.HAP, 'sp': vocabulary.SHADOW,
            'software': vocabulary.SHADOW, 'dsp': vocabulary.ADAPTIVE,
            'dynamic': vocabulary.ADAPTIVE, 'auto': vocabulary.ADAPTIVE}


class PolicyError(exception.Error, ValueError):
    """An extra spec is invalid; the message names key, value, expectation."""

    def __init__(self, key, value, expected):
        self.key, self.value, self.expected = key, value, expected
        super().__init__('invalid %s=%r: expected %s' % (key, value, expected))


@dataclasses.dataclass(frozen=True)
class PagingPolicy:
    """A validated paging request.

    ``paging`` is None when the flavor does not say; :meth:`resolve`
    applies the host default.
    """

    paging: vocabulary.Paging = None
    interval_s: int = None
    profile: str = None

    def resolve(self, default):
        """The policy with a missing ``hw:paging`` replaced by ``default``."""
        if self.paging is not None:
            return self
        resolved = dataclasses.replace(self, paging=vocabulary.Paging(default))
        _check_companions(resolved)
        return resolved

    def to_extra_specs(self):
        specs = {}
        if self.paging is not None:
            specs[vocabulary.KEY_POLICY] = self.paging.value
        if self.interval_s is not None:
            specs[vocabulary.KEY_INTERVAL] = str(self.interval_s)
        if self.profile is not None:
            specs[vocabulary.KEY_PROFILE] = self.profile
        return specs


def parse_paging(value):
    """Validate a ``hw:paging`` value; return the vocabulary.Paging.

    Exactly one of the words, as Nova's validator (an enum) and the
    kernel interface take them: ``HAP`` or ``'hap '`` is refused with a
    hint, never quietly accepted by one parser and refused by another."""
    try:
        return vocabulary.Paging(value)
    except ValueError:
        expected = 'one of %s' % ', '.join(vocabulary.POLICIES)
        text = value.strip().lower() if isinstance(value, str) else value
        # An alias, another case or spacing, or a misspelling (``adaptiv``).
        hint = _ALIASES.get(text) or (text if text in vocabulary.POLICIES
                                      else None)
        if hint is None and isinstance(text, str):
            hint = exception.closest(text, vocabulary.POLICIES)
        if hint:
            expected += ' (did you mean %r?)' % hint
        raise PolicyError(vocabulary.KEY_POLICY, value, expected)


def parse_interval(value):
    """Validate a ``hw:paging_interval`` value; return whole seconds."""
    expected = 'an integer number of seconds from %d to %d' % (
        INTERVAL_MIN, INTERVAL_MAX)
    try:
        seconds = int(str(value).strip(), 10)
    except ValueError:
        raise PolicyError(vocabulary.KEY_INTERVAL, value, expected)
    if not INTERVAL_MIN <= seconds <= INTERVAL_MAX:
        raise PolicyError(vocabulary.KEY_INTERVAL, value, expected)
    return seconds


def parse_profile(value):
    """Validate a ``hw:paging_profile`` value (a profile name)."""
    if not isinstance(value, str) or not profiles.NAME_RE.fullmatch(value):
        raise PolicyError(vocabulary.KEY_PROFILE, value,
                          'a profile name matching %s' % PROFILE_PATTERN)
    return value


def _check_companions(policy):
    if policy.paging in (None, vocabulary.Paging.ADAPTIVE):
        return
    for key, value in ((vocabulary.KEY_INTERVAL, policy.interval_s),
                       (vocabulary.KEY_PROFILE, policy.profile)):
        if value is not None:
            raise PolicyError(key, value, 'no value: %s only applies with '
                              '%s=%s, not %s' % (key, vocabulary.KEY_POLICY,
                                                 vocabulary.ADAPTIVE,
                                                 policy.paging))


# Extra-spec keys that look like ours: a typo of one of vocabulary.KEYS.
KEY_NAMESPACE = vocabulary.KEY_POLICY[:len('hw:pag')]


def from_extra_specs(extra_specs):
    """Parse the ``hw:paging*`` keys of a flavor's extra specs.

    Keys outside this namespace are ignored; an unknown key that starts
    like ours (``hw:pag...``: ``hw:pagin``, ``hw:paging_intervl``) is an
    error naming the closest of ours, so a typo never silently falls back
    to a default.  Nova has no ``hw:pag...`` key of its own.
    """
    for key in extra_specs:
        if key.startswith(KEY_NAMESPACE) and key not in vocabulary.KEYS:
            expected = 'a known key: %s' % ', '.join(vocabulary.KEYS)
            hint = exception.did_you_mean(key, vocabulary.KEYS)
            if hint:
                expected += ' (%s)' % hint
            raise PolicyError(key, extra_specs[key], expected)
    policy = PagingPolicy(
        paging=(parse_paging(extra_specs[vocabulary.KEY_POLICY])
                if vocabulary.KEY_POLICY in extra_specs else None),
        interval_s=(parse_interval(extra_specs[vocabulary.KEY_INTERVAL])
                    if vocabulary.KEY_INTERVAL in extra_specs else None),
        profile=(parse_profile(extra_specs[vocabulary.KEY_PROFILE])
                 if vocabulary.KEY_PROFILE in extra_specs else None),
    )
    _check_companions(policy)
    return policy
