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

"""The compute-node agent (doc/source/agent.rst).

One module per concern, in the order the data flows: ``domains`` finds
the guests (libvirt, each call under a deadline: ``call_thread``),
``guest`` reads each one's policy from Nova's metadata, ``writer``
applies it through :mod:`nova_adaptive_paging.host`, ``thresholds``
pushes the host's calibrated profile (its files read as untrusted input
by ``profile_files``), ``reconcile`` and ``sampler`` are the two passes,
each taking the narrow pieces of ``host_state`` and ``health``, ``web``
serves what the telemetry collector snapshots, ``host_lock`` keeps one
agent per host, and ``service`` is the loop around them.
"""
