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

from oslo_config import cfg
from oslo_config import generator

from nova_adaptive_paging.conf import adaptive_paging
from nova_adaptive_paging.conf import opts


def test_options_registered_with_help():
    conf = cfg.ConfigOpts()
    adaptive_paging.register_opts(conf)
    conf([], default_config_files=[])
    assert conf.adaptive_paging.default_policy == 'hap'
    for opt in adaptive_paging.ALL_OPTS:
        assert opt.help.strip()


def test_bad_default_policy_is_refused(tmp_path):
    path = tmp_path / 'x.conf'
    path.write_text('[adaptive_paging]\ndefault_policy = ept\n')
    conf = cfg.ConfigOpts()
    adaptive_paging.register_opts(conf)
    conf(['--config-file', str(path)], default_config_files=[])
    try:
        conf.adaptive_paging.default_policy
    except ValueError as exc:
        assert 'ept' in str(exc)
    else:
        raise AssertionError('default_policy = ept was accepted')


def test_generator_writes_the_sample(tmp_path):
    out = tmp_path / 'sample.conf'
    conf = cfg.ConfigOpts()
    generator.register_cli_opts(conf)
    conf(['--namespace', 'nova_adaptive_paging', '--output-file', str(out)])
    generator.generate(conf)
    text = out.read_text()
    assert '[adaptive_paging]' in text
    assert '#default_policy = hap' in text
    groups = [g.name for g, _ in opts.list_opts()]
    assert groups == ['adaptive_paging', 'agent', 'nova', 'placement']
    assert '#reconcile_interval = 60' in text
    assert '#compute_node_name = <None>' in text


def test_generator_writes_the_nova_conf_part(tmp_path):
    # nova.conf's [adaptive_paging], as an operator generates it for the
    # scheduler hosts: the scheduler's options under the section's help
    # for nova.conf, none of the agent's.
    out = tmp_path / 'nova.conf.sample'
    conf = cfg.ConfigOpts()
    generator.register_cli_opts(conf)
    conf(['--namespace', 'nova_adaptive_paging.scheduler',
          '--output-file', str(out)])
    generator.generate(conf)
    text = out.read_text()
    assert '#request_filter = true' in text
    assert 'read by nova-scheduler' in text
    assert 'compute node' not in text
    assert 'default_policy' not in text
