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

"""[adaptive_paging] in nova.conf: what nova-scheduler reads.

These options live in Nova's own configuration (oslo's global
``cfg.CONF``, which nova-scheduler parses), not in the agent's file: the
scheduler filter and its request filter run inside nova-scheduler.  The
group shares its name with the agent's (:mod:`.adaptive_paging`), as the
two never share a file, but not its help: nova.conf's sample says what
the section means in nova.conf.
"""

from oslo_config import cfg

adaptive_paging_group = cfg.OptGroup(
    'adaptive_paging',
    title='Adaptive paging options (nova-scheduler)',
    help="""
Options of nova-adaptive-paging in nova.conf, read by nova-scheduler when
its ``[filter_scheduler] enabled_filters`` has AdaptivePagingFilter: whether
the filter adds its request filter to Nova's, and where the request
filter's state is exported. The compute-node agent's options of the same
section live in the agent's own file.
""")

scheduler_opts = [
    cfg.BoolOpt('request_filter',
                default=True,
                help="""
Have AdaptivePagingFilter add its request filter to Nova's when
nova-scheduler starts, so that a flavor with ``hw:paging`` alone asks
placement for the trait its mode needs, as a flavor written by
``nova-paging flavor set`` (``hw:paging`` with
``trait:CUSTOM_PAGING_*=required``) does itself.

The request filter is a convenience: Nova has no plugin point for request
filters, and it relies on Nova internals that a Nova upgrade may change.
When it is off, or when those internals changed and it could not be
added (one error in the log and
``nova_paging_scheduler_request_filter{state="failed"}``), flavors with
the pair schedule as before, and AdaptivePagingFilter refuses a flavor
with ``hw:paging`` alone, saying so in the scheduler's log, rather than
letting it land on a host that cannot give its mode.

Related options:

* ``[filter_scheduler] enabled_filters``: without AdaptivePagingFilter in
  it, the request filter is neither added nor run, whatever this says.
* ``[adaptive_paging] textfile_collector_dir``: where its state is
  exported.
"""),
    cfg.StrOpt('textfile_collector_dir',
               default='/var/lib/prometheus/node-exporter',
               help="""
Directory of node_exporter's textfile collector, where nova-scheduler
writes ``nova_paging_scheduler.prom``: the state of the request filter
(registered, disabled or failed), for Prometheus and the
NovaPagingRequestFilterFailed alert. Nothing is written when the
directory does not exist (the default is Debian's
``prometheus-node-exporter``'s); empty: never write it. The user
nova-scheduler runs as must be able to write there: a write that fails
is one warning in the scheduler's log, and the alert then has nothing
to fire on.

Related options:

* ``[adaptive_paging] request_filter``
"""),
]


def register_opts(conf):
    conf.register_group(adaptive_paging_group)
    conf.register_opts(scheduler_opts, group=adaptive_paging_group)


def list_opts():
    """For ``oslo-config-generator --namespace
    nova_adaptive_paging.scheduler`` (nova.conf's part): the entry point
    takes (group, options) pairs."""
    return [(adaptive_paging_group, scheduler_opts)]
