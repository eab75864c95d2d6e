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

"""A guest's paging policy, from the Nova metadata in its domain XML.

Nova's libvirt driver writes ``<nova:instance>`` into every domain's
``<metadata>``: the instance name, its flavor (name and, since Nova
32.0.0, the flavor's extra specs) and its owner.  The domain's UUID is
the instance's.  A guest started before that release has no
``<nova:extraSpecs>`` until it is restarted, cold-migrated or shelved:
its flavor's extra specs are then looked up through the Nova API
(``lookup``, :mod:`.nova_api`), and until that answers the guest is left
as it is.
"""

import dataclasses
import logging
import xml.etree.ElementTree as ET

from nova_adaptive_paging import capabilities
from nova_adaptive_paging import exception
from nova_adaptive_paging import policy as policylib
from nova_adaptive_paging import vocabulary

LOG = logging.getLogger(__name__)

NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/1.1'
_N = '{%s}' % NOVA_NS

# Where a guest's policy came from (the ``source`` label of guest_info).
FROM_FLAVOR = 'flavor'
FROM_NOVA_API = 'nova-api'
FROM_DEFAULT = 'default'


@dataclasses.dataclass(frozen=True)
class Instance:
    """What Nova's metadata says of a domain; ``extra_specs`` is None when
    the metadata predates Nova 32.0.0."""

    uuid: str
    domain: str
    name: str = ''
    flavor: str = ''
    project: str = ''
    # The project's and the root image's UUIDs (Nova's scheduler knows a
    # new guest by them: the boot placement weigher, pools/boot.py).
    project_id: str = ''
    image: str = ''
    extra_specs: dict = None
    nova: bool = True
    vcpus: int = 1
    # The domain's memory (what a switch into shadow mode must cover, by
    # which the decision prices it); 0 when the XML does not say.
    memory_mib: int = 0


# libvirt's units of <memory> (it writes KiB), in KiB.
_KIB = {'b': 1 / 1024, 'bytes': 1 / 1024, 'k': 1, 'KiB': 1, 'M': 1024,
        'MiB': 1024, 'G': 1024 ** 2, 'GiB': 1024 ** 2, 'T': 1024 ** 3,
        'TiB': 1024 ** 3}


def _memory_mib(root):
    node = root.find('memory')
    try:
        kib = int(node.text) * _KIB[node.get('unit', 'KiB')]
    except (AttributeError, KeyError, TypeError, ValueError):
        return 0
    return max(int(kib // 1024), 0)


def read_instance(domain, uuid, xml_text):
    """The :class:`Instance` of a domain from its XML; a domain without
    Nova metadata is an Instance with ``nova=False``."""
    root = ET.fromstring(xml_text)
    try:
        vcpus = max(int(root.findtext('vcpu') or 1), 1)
    except ValueError:
        vcpus = 1
    memory_mib = _memory_mib(root)
    inst = root.find('metadata/%sinstance' % _N)
    if inst is None:
        return Instance(uuid, domain, nova=False, vcpus=vcpus,
                        memory_mib=memory_mib)
    flavor = inst.find(_N + 'flavor')
    project = inst.find('%sowner/%sproject' % (_N, _N))
    root = inst.find(_N + 'root')
    specs = None if flavor is None else flavor.find(_N + 'extraSpecs')
    return Instance(
        uuid=uuid, domain=domain,
        name=(inst.findtext(_N + 'name') or '').strip(),
        flavor='' if flavor is None else flavor.get('name', ''),
        project='' if project is None else (project.text or '').strip(),
        project_id='' if project is None else project.get('uuid', ''),
        image=(root.get('uuid', '') if root is not None
               and root.get('type') == 'image' else ''),
        extra_specs=None if specs is None else {
            e.get('name'): e.text or '' for e in specs.iter(_N + 'extraSpec')
            if e.get('name')},
        vcpus=vcpus, memory_mib=memory_mib)


@dataclasses.dataclass(frozen=True)
class Decision:
    """The policy to apply (None: leave the guest as it is for now)."""

    policy: policylib.PagingPolicy
    source: str
    problem: str = None


def decide(instance, default, lookup=None):
    """The :class:`Decision` for ``instance``.

    ``default`` is the host's ``default_policy``; ``lookup(instance)``
    returns its flavor's extra specs from the Nova API
    (:mod:`.nova_api`), or raises an exception.Error while the API cannot
    answer: the Decision's policy is then None.  An invalid value is one
    warning naming the instance, key and value, and the default applies.
    """
    fallback = policylib.PagingPolicy().resolve(default)
    if not instance.nova:
        return Decision(fallback, FROM_DEFAULT)
    specs, source = instance.extra_specs, FROM_FLAVOR
    if specs is None:
        if lookup is None:
            return Decision(fallback, FROM_DEFAULT)
        try:
            specs, source = lookup(instance), FROM_NOVA_API
        except exception.Error as exc:
            return Decision(None, FROM_NOVA_API, str(exc))
    try:
        parsed = policylib.from_extra_specs(specs).resolve(default)
    except policylib.PolicyError as exc:
        return Decision(fallback, FROM_DEFAULT, 'instance %s (flavor %s): '
                        '%s; applying the default, %s' % (
                            instance.uuid, instance.flavor or '-', exc,
                            fallback.paging.value))
    if vocabulary.KEY_POLICY not in specs:
        source = FROM_DEFAULT
    return Decision(parsed, source)


def honoured_here(decision, caps):
    """Whether this host can give the policy the guest's flavor asks for:
    it has one of the traits placement would have selected for.  False
    means the guest reached the host past the scheduler's check (a forced
    live migration or evacuation, the filter not enabled); None when the
    flavor asks nothing (the host's default applies) or the host was
    never read."""
    if (caps is None or decision.policy is None
            or decision.source == FROM_DEFAULT):
        return None
    return bool(capabilities.accepted_traits(decision.policy.paging)
                & caps.traits())


@dataclasses.dataclass
class Guest:
    """What the agent knows of one running domain."""

    domain: str
    instance: Instance
    decision: Decision
    vm: str = None                  # its <pid>-<fd> name
    last_vm: str = None             # ... the last found, kept across misses
    target: object = None           # writer.Target
    problem: str = None             # why it is not (yet) as it should be
    stats: dict = None              # the last paging_stats read
    samples_seen: int = 0
    pending: list = None            # read_only: the writes it would make
    advisor: object = None          # advisory hosts: advisory.Advisor
    counters: object = None         # ... and its guest-only counters
    counters_ok: bool = None
    fault_stats: bool = None        # adaptive: its balloon counts faults
    fault_feed: object = None       # ... bounded: faults.FaultFeed
    decider: object = None          # decision = agent: decider.Decider
    # A kernel with the mechanism alone: (VM, mode) the agent last set
    # with KVM_SET_PAGING_MODE, the one record of a VM's mode there.
    mode_set: tuple = None

    def set_here(self):
        """The mode the agent last set for the VM the guest runs now
        (None: none yet; a record of another VM, one the domain ran
        before, says nothing of this one)."""
        if self.mode_set and self.vm and self.mode_set[0] == self.vm:
            return self.mode_set[1]
        return None

    def honoured_here(self, caps):
        """:func:`honoured_here` of this guest's decision (the collector
        asks the guest, so that telemetry imports nothing of the agent)."""
        return honoured_here(self.decision, caps)
