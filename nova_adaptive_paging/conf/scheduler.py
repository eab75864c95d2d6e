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

from nova_adaptive_paging.pools import boot

adaptive_paging_group = cfg.OptGroup(
    'adaptive_paging',
    title='Adaptive paging options (nova-scheduler)',
    help="""
Options of nova-adaptive-paging in nova.conf, read by nova-scheduler when
its ``[filter_scheduler] enabled_filters`` has AdaptivePagingFilter: whether
the filter adds its request filter to Nova's, and where the request
filter's state is exported; and, when ``[filter_scheduler] weight_classes``
has PagingPoolWeigher, where it reads the fleet's history and how much it
weighs. The compute-node agent's options of the same section live in the
agent's own file.
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


# Boot placement: PagingPoolWeigher (scheduler/weights/paging_pool.py).
weigher_opts = [
    cfg.FloatOpt('pool_weight_multiplier',
                 default=1.0,
                 help="""
Multiplier of PagingPoolWeigher: how much a host in the paging pool that
suited the new guest's image (else its project) before it is preferred.
The weigher gives 1 to a host of that pool and 0 to every other host,
so with the default the preference counts as much as Nova's RAM weigher
at its default; a larger value makes it win over spreading. 0 turns the
weigher off; the aggregate metadata key ``paging_pool_weight_multiplier``
overrides it per aggregate, as Nova's own weighers' keys do.

Only flavors with ``hw:paging=adaptive`` are weighed; every other
request, and every request while the weigher has no history (no
``prometheus_url``, Prometheus unreachable, no guests of that image or
project yet), weighs all hosts alike: the boot goes on as if the
weigher were not there.

Related options:

* ``[filter_scheduler] weight_classes``: must include
  ``nova_adaptive_paging.scheduler.weights.paging_pool.PagingPoolWeigher``
* ``[adaptive_paging] prometheus_url``
"""),
    cfg.StrOpt('prometheus_url',
               default='',
               help="""
The Prometheus (or any PromQL endpoint) that scrapes the nova-paging
agents, unauthenticated, where PagingPoolWeigher reads what the fleet
has learned of each image and project (the agents' advisory figures,
MODELED). Empty: the weigher weighs all hosts alike.

Related options:

* ``[adaptive_paging] prometheus_timeout``, ``boot_history``
"""),
    cfg.FloatOpt('prometheus_timeout',
                 default=2.0, min=0.1, max=60.0,
                 help="""
Seconds all the queries of one read of the history may take together.
A read happens at most once every ``boot_refresh_s`` (not once per
boot), so a Prometheus that is down delays the scheduling requests of
that moment (the one that reads, and those that wait for its read) by at
most this long every ``boot_refresh_s``; the weigher then weighs all
hosts alike and says why once in the scheduler's log.
"""),
    cfg.StrOpt('boot_history',
               default='7d',
               regex=r'^[1-9][0-9]*(ms|s|m|h|d|w|y)$',
               help="""
How far back PagingPoolWeigher looks (a Prometheus duration): each
guest's last figures within it, guests gone since included.
"""),
    cfg.IntOpt('boot_refresh_s',
               default=600, min=10, max=86400,
               help="""
Seconds between two reads of the history by each scheduler worker.
"""),
    cfg.IntOpt('boot_min_guests',
               default=boot.BOUNDS['min_guests'][0],
               min=boot.BOUNDS['min_guests'][1],
               max=boot.BOUNDS['min_guests'][2],
               help="""
How many guests of an image (or project) must have figures before the
weigher follows their preference.
"""),
    cfg.FloatOpt('boot_threshold',
                 default=boot.BOUNDS['threshold'][0],
                 min=boot.BOUNDS['threshold'][1],
                 max=boot.BOUNDS['threshold'][2],
                 help="""
How clear the preference must be: the share of their time the guests of
an image (or project) would have saved in one pool over the other (the
default, 0.005, is 18 s an hour).
"""),
]


def register_opts(conf):
    conf.register_group(adaptive_paging_group)
    conf.register_opts(scheduler_opts + weigher_opts,
                       group=adaptive_paging_group)


def list_opts():
    """For ``oslo-config-generator --namespace
    nova_adaptive_paging.scheduler`` (nova.conf's part): the entry point
    takes (group, options) pairs."""
    return [(adaptive_paging_group, scheduler_opts + weigher_opts)]
