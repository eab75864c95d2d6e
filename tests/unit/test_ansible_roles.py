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

"""The collection's files against the package's one source of each
name: what the roles write must say what the package means."""

import configparser
import os
import re
import subprocess
import sys

import jinja2
import yaml

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.host import calibration_runs
from nova_adaptive_paging.pools import figures as pool_figures
from nova_adaptive_paging.scheduler.filters import paging_filter
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging.telemetry import queries

REPO = os.path.join(os.path.dirname(__file__), '..', '..')
ROLES = os.path.join(REPO, 'ansible', 'roles')
PLAYBOOKS = os.path.join(REPO, 'ansible', 'playbooks')
BIN = os.path.dirname(sys.executable)


def read(*parts):
    with open(os.path.join(*parts), encoding='utf-8') as f:
        return f.read()


def role_yaml(role, *parts):
    return yaml.safe_load(read(ROLES, role, *parts))


def render(role, template, **extra):
    """A role's template with its defaults (the values a compute node
    gets), as Ansible would render it."""
    values = dict(role_yaml(role, 'defaults', 'main.yml'))
    values.update(ansible_managed='Ansible managed', **extra)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    return env.from_string(read(ROLES, role, 'templates',
                                template)).render(values)


def without_comments(text):
    return [line for line in text.splitlines()
            if line.strip() and not line.startswith('#')]


def test_the_agent_roles_unit_and_sudoers_are_host_agents_files():
    # host-agent/ is what a compute node needs by hand; the role writes
    # the same files with its variables filled in.
    unit = render('agent', 'nova-paging-agent.service.j2',
                  agent_venv='/opt/nova-adaptive-paging')
    assert without_comments(unit) == without_comments(
        read(REPO, 'host-agent', 'nova-paging-agent.service'))
    sudoers = render('agent', 'sudoers.j2',
                     agent_venv='/opt/nova-adaptive-paging')
    assert without_comments(sudoers) == without_comments(
        read(REPO, 'host-agent', 'sudoers.d-nova-paging-agent'))


# systemd.exec(5), NoNewPrivileges= (systemd 252, Debian 12): each of
# these sets no_new_privs in a unit without CAP_SYS_ADMIN (one with
# User=) whatever NoNewPrivileges= says.
IMPLY_NO_NEW_PRIVILEGES = (
    'DynamicUser', 'LockPersonality', 'MemoryDenyWriteExecute',
    'PrivateDevices', 'ProtectClock', 'ProtectHostname',
    'ProtectKernelLogs', 'ProtectKernelModules', 'ProtectKernelTunables',
    'RestrictAddressFamilies', 'RestrictNamespaces', 'RestrictRealtime',
    'RestrictSUIDSGID', 'SystemCallArchitectures', 'SystemCallFilter',
    'SystemCallLog')


def test_the_agents_unit_lets_sudo_start_the_privsep_daemon():
    """The agent runs as its own user and starts its privsep daemon
    with sudo, which must become root: no option of the unit may set
    no_new_privs behind NoNewPrivileges=no's back (the unit set twelve,
    and the daemon could never start)."""
    units = (read(REPO, 'host-agent', 'nova-paging-agent.service'),
             render('agent', 'nova-paging-agent.service.j2',
                    agent_venv='/opt/nova-adaptive-paging'))
    for unit in units:
        options = {}
        for line in without_comments(unit):
            key, sep, value = line.partition('=')
            if sep:
                options[key.strip()] = value.strip()
        assert options['User'] not in ('', 'root', '0')
        assert options['NoNewPrivileges'] == 'no'
        implying = [key for key in IMPLY_NO_NEW_PRIVILEGES
                    if options.get(key, 'no') not in ('no', 'false', '0',
                                                      'off', '')]
        assert implying == []


def test_the_names_the_roles_use_are_the_packages():
    kvm_vars = read(ROLES, 'kvm_patch', 'vars', 'main.yml')
    assert '%s/%s' % (spec.PARAMS_DIR, spec.PARAM_ABI) in kvm_vars
    nova_vars = role_yaml('nova', 'vars', 'main.yml')
    assert nova_vars['nova_paging_nova__filter'] == '%s.%s' % (
        paging_filter.__name__, paging_filter.AdaptivePagingFilter.__name__)
    assert 'AdaptivePagingFilter' in role_yaml(
        'nova', 'defaults', 'main.yml')['nova_paging_nova_enabled_filters']
    prometheus = yaml.safe_load(render(
        'monitoring', 'prometheus.yml.j2', monitoring__prefix='',
        monitoring__rules_dir='/r', monitoring__file_sd='/f.yml'))
    assert [j['job_name'] for j in prometheus['scrape_configs']] == [
        queries.AGENT_JOB]
    thresholds = read(ROLES, 'thresholds', 'tasks', 'main.yml')
    assert '%s{' % metrics.PROFILE_INFO.name in thresholds
    build = read(ROLES, 'calibrate', 'tasks', 'build.yml')
    makefile = read(ROLES, 'calibrate', 'files', 'Makefile')
    for program in calibration_runs.BENCHES.values():
        assert program + '.c' in build
        assert program in re.search(r'^PROGS = (.*)$', makefile,
                                    re.M).group(1).split()


