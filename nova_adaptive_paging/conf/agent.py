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

"""[agent]: the compute-node agent's loop and its /metrics endpoint."""

from oslo_config import cfg

agent_group = cfg.OptGroup(
    'agent',
    title='Compute-node agent',
    help="""
How often nova-paging-agent samples and reconciles the guests of this host,
and where it serves its Prometheus metrics.
""")

agent_opts = [
    cfg.IntOpt('interval',
               mutable=True,
               default=5, min=1, max=3600,
               help="""
Seconds between two reads of every managed guest's statistics (the
histograms of sampled FTLB and FPF). /metrics serves what the last read
(or pass) found, with its age in nova_paging_agent_snapshot_age_seconds.
"""),
    cfg.IntOpt('reconcile_interval',
               mutable=True,
               default=60, min=1, max=86400,
               help="""
Seconds between two full passes over the running guests (policy from
Nova's metadata, the VM's files brought to it, the host's thresholds and
traits). A libvirt lifecycle event starts a pass at once; this pass is
what catches a missed event.
"""),
    cfg.FloatOpt('libvirt_max_backoff',
                 default=60.0, min=1.0,
                 help="""
Longest wait, in seconds, between two attempts to reconnect to libvirt
while it is down (the wait doubles from one second up to this).
"""),
    cfg.FloatOpt('libvirt_timeout',
                 default=30.0, min=1.0, max=3600.0,
                 help="""
Seconds any libvirt call may take (connecting included) before the agent
gives up on it, logs and counts it (agent_errors_total{kind="libvirt"})
and treats libvirt as down. The calls run in a thread of their own: one
that never returns holds neither the loop's stop nor /metrics. An open
connection also runs libvirt's keepalive (virConnectSetKeepAlive, every
libvirt_keepalive_interval seconds), which closes a connection whose
daemon stopped answering.
"""),
    cfg.IntOpt('libvirt_keepalive_interval',
               default=5, min=1, max=600,
               help="""
Seconds between two keepalive messages on the libvirt connection; after 5
unanswered ones libvirt closes it and the agent reconnects.
"""),
    cfg.FloatOpt('privsep_timeout',
                 default=30.0, min=1.0, max=600.0,
                 help="""
Seconds the privsep daemon may take to start (the agent then exits 1 with
one line) and that any one call to it may take (counted and logged as
that guest's or the host's error).
"""),
    cfg.FloatOpt('stop_timeout',
                 default=10.0, min=0.5, max=300.0,
                 help="""
Seconds SIGTERM or SIGINT waits for the loop to end its pass; a loop still
held by a call that never returns is abandoned and the agent exits 1,
saying what it was doing. Keep it below the unit's TimeoutStopSec.
"""),
    cfg.StrOpt('lock_file',
               help="""
The file whose lock makes this the host's only agent (a second one exits
1 naming the first one's pid). Unset: agent.lock in the runtime directory
under host_root (/run/nova-paging-agent/agent.lock on a compute node).
"""),
    cfg.HostAddressOpt('listen_address',
                       default='127.0.0.1',
                       help="""
Address /metrics is served on. Loopback by default: expose it to a
Prometheus server deliberately.
"""),
    cfg.PortOpt('listen_port',
                default=9782,
                help="""
Port /metrics is served on; 0 serves no metrics.
"""),
    cfg.StrOpt('web_config_file',
               help="""
TLS and basic auth for /metrics: a web configuration file in the format of
Prometheus' exporter-toolkit (``tls_server_config``, ``basic_auth_users``
with bcrypt hashes), as node_exporter's ``--web.config.file`` takes. Unset
means plain HTTP without authentication. Basic auth without TLS is
refused unless ``basic_auth_without_tls`` is set.
"""),
    cfg.BoolOpt('basic_auth_without_tls',
                default=False,
                help="""
Accept ``basic_auth_users`` in ``web_config_file`` without
``tls_server_config``: the passwords then cross the network in clear.
"""),
    cfg.FloatOpt('connection_timeout',
                 default=10.0, min=0.1, max=300.0,
                 help="""
Seconds a /metrics connection may take in all, TLS handshake, request and
response, before it is closed (a client that sends a byte now and then
gets no more).
"""),
    cfg.IntOpt('max_connections',
               default=32, min=1, max=4096,
               help="""
Most /metrics connections served at once (one thread each); one more is
closed at once.
"""),
]


def register_opts(conf):
    conf.register_group(agent_group)
    conf.register_opts(agent_opts, group=agent_group)


def list_opts():
    return {agent_group: agent_opts}
