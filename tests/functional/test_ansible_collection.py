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

"""The Ansible collection (ansible/), run for real with ansible-playbook.

The inventory's hosts are local: ``ansible_connection=local``, each with
its own root prefix (``nova_paging_root``) under which the roles lay
the node out, and each a simulated KVM host (FUSE, libvirt's test
driver) of its own CPU generation.  Local connections rather than
network namespaces with their own sshd: the roles' behaviour under test
(what they write, start, refuse and fetch) does not depend on the
transport, and one machine can hold several roots with no sshd, keys or
addresses to set up; every path the roles touch goes through the
prefix, so a role that forgot it would write outside its host and the
tests would see it.  Services run under start-stop-daemon (the roles'
``pidfile`` manager): systemd is not PID 1 here.

The calibration guest is ``simhost.guest_bench``: the benchmarks run
natively on this machine and the simulated VM's mode adds its modeled
costs (no machine here runs a guest whose paging mode costs anything).
"""

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time
import zipfile

import pytest
import requests
import yaml

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.costmodel import hardware as costhw
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.simhost import prometheus as promserver
from nova_adaptive_paging.pools import figures as pool_figures
from nova_adaptive_paging.telemetry import queries
from nova_adaptive_paging.tuning import cost_fit

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
COLLECTION = os.path.join(REPO, 'ansible')
FLEET = os.path.join(REPO, 'nova_adaptive_paging', 'simhost', 'data',
                     'fleet')
BIN = os.path.dirname(sys.executable)
# Two simulated hosts of two generations, with their true costs.
HOSTS = {'compute-a': 'zen3', 'compute-b': 'icelake-server'}
CALIBRATION_DOMAIN = 'instance-00000002'


def ansible_bin(name):
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        pytest.fail('%s is missing: test-requirements.txt installs it'
                    % name)
    return path


def free_port():
    return promserver.free_port()


def _built_from(wheel, commit):
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.endswith('.dist-info/pbr.json')]
        if len(names) != 1:
            return False
        built = json.loads(z.read(names[0]))['git_version']
    return bool(commit) and commit.startswith(built)