def test_every_role_has_defaults_an_argument_spec_and_a_readme():
    for role in sorted(os.listdir(ROLES)):
        defaults = role_yaml(role, 'defaults', 'main.yml') or {}
        spec_doc = role_yaml(role, 'meta', 'argument_specs.yml')
        options = spec_doc['argument_specs']['main']['options']
        # Every default is documented and checked, and nothing else.
        assert sorted(defaults) == sorted(options), role
        assert os.path.exists(os.path.join(ROLES, role, 'README.md'))


def test_the_monitoring_role_ships_every_generated_file():
    # Links to dashboards/, which "ansible-galaxy collection build"
    # copies into the collection (it skips links to directories).
    for kind in ('prometheus', 'grafana'):
        generated = sorted(n for n in os.listdir(os.path.join(
            REPO, 'dashboards', kind)) if not n.startswith('.'))
        shipped = os.path.join(ROLES, 'monitoring', 'files', kind)
        assert sorted(os.listdir(shipped)) == generated
        for name in generated:
            assert os.path.samefile(os.path.join(shipped, name), os.path.join(
                REPO, 'dashboards', kind, name))


def test_the_installed_collections_playbooks_run_by_name(tmp_path):
    # What deployment.rst tells an operator: build, install, then run
    # each playbook by name from a directory that is not ansible/.  A
    # playbook whose name is not an identifier (push-thresholds) cannot
    # be named so.
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(tmp_path / 'c'),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'), ANSIBLE_NOCOLOR='1')
    for args in (['build', os.path.join(REPO, 'ansible'), '--output-path',
                  str(tmp_path / 'b')],
                 ['install', '--no-deps', '-p', str(tmp_path / 'c')]):
        if args[0] == 'install':
            args += [str(p) for p in (tmp_path / 'b').iterdir()]
        done = subprocess.run(
            [os.path.join(BIN, 'ansible-galaxy'), 'collection'] + args,
            capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    names = sorted('nova_paging.fleet.' + n[:-len('.yml')]
                   for n in os.listdir(PLAYBOOKS) if n.endswith('.yml'))
    assert 'nova_paging.fleet.site' in names
    (tmp_path / 'inventory.yml').write_text('all:\n  hosts: {}\n')
    done = subprocess.run(
        [os.path.join(BIN, 'ansible-playbook'), '-i', 'inventory.yml',
         '--syntax-check'] + names, capture_output=True, text=True,
        env=env, cwd=str(tmp_path), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in names:
        assert 'playbook: %s' % os.path.join(
            str(tmp_path / 'c'), 'ansible_collections', 'nova_paging',
            'fleet', 'playbooks', name.rsplit('.', 1)[1] + '.yml') \
            in done.stdout, done.stdout


def test_prometheus_names_each_agent_as_nova_names_its_host():
    # The inventory's ansible_host is an address; the strategy looks a
    # host's figures up by the instance label, <Nova's host name>:<port>.
    hostvars = {
        'cmp-001': {'ansible_host': '192.0.2.11',
                    'agent_listen_address': '192.0.2.11'},
        'cmp-002': {'ansible_host': '192.0.2.12', 'agent_listen_port': 9800,
                    'nova_paging_nova_host': 'cmp-002.example.net'},
    }
    targets = yaml.safe_load(render(
        'monitoring', 'file_sd.yml.j2', hostvars=hostvars,
        groups={'nova_paging_compute': sorted(hostvars)}))
    assert [t['targets'] for t in targets] == [['192.0.2.11:9782'],
                                               ['192.0.2.12:9800']]
    assert [pool_figures.host_name(t['labels']['instance'])
            for t in targets] == ['cmp-001', 'cmp-002.example.net']
    assert [t['labels']['instance'].rsplit(':', 1)[1]
            for t in targets] == ['9782', '9800']


def run_site(tmp_path, inventory, *args):
    """site.yml of the checkout's collection, on this machine."""
    collections = tmp_path / 'collections' / 'ansible_collections'
    (collections / 'nova_paging').mkdir(parents=True)
    (collections / 'nova_paging' / 'fleet').symlink_to(
        os.path.abspath(os.path.join(REPO, 'ansible')))
    (tmp_path / 'inventory.yml').write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(
        tmp_path / 'collections'), ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'),
        ANSIBLE_NOCOLOR='1', ANSIBLE_GATHERING='explicit')
    return subprocess.run(
        [os.path.join(BIN, 'ansible-playbook'), '-i', 'inventory.yml',
         'nova_paging.fleet.site'] + list(args), capture_output=True,
        text=True, env=env, cwd=str(tmp_path), timeout=300)


def test_site_leaves_stock_hosts_without_a_dkms_source_alone(tmp_path):
    # A stock host (no patched modules) without a DKMS source, and a
    # pool member with one: site.yml patches neither, and says why.
    hosts = {}
    for name, extra in (('stock-1', {}),
                        ('pool-1', {'nova_paging_pool': 'shadow',
                                    'kvm_patch_dkms_source': '/srv/dkms',
                                    'kvm_patch_dkms_version': '1'})):
        root = tmp_path / name
        (root / 'run' / 'libvirt' / 'qemu').mkdir(parents=True)
        hosts[name] = dict(extra, ansible_connection='local',
                           ansible_python_interpreter=sys.executable,
                           nova_paging_root=str(root),
                           kvm_patch_dkms_command='/nonexistent/dkms')
    done = run_site(tmp_path, {'all': {'children': {
        'nova_paging_compute': {'hosts': hosts}}}}, '--tags', 'kvm_patch')
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    text = ' '.join(done.stdout.split())
    assert ('stock-1: kvm_patch skipped, no kvm_patch_dkms_source to build '
            'the patch from') in text
    assert ('pool-1: kvm_patch skipped, a member of the shadow pool keeps '
            'its stock kernel') in text
    assert 'not found' not in text


def test_the_strategys_options_leave_the_endpoint_to_watcher_by_default():
    conf = configparser.ConfigParser()
    conf.read_string(render('pools', 'watcher.conf.j2',
                            pools_prometheus_url='',
                            pools_prometheus_timeout=30))
    assert dict(conf['watcher_strategies.paging_fit']) == {
        'prometheus_timeout': '30'}
    conf = configparser.ConfigParser()
    conf.read_string(render('pools', 'watcher.conf.j2',
                            pools_prometheus_url='http://mon-001:9090',
                            pools_prometheus_timeout=30))
    assert conf['watcher_strategies.paging_fit']['prometheus_url'] == (
        'http://mon-001:9090')


def test_boot_placement_loads_the_weigher_only_with_a_prometheus(tmp_path):
    """The nova role's scheduler file names the weigher the package
    ships, beside Nova's own, with the URL; without one, no weigher."""
    from nova_adaptive_paging.scheduler.weights import paging_pool
    weigher = '%s.%s' % (paging_pool.__name__,
                         paging_pool.PagingPoolWeigher.__name__)
    values = role_yaml('nova', 'vars', 'main.yml')
    assert values['nova_paging_nova__weigher'] == weigher
    plain = render('nova', 'nova-adaptive-paging.conf.j2',
                   **{k: v for k, v in values.items() if k.endswith(
                       '__filter') or k.endswith('__weigher')})
    assert 'weight_classes' not in plain
    assert '[adaptive_paging]' not in plain
    url = 'http://prometheus.example.net:9090'
    text = render('nova', 'nova-adaptive-paging.conf.j2',
                  nova_paging_nova_boot_placement_prometheus_url=url,
                  **{k: v for k, v in values.items() if k.endswith(
                      '__filter') or k.endswith('__weigher')})
    # As nova-scheduler reads it: Nova's own options and the package's.
    from nova.conf import scheduler as nova_scheduler_conf
    from oslo_config import cfg
    from nova_adaptive_paging.conf import scheduler as scheduler_conf
    path = tmp_path / 'nova.conf'
    path.write_text(text)
    conf = cfg.ConfigOpts()
    nova_scheduler_conf.register_opts(conf)
    scheduler_conf.register_opts(conf)
    conf(['--config-file', str(path)], default_config_files=[])
    assert conf.filter_scheduler.weight_classes == [
        'nova.scheduler.weights.all_weighers', weigher]
    assert conf.adaptive_paging.prometheus_url == url
    assert conf.adaptive_paging.pool_weight_multiplier == 1.0
    assert 'AdaptivePagingFilter' in conf.filter_scheduler.enabled_filters
