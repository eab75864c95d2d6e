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

"""What a pass works on, each in its own narrow piece: the host's state
and interface, how a guest's policy is found, what the operator asks of
the host, advisory mode's means.  :mod:`.reconcile` and :mod:`.sampler`
take these (and the guest table, libvirt's domains and the agent's
health), not the agent: what a fault can reach is in their signatures.
"""

import dataclasses

from nova_adaptive_paging import vocabulary


@dataclasses.dataclass(eq=False)
class HostState:
    """The host's interface and what the last pass read of it."""

    root: str
    transport: object               # host.files, privileged, the model
    generation: str
    thresholds: object              # thresholds.HostThresholds
    read_only: bool = False         # look, write nothing (host status)
    abi_version: int = 0
    caps: object = None             # capabilities.Capabilities, last read
    published: frozenset = None     # traits last published


@dataclasses.dataclass(frozen=True)
class Policies:
    """How a guest's policy is found: ``default_policy`` and the Nova API
    lookup for metadata without extra specs (None: the default)."""

    default: str
    lookup: object = None


@dataclasses.dataclass(frozen=True)
class HostOptions:
    """What the operator asks of the host, as configured now."""

    count_all_guests: bool = False
    count_walk_cycles: bool = True
    pool: bool = False
    publisher: object = None        # publishes traits, or None
    decision: str = vocabulary.DECIDED_BY_KERNEL

    @classmethod
    def from_conf(cls, ap, publisher=None):
        """From ``[adaptive_paging]`` (mutable: read at every pass)."""
        return cls(ap.count_all_guests, ap.count_walk_cycles, ap.pool,
                   publisher, ap.decision)


@dataclasses.dataclass(frozen=True)
class Advice:
    """Advisory mode's and the agent's decision's means: the generation's
    cost model (MODELED), the clock of the guests' intervals, how their
    counters are opened, and the test hook that replaces them
    (``decision_samples_dir``: a decider.SampleFiles, or None)."""

    hw: object
    clock: object
    counters: object
    samples: object = None