@pytest.fixture(scope='module')
def wheelhouse(tmp_path_factory):
    """The package and its dependencies as wheels (pip's cache makes
    this quick after tox installed them): the agent role installs from
    here, as a site without an index would.  The package is the wheel
    ``tox -e release`` built into ``$NAP_DIST``, as it is released, when
    there is one of this commit (pbr records the commit it built in
    pbr.json); else built from the tree."""
    out = tmp_path_factory.mktemp('wheels')
    source = REPO
    dist = os.environ.get('NAP_DIST')
    if dist and os.path.isdir(dist):
        head = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=REPO,
                              capture_output=True, text=True).stdout.strip()
        built = [n for n in os.listdir(dist)
                 if n.startswith('nova_adaptive_paging-')
                 and n.endswith('.whl')
                 and _built_from(os.path.join(dist, n), head)]
        if len(built) == 1:
            source = os.path.join(dist, built[0])
    done = subprocess.run(
        [sys.executable, '-m', 'pip', 'wheel', '-q', '-w', str(out), '-c',
         os.path.join(REPO, 'upper-constraints.txt'), source],
        capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    ours = [n for n in os.listdir(out)
            if n.startswith('nova_adaptive_paging-')]
    assert len(ours) == 1, ours
    return str(out), ours[0].split('-')[1]


class Site:
    """The inventory, the simulated hosts and ansible-playbook."""

    def __init__(self, workdir, wheels, version):
        self.dir = workdir
        self.sims = []
        self.ports = {}
        os.makedirs(os.path.join(workdir, 'collections',
                                 'ansible_collections', 'nova_paging'))
        os.symlink(COLLECTION, os.path.join(
            workdir, 'collections', 'ansible_collections', 'nova_paging',
            'fleet'))
        self.profiles = os.path.join(workdir, 'profiles')
        self.vars = {
            'ansible_connection': 'local',
            # Where monitoring scrapes the agents: this machine (no name
            # of the inventory resolves here).
            'ansible_host': '127.0.0.1',
            'ansible_python_interpreter': sys.executable,
            'nova_paging_service_manager': 'pidfile',
            'nova_paging_package': 'nova-adaptive-paging==%s' % version,
            'nova_paging_pip_environment': {'PIP_NO_INDEX': '1',
                                            'PIP_FIND_LINKS': wheels},
            'nova_paging_profiles_dir': self.profiles,
            'nova_paging_controller_cli': os.path.join(BIN, 'nova-paging'),
            'agent_python': sys.executable,
            'agent_user': 'root',
            'agent_create_user': False,
            'nova_paging_nova_install_package': False,
            # No Watcher here to install the plugin into.
            'pools_watcher_install_package': False,
            'nova_paging_nova_publish_capabilities': False,
            'monitoring_scrape_interval': '2s',
            'calibrate_results_dir': os.path.join(workdir, 'results'),
            # The per-miss cost is the small difference of two native
            # runs plus 20M modeled misses: a chase that stays in this
            # machine's caches (256 pages: 0.09 s, jitter 5 %, against
            # 0.25 s and 8 % at 2048 pages) keeps the jitter well below
            # the modeled 0.1 s it must recover.
            'calibrate_tlb_args': '--pages 256',
            # The fit takes each mode's fastest run: five repeats give
            # the benchmarks more chances of an undisturbed one on a
            # busy machine (the fault churn's native time ranged from
            # 0.33 to 0.68 s beside a kernel build).
            'calibrate_repeats': 5,
            'validate_reports_dir': os.path.join(workdir, 'reports'),
            # The simulated host has no /dev/kvm for the selftests.
            'validate_require_selftests': False,
        }
        self.hosts = {}
        for name, hw in HOSTS.items():
            root = os.path.join(workdir, name)
            self.ports[name] = free_port()
            hardware = os.path.join(FLEET, hw + '.yaml')
            self.sims.append(self._simulate(root, hardware))
            self.hosts[name] = {
                'nova_paging_root': root,
                'agent_libvirt_uri': 'test://%s' % os.path.join(
                    root, simhost.NODE_XML),
                'agent_listen_port': self.ports[name],
                'calibrate_domain': CALIBRATION_DOMAIN,
                'calibrate_bin_dir': os.path.join(root, 'calibration-bin'),
                'calibrate_exec': ' '.join([
                    sys.executable, '-m',
                    'nova_adaptive_paging.simhost.guest_bench', '--root',
                    root, '--domain', CALIBRATION_DOMAIN, '--hardware',
                    hardware, '--']),
                'validate_domain': 'instance-00000001',
                'validate_workload': 'sleep 1',
                'validate_switch_period': 0.1,
                'hardware': hardware,
            }
        for name in ('controller', 'monitor'):
            self.hosts[name] = {'nova_paging_root':
                                os.path.join(workdir, name)}
        for name, hostvars in self.hosts.items():
            for sub in ('etc', 'run'):
                os.makedirs(os.path.join(hostvars['nova_paging_root'], sub),
                            exist_ok=True)
        self.inventory = self.write_inventory('inventory.yml')

    def _simulate(self, root, hardware):
        sim = subprocess.Popen(
            [sys.executable, '-m', 'nova_adaptive_paging.cmd.cli',
             'sim-host', '--root', root, '--hardware', hardware, '--vms',
             '2', '--paging', 'adaptive', '--paging', 'none', '--speed',
             '1', '--duration', '3000'],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        debugfs = os.path.join(root, spec.DEBUGFS_DIR)
        for _ in range(1200):
            if os.path.isdir(debugfs) and len(os.listdir(debugfs)) == 2:
                return sim
            assert sim.poll() is None, sim.communicate()
            time.sleep(0.05)
        raise AssertionError('the simulated host %s did not start' % root)

    def write_inventory(self, name, edit=None):
        hosts = json.loads(json.dumps(self.hosts))
        if edit:
            edit(hosts)
        compute = {h: hosts[h] for h in HOSTS if h in hosts}
        extra = {h: v for h, v in hosts.items()
                 if h not in HOSTS and h not in ('controller', 'monitor')}
        doc = {'all': {'vars': self.vars, 'children': {
            'nova_paging_compute': {'hosts': compute},
            'nova_paging_calibration': {'hosts': {h: {} for h in compute}},
            'nova_paging_validation': {'hosts': {'compute-a': {}}},
            'nova_paging_controller': {'hosts': {
                'controller': hosts['controller']}},
            'nova_paging_watcher': {'hosts': {'controller': {}}},
            'nova_paging_monitoring': {'hosts': {
                'monitor': hosts['monitor']}},
            'stock': {'hosts': extra},
        }}}
        path = os.path.join(self.dir, name)
        with open(path, 'w', encoding='utf-8') as f:
            yaml.safe_dump(doc, f)
        return path

    def play(self, playbook, *args, inventory=None):
        env = dict(os.environ,
                   ANSIBLE_COLLECTIONS_PATH=os.path.join(self.dir,
                                                         'collections'),
                   ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1',
                   ANSIBLE_HOST_KEY_CHECKING='0',
                   ANSIBLE_LOCAL_TEMP=os.path.join(self.dir, 'tmp'),
                   ANSIBLE_RETRY_FILES_ENABLED='0',
                   PATH=BIN + os.pathsep + os.environ.get('PATH', ''))
        # The virtualenvs the roles make must see only what they install.
        env.pop('PYTHONPATH', None)
        playbook_path = os.path.join(COLLECTION, 'playbooks', playbook)
        if os.path.isabs(playbook):
            playbook_path = playbook
        done = subprocess.run(
            [ansible_bin('ansible-playbook'), '-i',
             inventory or self.inventory, playbook_path] + list(args),
            capture_output=True, text=True, env=env, timeout=1500,
            cwd=self.dir)
        return done

    def recap(self, output):
        """{host: {ok, changed, failed, ...}} from the PLAY RECAP."""
        out = {}
        tail = output.split('PLAY RECAP', 1)[-1]
        for line in tail.splitlines():
            m = re.match(r'^(\S+)\s+:\s+(.*)$', line.strip())
            if m:
                out[m.group(1)] = {k: int(v) for k, v in re.findall(
                    r'(\w+)=(\d+)', m.group(2))}
        return out

    def root(self, host):
        return self.hosts[host]['nova_paging_root']

    def metrics(self, host):
        return requests.get('http://127.0.0.1:%d/metrics'
                            % self.ports[host], timeout=10).text

    def stop(self):
        for host in HOSTS:
            pidfile = os.path.join(self.root(host), 'run',
                                   'nova-paging-agent.pid')
            subprocess.run(['start-stop-daemon', '--stop', '--retry',
                            'TERM/20/KILL/5', '--remove-pidfile',
                            '--pidfile', pidfile], capture_output=True)
        for sim in self.sims:
            sim.send_signal(signal.SIGTERM)
            try:
                sim.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                sim.kill()


@pytest.fixture(scope='module')
def site(tmp_path_factory, wheelhouse):
    s = Site(str(tmp_path_factory.mktemp('site')), *wheelhouse)
    try:
        yield s
    finally:
        s.stop()


def test_ansible_lint_production_profile_is_clean(site):
    done = subprocess.run(
        [ansible_bin('ansible-lint'), '--offline', '--nocolor'],
        capture_output=True, text=True, cwd=COLLECTION, timeout=600,
        env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(
            site.dir, 'collections'), PATH=BIN + os.pathsep
            + os.environ.get('PATH', '')))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Profile 'production' was required, and it passed" in \
        done.stdout + done.stderr


def test_the_built_collection_carries_its_files(site, tmp_path):
    done = subprocess.run(
        [ansible_bin('ansible-galaxy'), 'collection', 'build', COLLECTION,
         '--output-path', str(tmp_path)], capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 0, done.stderr
    assert 'Skipping' not in done.stdout + done.stderr
    (tarball,) = os.listdir(tmp_path)
    with tarfile.open(os.path.join(tmp_path, tarball)) as tar:
        names = set(tar.getnames())
    for name in ('roles/calibrate/files/nap-tlb-chase.c',
                 'roles/calibrate/files/nap-fault-churn.c',
                 'roles/monitoring/files/prometheus/rules.yml',
                 'roles/monitoring/files/prometheus/alerts.yml',
                 'roles/monitoring/files/grafana/nova-paging-fleet.json'):
        assert name in names


def test_every_playbook_passes_the_syntax_check(site):
    for playbook in ('site.yml', 'calibrate.yml', 'validate.yml',
                     'push_thresholds.yml', 'pools.yml'):
        done = site.play(playbook, '--syntax-check')
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize('variable, value, words', [
    ('agent_listen_port', 'nine', "agent_listen_port"),
    ('agent_service_manager', 'upstart', 'systemd, pidfile'),
    ('thresholds_wait_applied', 'perhaps', 'thresholds_wait_applied'),
])
def test_an_argument_spec_rejects_a_bad_variable(site, variable, value,
                                                 words):
    done = site.play('site.yml', '-e', '%s=%s' % (variable, value),
                     '-e', '{"nova_paging_site_push_thresholds": true}',
                     '--limit', 'compute-a')
    assert done.returncode != 0
    message = [line for line in done.stdout.splitlines()
               if 'argument' in line.lower() and words in line]
    assert message, done.stdout[-3000:]


def test_site_installs_and_starts_the_agents_and_a_second_run_changes_nothing(
        site):
    first = site.play('site.yml')
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr
    recap = site.recap(first.stdout)
    assert set(recap) == {'compute-a', 'compute-b', 'controller',
                          'monitor'}
    assert all(r['failed'] == 0 for r in recap.values())
    for host, hw in HOSTS.items():
        # The agent runs, serves /metrics, knows its generation and has
        # applied the guests' flavors to the simulated VMs.
        text = site.metrics(host)
        generation = costhw.resolve(site.hosts[host]['hardware']).generation
        assert 'generation="%s"' % generation in text
        debugfs = os.path.join(site.root(host), spec.DEBUGFS_DIR)
        policies = sorted(
            open(os.path.join(debugfs, vm, spec.FILE_POLICY)).read().strip()
            for vm in os.listdir(debugfs))
        assert policies == ['adaptive', 'hap']
        # pidfile mode makes the runtime directory systemd would: the
        # only place the sudoers rule lets the privsep socket be, and
        # where the running agent holds the host's lock.
        run = os.path.join(site.root(host), 'run')
        runtime = os.path.join(run, 'nova-paging-agent')
        assert stat.S_IMODE(os.stat(runtime).st_mode) == 0o700
        with open(os.path.join(run, 'nova-paging-agent.pid')) as f:
            pid = f.read().strip()
        with open(os.path.join(runtime, 'agent.lock')) as f:
            assert f.read().strip() == pid
    # The roles wrote inside their hosts' roots, nowhere else.
    assert not os.path.exists('/etc/nova-adaptive-paging/agent.conf') or \
        'nova-paging-agent' not in open('/etc/nova-adaptive-paging/'
                                        'agent.conf').read()
    second = site.play('site.yml')
    assert second.returncode == 0, second.stdout[-4000:]
    again = site.recap(second.stdout)
    assert {h: r['changed'] for h, r in again.items()} == {
        h: 0 for h in again}, second.stdout[-6000:]
    # Check mode on a deployed site: nothing to change, nothing fails.
    check = site.play('site.yml', '--check')
    assert check.returncode == 0, check.stdout[-4000:]
    assert all(r['changed'] == 0 and r['failed'] == 0
               for r in site.recap(check.stdout).values()), check.stdout


def test_pools_persist_each_nodes_parameter_and_configure_the_strategy(
        site):
    def edit(hosts):
        hosts['compute-a']['nova_paging_pool'] = 'shadow'
        hosts['compute-b']['nova_paging_pool'] = 'hap'
    inventory = site.write_inventory('pools.yml', edit)
    done = site.play('pools.yml', inventory=inventory)
    assert done.returncode == 0, done.stdout[-4000:]

    def persisted(host):
        with open(os.path.join(site.root(host), 'etc', 'modprobe.d',
                               'nova-adaptive-paging-pool.conf')) as f:
            return [line for line in f if line.startswith('options')]
    # The simulated hosts run kvm_amd with npt on.
    assert persisted('compute-a') == ['options kvm_amd npt=0\n']
    assert persisted('compute-b') == ['options kvm_amd npt=1\n']
    # The shadow pool's host still runs with NPT: the role says so, and
    # leaves the module (and its guests) alone.
    assert 'compute-a: kvm_amd runs with npt=Y' in done.stdout
    assert 'compute-b: kvm_amd runs with' not in done.stdout
    with open(os.path.join(site.root('compute-a'), 'sys', 'module',
                           'kvm_amd', 'parameters', 'npt')) as f:
        assert f.read().strip() == 'Y'
    with open(os.path.join(site.root('controller'), 'etc', 'watcher',
                           'watcher.conf.d',
                           '50-nova-adaptive-paging.conf')) as f:
        conf = f.read()
    assert '[watcher_strategies.paging_fit]' in conf
    # No URL of its own: Watcher's datasources' endpoint.
    assert 'prometheus_url =' not in conf
    assert 'prometheus_timeout = 30' in conf
    again = site.play('pools.yml', inventory=inventory)
    assert again.returncode == 0
    assert all(r['changed'] == 0 for r in site.recap(again.stdout).values())
    bad = site.play('pools.yml', '-e', 'nova_paging_pool=ept',
                    '--limit', 'compute-a', inventory=inventory)
    assert bad.returncode != 0
    assert [line for line in bad.stdout.splitlines()
            if 'pools_pool' in line and 'hap, shadow' in line], \
        bad.stdout[-3000:]


def test_the_scheduler_gets_the_filter_as_nova_reads_its_configuration(
        site):
    nova_conf = pytest.importorskip('nova.conf')
    from oslo_config import cfg
    conf = cfg.ConfigOpts()
    nova_conf.scheduler.register_opts(conf)
    conf_dir = os.path.join(site.root('controller'), 'etc', 'nova',
                            'nova.conf.d')
    conf([], project='nova', default_config_files=[],
         default_config_dirs=[conf_dir])
    assert 'AdaptivePagingFilter' in conf.filter_scheduler.enabled_filters
    assert conf.filter_scheduler.available_filters == [
        'nova.scheduler.filters.all_filters',
        'nova_adaptive_paging.scheduler.filters.paging_filter.'
        'AdaptivePagingFilter']


def test_prometheus_scrapes_both_agents_with_the_roles_configuration(site):
    prom_dir = os.path.join(site.root('monitor'), 'etc', 'prometheus')
    with open(os.path.join(prom_dir, 'prometheus.yml')) as f:
        config = yaml.safe_load(f)
    assert [j['job_name'] for j in config['scrape_configs']] == [
        queries.AGENT_JOB]
    dashboards = os.path.join(site.root('monitor'), 'var', 'lib', 'grafana',
                              'dashboards', 'nova-adaptive-paging')
    assert sorted(os.listdir(dashboards)) == sorted(os.listdir(
        os.path.join(REPO, 'dashboards', 'grafana')))
    workdir = os.path.join(site.dir, 'prometheus')
    os.makedirs(workdir)
    server = promserver.Server(workdir, config=config)
    try:
        for _ in range(60):
            up = requests.get(server.url + '/api/v1/query', params={
                'query': queries.agent_up()}, timeout=10).json()
            values = {r['metric']['node']: r['value'][1]
                      for r in up['data']['result']}
            if values == {'compute-a': '1', 'compute-b': '1'}:
                break
            time.sleep(1)
        targets = requests.get(server.url + '/api/v1/targets',
                               timeout=10).json()['data']['activeTargets']
        assert values == {'compute-a': '1', 'compute-b': '1'}, [
            (t['scrapeUrl'], t['lastError']) for t in targets]
        # Scraped at 127.0.0.1, named as Nova names the host: what the
        # paging_fit strategy looks its figures up by.
        assert sorted(pool_figures.host_name(r['metric']['instance'])
                      for r in up['data']['result']) == [
            'compute-a', 'compute-b']
        rules = requests.get(server.url + '/api/v1/rules',
                             timeout=10).json()['data']['groups']
        assert rules, 'the shipped rules are loaded'
    finally:
        server.stop()


def _recovered(site):
    documents = []
    for host in HOSTS:
        path = os.path.join(site.dir, 'results', host + '.json')
        with open(path) as f:
            documents.append((path, json.load(f)))
    return {gen: costs
            for gen, (_, _, costs) in cost_fit.fit(documents).items()}


def test_calibration_fits_each_generations_costs_and_writes_a_profile(
        site):
    # One host at a time: the simulated hosts share this machine's cores,
    # where each real host measures on its own.
    done = site.play('calibrate.yml', '--forks', '1')
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr
    written = sorted(os.listdir(site.profiles))
    assert written == ['amd-zen3.yaml', 'intel-icelake-server.yaml']
    costs = _recovered(site)
    for host, hw_name in HOSTS.items():
        hw = costhw.resolve(site.hosts[host]['hardware'])
        prof = profiles.load(os.path.join(site.profiles,
                                          hw.generation + '.yaml'))
        assert prof.provenance.method == 'calibrated'
        assert 'MODELED' in prof.provenance.source
        assert 'hosts %s,' % host in prof.provenance.source
        got = costs[hw.generation]
        # The simulated host's true costs, recovered through native runs
        # of the benchmarks (their noise is this machine's).
        assert got.fault_s * 1e9 == pytest.approx(
            hw.event_cost_ns['shadow']['page_fault'], rel=0.15)
        assert got.miss_s * 1e9 == pytest.approx(
            hw.event_cost_ns['hap']['tlb_miss'], rel=0.35)
    # The agents run again after the measurement.
    for host in HOSTS:
        assert 'nova_paging_host_info' in site.metrics(host)


def test_push_thresholds_lands_each_generations_profile_and_the_agent_applies_it(  # noqa: E501
        site):
    if not os.path.isdir(site.profiles):
        pytest.fail('needs the calibration test before it')
    done = site.play('push_thresholds.yml')
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr
    recap = site.recap(done.stdout)
    assert all(recap[h]['changed'] >= 1 for h in HOSTS)
    for host in HOSTS:
        gen = costhw.resolve(site.hosts[host]['hardware']).generation
        pushed = os.path.join(site.root(host), 'etc', 'nova-adaptive-paging',
                              'profiles', gen + '.yaml')
        with open(pushed) as f:
            text = f.read()
        with open(os.path.join(site.profiles, gen + '.yaml')) as f:
            assert f.read() == text
        assert 'method="calibrated"' in site.metrics(host)
        with open(os.path.join(site.root(host), spec.PARAMS_DIR,
                               spec.PARAM_THRESHOLDS)) as f:
            assert spec.ThresholdSet.parse(f.read()) == \
                spec.ThresholdSet.from_profile(profiles.loads(text))
    again = site.play('push_thresholds.yml')
    assert again.returncode == 0
    assert all(r['changed'] == 0 for r in site.recap(again.stdout).values()
               ), again.stdout[-5000:]


def test_a_host_whose_generation_has_no_profile_fails_alone(site):
    only = os.path.join(site.dir, 'only-zen3')
    os.makedirs(only)
    shutil.copy(os.path.join(site.profiles, 'amd-zen3.yaml'), only)
    done = site.play('push_thresholds.yml', '-e',
                     'nova_paging_profiles_dir=%s' % only)
    assert done.returncode != 0
    recap = site.recap(done.stdout)
    assert recap['compute-a']['failed'] == 0
    assert recap['compute-b']['failed'] == 1
    assert ('compute-b: no threshold profile for CPU generation '
            'intel-icelake-server') in done.stdout


def test_a_calibration_that_fails_on_one_host_leaves_the_others_fitted(
        site):
    out = os.path.join(site.dir, 'profiles-partial')

    def edit(hosts):
        hosts['compute-b']['calibrate_domain'] = 'instance-000000ff'
    inventory = site.write_inventory('broken-calibration.yml', edit)
    done = site.play('calibrate.yml', '-e',
                     'nova_paging_profiles_dir=%s' % out,
                     inventory=inventory)
    assert done.returncode != 0
    recap = site.recap(done.stdout)
    assert recap['compute-a']['failed'] == 0
    assert recap['compute-b']['failed'] == 1
    assert 'instance-000000ff.pid' in done.stdout
    assert os.listdir(out) == ['amd-zen3.yaml']
    # compute-b's agent was started again after the failed measurement.
    assert 'nova_paging_host_info' in site.metrics('compute-b')


def test_validate_reports_on_the_simulated_host(site):
    done = site.play('validate.yml')
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr
    with open(os.path.join(site.dir, 'reports', 'compute-a.txt')) as f:
        report = f.read()
    assert 'verdict: PASS' in report
    assert 'interface conformance (nova-paging abi conformance): rc 0' in \
        report
    assert 'not run: ' in report            # no /dev/kvm for selftests
    trips = re.search(r'^h-s-h\s+1(\s+\S+){3}\s+(\d+)\s', report, re.M)
    assert trips and int(trips.group(2)) >= 1, report


def test_kvm_patch_refuses_stock_hosts_it_cannot_patch_and_leaves_others(
        site):
    # Two stock-kernel hosts (no paging_switch_abi parameter): one with
    # guests running, one without DKMS.
    stock = {}
    for name, pids in (('stock-busy', ['instance-00000007']),
                       ('stock-nodkms', [])):
        root = os.path.join(site.dir, name)
        os.makedirs(os.path.join(root, 'run', 'libvirt', 'qemu'))
        for pid in pids:
            with open(os.path.join(root, 'run', 'libvirt', 'qemu',
                                   pid + '.pid'), 'w') as f:
                f.write('4242\n')
        stock[name] = {'nova_paging_root': root,
                       'kvm_patch_root': root,
                       'kvm_patch_dkms_command': '/nonexistent/dkms'}

    def edit(hosts):
        hosts.update(stock)
    inventory = site.write_inventory('stock.yml', edit)
    # site.yml's compute play is for nova_paging_compute: the role alone
    # on compute-a (patched) and the stock hosts.
    play = os.path.join(site.dir, 'kvm-patch.yml')
    with open(play, 'w') as f:
        yaml.safe_dump([{'name': 'Patch', 'hosts': 'compute-a:stock',
                         'roles': ['nova_paging.fleet.kvm_patch']}], f)
    done = site.play(play, inventory=inventory)
    assert done.returncode != 0
    recap = site.recap(done.stdout)
    assert recap['compute-a'] == dict(recap['compute-a'], failed=0,
                                      changed=0)
    assert recap['stock-busy']['failed'] == 1
    assert recap['stock-nodkms']['failed'] == 1
    assert ('stock-busy: 1 guest(s) running (instance-00000007); '
            'reloading kvm would kill them') in ' '.join(done.stdout.split())
    assert 'stock-nodkms: /nonexistent/dkms not found' in done.stdout
