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

"""What the running kernel lets this host give, read from its files.

One function per fact, each reading the file the kernel exposes under a
root (``/`` on a compute node, a directory laid out like it in tests and
on the simulated host) or through a transport with the same paths.
:func:`detect` puts them together into
:class:`~nova_adaptive_paging.capabilities.Capabilities`: a host claims
switching only when the patch is loaded with an interface version this
package drives *and* nothing in the running kernel stops the agent from
switching.
"""

import errno
import os

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import capabilities
from nova_adaptive_paging import host
from nova_adaptive_paging.host import files
from nova_adaptive_paging.host import vmfd
from nova_adaptive_paging import pmu_events
from nova_adaptive_paging import vocabulary

TDP_MMU = os.path.join(spec.PARAMS_DIR, spec.PARAM_TDP_MMU)
SWITCH_SUPPORTED = os.path.join(spec.PARAMS_DIR, spec.PARAM_SWITCH_SUPPORTED)
AVIC = 'sys/module/kvm_amd/parameters/avic'
PT_MODE = 'sys/module/kvm_intel/parameters/pt_mode'
LOCKDOWN = 'sys/kernel/security/lockdown'
# kvm_intel pt_mode: 0 system-wide tracing, 1 host-guest mode.
PT_MODE_HOST_GUEST = '1'
# PVM: the KVM module for guests of a host that is itself a guest (a
# nested cloud's VM, no VMX or SVM of its own).  It runs every guest on
# shadow page tables and has no ept/npt switch to read.
PVM_MODULE = 'kvm_pvm'


def _read(root, rel):
    """The stripped text of ``rel``; ``root`` is a directory or a
    transport (host.files, the agent's privileged one, a model)."""
    source = files.FileTransport(root) if isinstance(root, str) else root
    try:
        return source.read(rel).strip()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _exists(root, rel):
    source = files.FileTransport(root) if isinstance(root, str) else root
    exists = getattr(source, 'exists', None)
    return bool(exists is not None and exists(rel))


def _flag(value):
    # Module parameters print bools as Y/N; some as 1/0.
    return value is not None and value in ('Y', 'y', '1')


def abi_version(root, strict=False):
    """The loaded patch's interface version; 0 without the patch or with a
    version this package does not drive (it never drives an interface it
    does not understand).  ``strict``: a file that is there but holds no
    version number raises spec.AbiFormatError (a read that failed is not
    a kernel without the patch: the agent keeps what it last read)."""
    rel = os.path.join(spec.PARAMS_DIR, spec.PARAM_ABI)
    value = _read(root, rel)
    if strict and value is not None and not value.isdigit():
        raise spec.AbiFormatError('%s: expected an interface version '
                                  'number, got %d bytes of something else'
                                  % (rel, len(value)))
    if value is None or not value.isdigit() or int(value) != \
            spec.ABI_VERSION:
        return 0
    return int(value)


def vendor_tdp(root):
    """``(vendor module, TDP enabled)``: ``(None, False)`` without KVM;
    PVM's module is shadow paging only."""
    for module, param in spec.VENDOR_TDP_PARAMS:
        value = _read(root, os.path.join(spec.vendor_params_dir(module),
                                         param))
        if value is not None:
            return module, _flag(value)
    if _exists(root, os.path.dirname(spec.vendor_params_dir(PVM_MODULE))):
        return PVM_MODULE, False
    return None, False


def describe_kvm(vendor, tdp):
    """One line: the KVM module of this host and the paging its guests
    get from it, or why they get none."""
    if vendor is None:
        return ('none: no KVM module loaded (%s or %s): this host takes '
                'only guests whose flavor has no %s' % (
                    ', '.join(m for m, _ in spec.VENDOR_TDP_PARAMS),
                    PVM_MODULE, vocabulary.KEY_POLICY))
    if vendor == PVM_MODULE:
        return ('%s (PVM: KVM inside a guest, without hardware '
                'virtualization): shadow paging only, it has no EPT/NPT '
                'to give' % vendor)
    param = dict(spec.VENDOR_TDP_PARAMS)[vendor]
    return '%s, %s=%s: %s' % (vendor, param, 'Y' if tdp else 'N',
                              'hardware-assisted paging (EPT/NPT)' if tdp
                              else 'shadow paging (TDP turned off)')


def tdp_mmu(root):
    """Whether KVM runs the TDP MMU, which the series needs to switch."""
    return _flag(_read(root, TDP_MMU))


def avic(root):
    """Whether kvm_amd runs with AVIC, which maps the APIC through NPT."""
    return _flag(_read(root, AVIC))


def pt_host_guest(root):
    """Whether kvm_intel runs Intel PT in host-guest mode."""
    return _read(root, PT_MODE) == PT_MODE_HOST_GUEST


