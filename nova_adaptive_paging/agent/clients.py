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

"""The agent's clients of OpenStack services, from ``[placement]`` and
``[nova]``: each None without credentials."""


def publisher_from_conf(conf):
    """Trait publication through ``[placement]``, or None when it has no
    credentials (a host whose traits another tool publishes)."""
    if not conf.placement.auth_type:
        return None
    import socket

    from nova_adaptive_paging.conf import placement as placement_conf
    from nova_adaptive_paging import placement

    names = ([conf.placement.compute_node_name]
             if conf.placement.compute_node_name
             else [socket.gethostname(), socket.getfqdn()])

    def publish(caps):
        placement.publish(placement_conf.adapter(conf), names, caps)
    return publish


def lookup_from_conf(conf):
    """Flavor extra specs through ``[nova]``, or None without
    credentials (guests with pre-32.0.0 metadata then get the default)."""
    if not conf.nova.auth_type:
        return None
    from nova_adaptive_paging.agent import nova_api
    from nova_adaptive_paging.conf import nova as nova_conf
    return nova_api.ServerFlavors(lambda: nova_conf.adapter(conf))
