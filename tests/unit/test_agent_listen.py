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

"""The agent's /metrics listens on the address it is given, IPv4 or
IPv6 alike (the family comes from the address), and logs nothing per
scrape."""

import socket
import urllib.request

import prometheus_client
import pytest

from nova_adaptive_paging.agent import web


def _ipv6_loopback():
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(('::1', 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize('address,url_host,family', [
    ('127.0.0.1', '127.0.0.1', socket.AF_INET),
    pytest.param('::1', '[::1]', socket.AF_INET6, marks=pytest.mark.skipif(
        not _ipv6_loopback(), reason='this machine has no IPv6 loopback')),
])
def test_metrics_are_served_on_either_family(capfd, address, url_host,
                                             family):
    registry = prometheus_client.CollectorRegistry()
    prometheus_client.Gauge('nap_listen_probe', 'a gauge to read back',
                            registry=registry).set(7)
    server, _ = web.serve(registry, address, 0)
    try:
        assert server.socket.family == family
        with urllib.request.urlopen('http://%s:%d/metrics' % (
                url_host, server.server_port), timeout=10) as resp:
            assert resp.status == 200
            assert 'nap_listen_probe 7.0' in resp.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    # A scrape every few seconds must not write a line to the journal.
    assert capfd.readouterr().err == ''
