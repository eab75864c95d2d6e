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

"""Which transport reaches the host interface under a root: the one
factory of the agent, the ``host`` commands and the switch-cost tool."""

from nova_adaptive_paging import host
from nova_adaptive_paging.host import files
from nova_adaptive_paging.host import perf
from nova_adaptive_paging.host import vmfd


def for_root(root, conf=None, privsep=False):
    """The interface under ``root``.  On this host's ``/`` the per-VM
    files go through the VM descriptor (they work under lockdown):
    directly for a caller that is root (the ``host`` commands), through
    the privsep daemon (configured by ``conf``'s files) for the
    unprivileged agent.  Under any other root (a simulated host's files,
    the agent's own) they are files."""
    if not host.is_host_root(root):
        return files.FileTransport(root)
    if privsep:
        from nova_adaptive_paging.host import privileged
        return privileged.Transport(conf)
    return vmfd.VmFdTransport('/')


def counters_for(root):
    """How guest-only counters are opened: through the privsep daemon on
    a real host, in process elsewhere."""
    if host.is_host_root(root):
        from nova_adaptive_paging.host import privileged
        return privileged.Counters
    return perf.GuestCounters