def lockdown(root):
    """The kernel lockdown level (``none``, ``integrity`` or
    ``confidentiality``): the bracketed word of securityfs' file.  A
    kernel without the LSM is ``none``."""
    value = _read(root, LOCKDOWN)
    if not value:
        return 'none'
    for word in value.split():
        if word.startswith('[') and word.endswith(']'):
            return word[1:-1]
    return 'none'


def blockers(root, vendor, tdp):
    """Why the agent could not drive a loaded patch here, one line each.

    The series switches only with the TDP MMU; AVIC and Intel PT in
    host-guest mode make the kernel refuse every switch
    (Documentation/paging-switch-abi.rst, section 8).  Kernel lockdown
    is not one: interface version 2 reaches the per-VM files through the
    VM file descriptor (``host.vmfd``), which lockdown leaves open.
    ``tdp`` is the vendor module's TDP switch, as :func:`vendor_tdp`
    read it.
    """
    found = []
    if not tdp_mmu(root):
        found.append('%s is not Y: the series switches only with the TDP '
                     'MMU' % TDP_MMU)
    elif tdp and _read(root, SWITCH_SUPPORTED) not in (None, 'Y'):
        # Kernels that have the parameter say what they decided; the one
        # case no other file shows is KVM on Hyper-V with its enlightened
        # flush.
        found.append('%s is not Y: the kernel does not switch on this host '
                     '(on Hyper-V with its enlightened TLB flush; its log '
                     'says why)' % SWITCH_SUPPORTED)
    if vendor == 'kvm_amd' and avic(root):
        found.append('%s is Y: AVIC maps the APIC through NPT, so no VM '
                     'may leave it' % AVIC)
    if vendor == 'kvm_intel' and pt_host_guest(root):
        found.append('%s is 1: Intel PT in host-guest mode needs EPT'
                     % PT_MODE)
    return tuple(found)


def walk_cycles(root, generation):
    """One line: the PMU events that count this generation's page-walk
    cycles and whether the kernel counts with them, or why it cannot."""
    events = pmu_events.walk_events(generation)
    line = '%s: %s' % (generation, events.describe())
    if not events.counted:
        return line
    rel = os.path.join(spec.PARAMS_DIR, spec.PARAM_WALK_EVENTS)
    text = _read(root, rel)
    if text is None:
        return line + '; not counted: the kernel has no %s' % rel
    try:
        named = spec.parse_walk_events(text)
    except spec.AbiFormatError as exc:
        return line + '; not counted: %s: %s' % (rel, exc)
    if named != events.configs():
        return line + '; not counted: %s reads "%s" (the agent writes it ' \
            'unless [adaptive_paging] count_walk_cycles is off)' % (rel, text)
    return line + '; counted'


def mechanism(root):
    """Whether the kernel has the series' part 1 control,
    ``KVM_SET_PAGING_MODE``, and switches on this host:
    ``KVM_CHECK_EXTENSION(KVM_CAP_PAGING_MODE)``, which is what a kernel
    without the text interface (no paging_switch_abi) offers.  ``root``:
    a transport, or a directory (the host's own ``/`` asks ``/dev/kvm``;
    any other is a simulated host's files, host.files).  No ``/dev/kvm``
    is no control; any other failure (a descriptor that cannot be
    opened, a daemon that did not answer) raises, so that the
    capabilities last read stay in force rather than drop."""
    if isinstance(root, str):
        source = (vmfd.VmFdTransport(root) if host.is_host_root(root)
                  else files.FileTransport(root))
    else:
        source = root
    try:
        return bool(source.paging_mode_cap())
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENODEV, errno.ENXIO):
            return False
        raise


def detect(root, generation, calibrated, pool=False, version=None,
           on_error=None):
    """Capabilities of the host whose files are under ``root``
    (``pool``: its operator put it in a paging pool; ``version``: the
    interface version when the caller has just read it).  A kernel
    without the text interface is asked for the mechanism's control
    (:func:`mechanism`); one with an interface version this package does
    not drive is driven in no way.  A failure to ask raises, unless
    ``on_error`` takes it (it may raise in turn): the host is then taken
    as one without the control."""
    vendor, tdp = vendor_tdp(root)
    if version is None:
        version = abi_version(root)
    try:
        mech = bool(vendor and not version
                    and _read(root, os.path.join(spec.PARAMS_DIR,
                                                 spec.PARAM_ABI)) is None
                    and mechanism(root))
    except OSError as exc:
        if on_error is None:
            raise
        on_error(exc)
        mech = False
    return capabilities.Capabilities(
        version, tdp, generation, calibrated, kvm=vendor is not None,
        blockers=(blockers(root, vendor, tdp) if (version or mech) and vendor
                  else ()),
        pool=pool, mechanism=mech)
