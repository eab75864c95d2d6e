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

"""A libvirt test-driver node XML with Nova's instance metadata.

``test:///<abs path>`` opens it.  The domain XML (and the
``<nova:instance>`` metadata the agent reads: the instance UUID, the
flavor name and its ``extraSpecs`` with ``hw:paging``) is produced with
Nova's own ``nova.virt.libvirt.config`` classes when Nova is installed,
so its format cannot drift from what Nova writes; without Nova a
hand-written copy of the same structure is used (a test checks that
both agree).
"""

import xml.etree.ElementTree as ET

from nova_adaptive_paging.agent import guest

NOVA_NS = guest.NOVA_NS
PACKAGE = 'nova-adaptive-paging-sim'
CREATION_TIME = '2011-03-09 00:00:00'
# Nova's default [libvirt] mem_stats_period_seconds.
BALLOON_PERIOD_S = 10


def nova_guest(spec, virt_type='test'):
    """Nova's ``LibvirtConfigGuest`` for ``spec`` (a host.VmSpec), with
    the ``<nova:instance>`` metadata and balloon Nova's libvirt driver
    writes; callers may add devices before formatting it."""
    from nova.virt.libvirt import config as vconfig

    flavor = vconfig.LibvirtConfigGuestMetaNovaFlavor()
    flavor.name, flavor.id = spec.flavor, spec.flavor
    flavor.memory, flavor.vcpus = spec.memory_mib, spec.vcpus
    flavor.disk = flavor.swap = flavor.ephemeral = 0
    flavor.extra_specs = dict(spec.extra_specs)
    owner = vconfig.LibvirtConfigGuestMetaNovaOwner()
    owner.userid = owner.projectid = '0' * 32
    owner.username = owner.projectname = 'sim'
    meta = vconfig.LibvirtConfigGuestMetaNovaInstance()
    meta.package = PACKAGE
    meta.name = spec.name
    meta.creationTime = 1299628800           # CREATION_TIME
    meta.flavor, meta.owner = flavor, owner
    guest = vconfig.LibvirtConfigGuest()
    guest.virt_type = virt_type
    guest.name, guest.uuid = spec.name, spec.uuid
    guest.memory, guest.vcpus = spec.memory_mib * 1024, spec.vcpus
    guest.os_type = 'hvm'
    guest.metadata.append(meta)
    if spec.balloon:
        balloon = vconfig.LibvirtConfigMemoryBalloon()
        balloon.model, balloon.period = 'virtio', BALLOON_PERIOD_S
        guest.add_device(balloon)
    return guest


def _domain_with_nova(spec):
    return nova_guest(spec).format_dom()


def _domain_by_hand(spec):
    n = '{%s}' % NOVA_NS
    dom = ET.Element('domain', type='test')
    ET.SubElement(dom, 'uuid').text = spec.uuid
    ET.SubElement(dom, 'name').text = spec.name
    ET.SubElement(dom, 'memory').text = str(spec.memory_mib * 1024)
    ET.SubElement(dom, 'vcpu').text = str(spec.vcpus)
    inst = ET.SubElement(ET.SubElement(dom, 'metadata'), n + 'instance')
    ET.SubElement(inst, n + 'package', version=PACKAGE)
    ET.SubElement(inst, n + 'name').text = spec.name
    ET.SubElement(inst, n + 'creationTime').text = CREATION_TIME
    flavor = ET.SubElement(inst, n + 'flavor', name=spec.flavor,
                           id=spec.flavor)
    for tag, value in (('memory', spec.memory_mib), ('disk', 0),
                       ('swap', 0), ('ephemeral', 0),
                       ('vcpus', spec.vcpus)):
        ET.SubElement(flavor, n + tag).text = str(value)
    extra = ET.SubElement(flavor, n + 'extraSpecs')
    for key, value in spec.extra_specs.items():
        ET.SubElement(extra, n + 'extraSpec', name=key).text = value
    owner = ET.SubElement(inst, n + 'owner')
    ET.SubElement(owner, n + 'user', uuid='0' * 32).text = 'sim'
    ET.SubElement(owner, n + 'project', uuid='0' * 32).text = 'sim'
    ET.SubElement(ET.SubElement(dom, 'os'), 'type').text = 'hvm'
    if spec.balloon:
        balloon = ET.SubElement(ET.SubElement(dom, 'devices'), 'memballoon',
                                model='virtio', autodeflate='on',
                                freePageReporting='on')
        ET.SubElement(balloon, 'stats', period=str(BALLOON_PERIOD_S))
    return dom


# Off in a process that also loads Watcher: its options and Nova's share
# names in oslo.config's global CONF ('host'), so one process cannot
# import both; the hand-written copy, which a test keeps equal to Nova's,
# is used instead.
USE_NOVA = True


def domain(spec, use_nova=None):
    """An ElementTree element for one domain."""
    if USE_NOVA if use_nova is None else use_nova:
        try:
            from lxml import etree
            return ET.fromstring(etree.tostring(_domain_with_nova(spec)))
        except ImportError:
            pass
    return _domain_by_hand(spec)


def domain_text(element):
    """One domain's XML text, to be cached: the node file is rewritten on
    every start and stop."""
    ET.register_namespace('nova', NOVA_NS)
    ET.indent(element, space='  ', level=1)
    return '  ' + ET.tostring(element, encoding='unicode').strip() + '\n'


def node_xml(texts):
    """The whole node file from :func:`domain_text` strings."""
    return '<node>\n' + ''.join(texts) + '</node>\n'
