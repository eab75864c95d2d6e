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

"""The production host interface: the one reader and writer of the
switching patch's files.

``files``: the files under a root (``/`` on a compute node); ``vm``: one
VM's files, and which VM a libvirt domain is; ``probe``: what the running
kernel can give, as capabilities; ``switch_cost``: the switch-cost
measurement.  The agent, the ``host`` and ``abi`` commands and the
conformance suite go through here.  Nothing here imports the simulated
host: a simulated host only serves the same files.
"""

import os

# What ``nova-paging sim-host`` leaves under its root; a measurement there
# is labelled as modeled.
SIMULATED_MARKER = '.sim'


def is_host_root(root):
    """Whether ``root`` is this host's own ``/`` (the kernel's files and
    VM descriptors), not a simulated host's directory."""
    return root.rstrip('/') == ''


def simulated(root):
    """Whether ``root`` is served by ``nova-paging sim-host``."""
    return os.path.isdir(os.path.join(root, SIMULATED_MARKER))
