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

"""``nova-paging telemetry``: the generated rules, alerts and dashboards."""

import click

from nova_adaptive_paging.cmd import common
from nova_adaptive_paging.pools import planner
from nova_adaptive_paging.telemetry import generate
from nova_adaptive_paging.telemetry import rules


@click.group('telemetry')
def telemetry_group():
    """Prometheus rules and alerts, Grafana dashboards."""


@telemetry_group.command('generate')
@click.option('--out', default='dashboards', show_default=True,
              type=click.Path(file_okay=False),
              help='Directory to write prometheus/ and grafana/ into.')
@click.option('--check', is_flag=True,
              help='Write nothing; exit 1 if a file there is not what '
                   'the code generates.')
@click.option('--thrash-switches-per-hour', type=click.FloatRange(min=1),
              default=rules.Config.thrash_switches_per_hour,
              show_default=True)
@click.option('--profile-max-age-days', type=click.IntRange(min=1),
              default=rules.Config.profile_max_age_days, show_default=True)
@click.option('--advisory-gain-share', type=click.FloatRange(0, 1),
              default=rules.Config.advisory_gain_share, show_default=True)
@click.option('--pool-misfit-share', type=click.FloatRange(0, 1),
              default=rules.Config.pool_misfit_share, show_default=True)
@click.option('--pool-cooldown-s', type=click.IntRange(min=1),
              default=int(planner.Params().cooldown_s), show_default=True,
              help="The fleet strategy's cooldown_s audit parameter, if "
                   "yours is not its default.")
@click.option('--agent-selector', default=rules.Config.agent_selector,
              show_default=True,
              help='Label matchers of the scrape job the agents run under.')
@click.option('--runbook-url', default=rules.Config.runbook_url,
              show_default=True,
              help="Each alert's runbook_url; %s is the alert's name in "
                   "lower case (the docs' runbooks page, where you serve "
                   "it).")
def generate_cmd(out, check, thrash_switches_per_hour, profile_max_age_days,
                 advisory_gain_share, pool_misfit_share, pool_cooldown_s,
                 agent_selector, runbook_url):
    """Write the rule files and dashboards from code."""
    config = rules.Config(pool_cooldown_s=pool_cooldown_s,
                          thrash_switches_per_hour=thrash_switches_per_hour,
                          profile_max_age_days=profile_max_age_days,
                          advisory_gain_share=advisory_gain_share,
                          pool_misfit_share=pool_misfit_share,
                          agent_selector=agent_selector,
                          runbook_url=runbook_url)
    try:
        if check:
            stale = generate.stale(out, config)
            for path in stale:
                click.echo('stale: %s' % path)
            raise SystemExit(1 if stale else 0)
        generate.write(out, config)
    except ImportError as exc:
        common.fail('%s: install the dashboards extra '
                    '(pip install "nova-adaptive-paging[dashboards]")' % exc)
    click.echo('wrote %s' % out)
