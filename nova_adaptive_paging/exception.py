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

"""The base of the errors this package raises for bad input or a refusal.

Each carries a one-line message that names the input (file, key, flag),
the value and what was expected.  ``nova-paging`` turns any of them into
that line on stderr and exit status 2 (:mod:`nova_adaptive_paging.cmd`);
the agent logs the line and keeps its last good state.
"""

import difflib


class Error(Exception):
    """A clear, one-line error about an input or the host's state."""


def closest(word, choices):
    """The choice closest to a misspelled ``word``, or None when none is
    close."""
    near = difflib.get_close_matches(str(word), list(choices), 1)
    return near[0] if near else None


def did_you_mean(word, choices):
    """``'did you mean X?'`` for the choice closest to a misspelled
    ``word``, or ``''`` when none is close: the hint every one-line error
    about a name gives."""
    near = closest(word, choices)
    return 'did you mean %s?' % near if near else ''
