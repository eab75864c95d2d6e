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

"""Write a paging policy onto a Nova flavor: ``hw:paging*`` and its trait.

A flavor that asks ``hw:paging=shadow`` must also require the placement
trait ``CUSTOM_PAGING_SHADOW``: Nova turns ``trait:…=required`` into
placement's ``required=``, so the capable hosts are among the at most
``[scheduler] max_placement_results`` candidates however few they are.
:func:`set_policy` writes the pair in one step (and removes the other
modes' required traits and companions left from an earlier policy; a
``trait:CUSTOM_PAGING_*=forbidden`` is the operator's and stays), through
openstacksdk's compute proxy, and refuses to leave a flavor whose other
trait keys contradict the policy.  The scheduler catches a flavor where
the two disagree when it was written by other means.
"""

from nova_adaptive_paging import capabilities
from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary


def _written_here(key, value):
    """Whether ``key=value`` is one :func:`plan` may have written: a
    ``hw:paging*`` key, or a paging trait required (this package never
    forbids one: a forbidden trait is the operator's choice, such as an
    adaptive flavor in pools staying off switching hosts)."""
    return capabilities.owned_extra_spec(key) and (
        key in vocabulary.KEYS
        or str(value).strip().lower() == vocabulary.TRAIT_REQUIRED)


def plan(current, paging_policy, pools=False):
    """``(to_write, to_remove)``: the extra specs that make a flavor whose
    extra specs are ``current`` ask for ``paging_policy`` (None: ask for
    nothing; ``pools``: adaptive in a fleet of paging pools), leaving
    every key this package does not own alone."""
    wanted = (capabilities.flavor_extra_specs(paging_policy, pools)
              if paging_policy is not None else {})
    # What this package writes must be valid on its own ...
    policy.from_extra_specs(wanted)
    to_write = {key: value for key, value in wanted.items()
                if current.get(key) != value}
    to_remove = sorted(key for key, value in current.items()
                       if _written_here(key, value) and key not in wanted)
    # ... and so must the flavor it leaves: a key of the operator's (a
    # forbidden trait, a granular group's
    # trait1:CUSTOM_PAGING_SWITCHING=forbidden) can contradict the
    # policy, and the scheduler would refuse every boot.  Here the whole
    # flavor is seen, as nova-api's per-key validators never see it; the
    # PolicyError names the key and the trait, and nothing is written.
    result = {key: value for key, value in current.items()
              if key not in to_remove}
    result.update(to_write)
    capabilities.flavor_policy(result)
    return to_write, to_remove


def set_policy(compute, flavor, paging_policy, pools=False):
    """Make ``flavor`` (name or ID) ask for ``paging_policy`` (None:
    nothing) through the openstacksdk compute proxy ``compute``.

    The new keys are written before the stale ones are removed, so the
    flavor never asks ``hw:paging`` without its trait in between.
    Returns ``(flavor, written, removed)``.
    """
    found = compute.find_flavor(flavor, ignore_missing=False)
    current = dict(compute.fetch_flavor_extra_specs(found).extra_specs
                   or {})
    to_write, to_remove = plan(current, paging_policy, pools)
    if to_write:
        compute.create_flavor_extra_specs(found, to_write)
    for key in to_remove:
        compute.delete_flavor_extra_specs_property(found, key)
    return found, to_write, to_remove
