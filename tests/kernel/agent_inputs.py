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

"""What the agent's end-to-end step in the emulated host starts from
(kvm-patch/guest/agent_e2e.py): the domain XML Nova would write for two
instances, one of a flavor with hw:paging=shadow and one with adaptive,
a threshold profile for the emulated host's CPU generation and the
agent's configuration.

The domains are formatted by Nova's own ``nova.virt.libvirt.config``
classes (Nova is a test requirement), through the simulated host's
:func:`~nova_adaptive_paging.simhost.libvirt_xml.nova_guest`: the
metadata and the virtio balloon Nova's libvirt driver gives every guest;
what Nova would boot from a disk is replaced by a direct kernel boot of
guest/l2-pager.S.
"""

import dataclasses
import json
import os
import uuid

from nova_adaptive_paging import cpu
from nova_adaptive_paging import dsp
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.simhost import libvirt_xml
from nova_adaptive_paging import vocabulary

# QEMU's "EPYC" CPU model (tcg/run.sh -cpu EPYC): family 23, model 1.
EMULATED_CPU = ('AuthenticAMD', 23, 1)
L2_KERNEL = '/opt/nap-e2e/l2.elf'
MEMORY_MIB = 64
# Thresholds no shipped profile holds: seen in dsp_thresholds, they can
# only have come from this file.
THRESHOLDS = {'tlb_upper': '7.5', 'tlb_lower': '0.25', 'pf_upper': '4200',
              'pf_lower': '150', 'pt_upper': '190', 'pt_lower': '120'}
PROFILE_FILE = 'e2e.yaml'

AGENT_CONF = """[DEFAULT]
use_stderr = true

[adaptive_paging]
libvirt_uri = {{uri}}
host_root = /
profile_dirs = {{run}}/profiles
default_policy = {default}

[agent]
interval = 1
reconcile_interval = 2
listen_address = 127.0.0.1
listen_port = {{port}}
# The emulated host runs tens of times slower than hardware: starting the
# privsep daemon (a Python process) took over the 30 s default there.  The
# deadlines stay, at their maximum, to tell slow from never.
privsep_timeout = 600
libvirt_timeout = 600

[nova_adaptive_paging_privileged]
helper_command = privsep-helper --config-file {{conf}}
"""


def generation():
    """The generation key the agent finds on the emulated host."""
    return cpu.generation_key(*EMULATED_CPU)


def profile():
    base = profiles.builtin()
    return dataclasses.replace(
        base, generation=generation(),
        thresholds=dsp.Thresholds(**{k: profiles.to_milli(v)
                                     for k, v in THRESHOLDS.items()}),
        provenance=profiles.Provenance(
            method='manual', source='tests/kernel/agent_inputs.py',
            obtained='2026-11', hosts=1, samples=0))


def domain_xml(name, instance, paging):
    from lxml import etree
    from nova.virt.libvirt import config as vconfig

    guest = libvirt_xml.nova_guest(simhost.VmSpec(
        name, None, {'hw:paging': paging}, flavor='e2e.%s' % paging,
        uuid=instance, memory_mib=MEMORY_MIB, balloon=True),
        virt_type='kvm')
    guest.os_kernel = L2_KERNEL
    serial = vconfig.LibvirtConfigGuestSerial()
    serial.type = 'file'
    serial.source_path = '/run/nap/%s.serial' % name
    guest.add_device(serial)
    return etree.tostring(guest.format_dom(), pretty_print=True).decode()


def write(directory):
    """Write the inputs to ``directory``; return what the step expects."""
    os.makedirs(directory, exist_ok=True)
    guests, expect = {}, {}
    for paging, mode in ((vocabulary.SHADOW, vocabulary.SHADOW),
                         (vocabulary.ADAPTIVE, None)):
        name = 'nap-%s' % paging
        instance = str(uuid.uuid5(uuid.NAMESPACE_URL, 'nap-e2e/' + paging))
        with open(os.path.join(directory, name + '.xml'), 'w') as f:
            f.write(domain_xml(name, instance, paging))
        guests[name] = instance
        expect[name] = {'policy': paging, 'mode': mode}
    with open(os.path.join(directory, PROFILE_FILE), 'w') as f:
        f.write(profile().dump())
    inputs = {'guests': guests, 'expect': expect,
              'profiles': [PROFILE_FILE],
              'agent_conf': AGENT_CONF.format(default=vocabulary.HAP)}
    with open(os.path.join(directory, 'inputs.json'), 'w') as f:
        json.dump(inputs, f, indent=1)
    return inputs
