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

"""PromQL over the agent's metrics, written once.

The recording rules, the alerts, the dashboards and the profiler build
their expressions from these functions, and the functions take every
metric name from :mod:`.metrics`.  Hosts are the scraped ``instance``
(the agent); a host's CPU generation comes from ``nova_paging_host_info``
and is joined onto other series with ``group_left``.
"""

from nova_adaptive_paging.telemetry import metrics as M

HOST = M.HOST_LABEL
GUEST = (HOST, M.GUEST_LABEL)
# The scrape job the agents run under (doc/source/deployment.rst,
# "Monitoring"; the monitoring role writes it),
# and the label matchers that select it by default.
AGENT_JOB = 'nova-paging-agent'
AGENT_SELECTOR = 'job="%s"' % AGENT_JOB
# How long a host that stopped reporting is still counted in its
# generation (its agent's coverage, the alerts that need its generation).
REMEMBER = '1d'


def name(metric):
    """The series name of ``metric`` (a counter's includes _total)."""
    return metric.name


def by(*labels):
    return ', '.join(labels)


def selector(metric, suffix='', **labels):
    """``metric{label="value",...}`` (``suffix``: ``_bucket`` of a
    histogram); a value starting with ``=~`` or ``!=`` is used as its own
    operator."""
    if not labels:
        return name(metric) + suffix
    matchers = []
    for label, value in labels.items():
        op = '='
        for prefix in ('=~', '!=', '!~'):
            if value.startswith(prefix):
                op, value = prefix, value[len(prefix):]
        matchers.append('%s%s"%s"' % (label, op, value))
    return '%s%s{%s}' % (name(metric), suffix, ','.join(matchers))


def with_generation(expr, on=(HOST,), extra=(), window=None, match=''):
    """``expr`` with the host's generation (and ``extra`` host_info
    labels) joined on: as the host reports it now, or with ``window``
    as it reported it at any time in that range (a host gone since still
    counts for the range's data).  ``match`` (label matchers) keeps only
    the hosts whose host_info it selects."""
    info = host_info(match) if window is None else \
        'max by (%s, generation, switching) (max_over_time(%s{%s}[%s]))' % (
            HOST, name(M.HOST_INFO), match, window)
    return '%s * on (%s) group_left (%s) %s' % (
        _paren(expr), by(*on), by('generation', *extra), info)


def with_guest(expr, labels=('flavor',)):
    """``expr`` (per guest) with the Nova labels of guest_info joined."""
    return '%s * on (%s) group_left (%s) %s' % (
        _paren(expr), by(*GUEST), by(*labels), name(M.GUEST_INFO))


def host_info(match=''):
    """One series per host with its generation and whether it switches
    (max by: one even while its info changes); ``match``: label matchers
    selecting the hosts."""
    info = name(M.HOST_INFO) + ('{%s}' % match if match else '')
    return 'max by (%s, generation, switching) (%s)' % (HOST, info)


def _paren(expr):
    return '(%s)' % expr


def per_guest_rate(metric, window, keep=(), **match):
    """Per guest (and ``keep`` labels) rate of a per-guest counter."""
    return 'sum by (%s) (rate(%s[%s]))' % (
        by(*GUEST + tuple(keep)), selector(metric, **match), window)


def per_host_increase(metric, window, keep=(), suffix='', **match):
    """A counter's increase over ``window``, summed per host."""
    return 'sum by (%s) (increase(%s[%s]))' % (
        by(HOST, *keep), selector(metric, suffix, **match), window)


def per_generation_increase(metric, window, keep=(), suffix='', **match):
    """A counter's increase over ``window``, summed per generation on
    the server (the profiler's query shape: one series per generation,
    whatever the fleet's size)."""
    inner = per_host_increase(metric, window, keep, suffix, **match)
    return 'sum by (%s) (%s)' % (by('generation', *keep),
                                 with_generation(inner, window=window))


def per_generation_hosts(window, **match):
    """Hosts per generation that reported within ``window``."""
    return 'count by (generation) (max by (%s, generation) ' \
           '(max_over_time(%s[%s])))' % (
               HOST, selector(M.HOST_INFO, **match), window)


def per_generation_guests(window):
    """Distinct guests per generation seen within ``window``."""
    guests = 'max by (%s) (max_over_time(%s[%s]))' % (
        by(*GUEST), name(M.GUEST_INFO), window)
    return 'count by (generation) (%s)' % with_generation(
        guests, window=window)


def agent_up(selector=AGENT_SELECTOR):
    """Whether each agent's last scrape succeeded; ``selector``: the
    label matchers of their scrape job."""
    return 'up{%s}' % selector


def remembered_generation():
    """Each host's generation over the last REMEMBER, so that a host
    whose agent is down still counts in its generation."""
    return 'max by (%s, generation) (last_over_time(%s[%s]))' % (
        HOST, name(M.HOST_INFO), REMEMBER)


# -- a fleet of paging pools (stock kernels, the paging_fit strategy) --------
def host_pool(*keep):
    """One series per stock host in a pool, with its ``mode`` (and the
    labels ``keep``: a host-name label a deployment adds)."""
    return 'max by (%s) (%s == 1)' % (by(HOST, 'mode', *keep),
                                      name(M.HOST_PAGING_MODE))


def in_pool(expr, adaptive_only=True):
    """``expr`` (per guest) with its host's pool ``mode`` joined on, for
    the guests whose flavor asks for adaptive (``adaptive_only``)."""
    if adaptive_only:
        expr = '%s * on (%s) group_left () %s' % (
            _paren(expr), by(*GUEST),
            selector(M.GUEST_INFO, policy='adaptive'))
    return '%s * on (%s) group_left (mode) %s' % (_paren(expr), HOST,
                                                  host_pool())


# -- boot placement in a fleet of paging pools (pools/boot.py) ---------------
def last_over(metric, window):
    """Each series' last value within ``window`` (guests gone since
    included)."""
    return 'last_over_time(%s[%s])' % (name(metric), window)


def pool_history(window):
    """Every pool a stock host was in within ``window``: one series per
    (host, mode)."""
    return 'max by (%s, mode) (max_over_time(%s[%s]) == 1)' % (
        HOST, name(M.HOST_PAGING_MODE), window)


def guest_origin_history(window):
    """Each guest seen within ``window`` with its root image's and its
    project's UUIDs."""
    return 'max by (%s, image, project_id) (last_over_time(%s[%s]))' % (
        M.GUEST_LABEL, name(M.GUEST_INFO), window)
