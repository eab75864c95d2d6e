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

"""A Watcher deployed beside Nova's functional framework, as
doc/source/watcher.rst deploys it: the collection's pools play, Watcher's
configuration and its REST API as ``openstack optimize`` calls it; and
the loopback relay that lets Watcher's processes reach the Nova API and
placement Nova's framework serves inside the test's process only
(tests/functional/test_watcher_decision_engine.py)."""

import configparser
import json
import os
import socketserver
import sys
import threading
import time
from wsgiref import simple_server

import requests
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
BIN = os.path.dirname(sys.executable)
# Watcher's processes import the package under test from this checkout
# (its entry points are the installed package's: the same names).
CHECKOUT_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    p for p in (REPO, os.environ.get('PYTHONPATH'))
    if p))


class Relay(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    """Loopback HTTP for an API Nova's framework serves in this process
    only (wsgi-intercept): each request is sent on to it as it came, with
    ``identity``: the headers Keystone's middleware would add for
    Watcher's service user (Nova's framework stubs that middleware out
    and reads them)."""
    daemon_threads = True

    @classmethod
    def to(cls, endpoint, identity=None):
        endpoint = endpoint.rstrip('/')

        def app(environ, start_response):
            headers = {k[5:].replace('_', '-').title(): v
                       for k, v in environ.items() if k.startswith('HTTP_')}
            headers.update(identity or {})
            if environ.get('CONTENT_TYPE'):
                headers['Content-Type'] = environ['CONTENT_TYPE']
            size = int(environ.get('CONTENT_LENGTH') or 0)
            query = environ.get('QUERY_STRING')
            resp = requests.request(
                environ['REQUEST_METHOD'], endpoint + environ['PATH_INFO']
                + ('?' + query if query else ''), headers=headers,
                data=environ['wsgi.input'].read(size) if size else None,
                allow_redirects=False)
            start_response('%d %s' % (resp.status_code, resp.reason), [
                (k, v) for k, v in resp.headers.items() if k.lower() not in (
                    'content-length', 'transfer-encoding', 'connection',
                    'content-encoding')])
            return [resp.content]
        server = simple_server.make_server(
            '127.0.0.1', 0, app, server_class=cls,
            handler_class=_QuietHandler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, 'http://127.0.0.1:%d' % server.server_port


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


def pools_play(work, root):
    """The command line and environment of the collection's pools.yml,
    run by name as deployment.rst says, for a decision-engine host of the
    nova_paging_watcher group (Watcher's environment is this one: the
    package is in it already)."""
    collections = os.path.join(work, 'collections', 'ansible_collections',
                               'nova_paging')
    os.makedirs(collections)
    os.symlink(os.path.join(REPO, 'ansible'),
               os.path.join(collections, 'fleet'))
    inventory = os.path.join(work, 'inventory.yml')
    with open(inventory, 'w', encoding='utf-8') as f:
        yaml.safe_dump({'all': {'children': {'nova_paging_watcher': {
            'hosts': {'watcher-1': {
                'ansible_connection': 'local',
                'ansible_python_interpreter': sys.executable,
                'nova_paging_root': root,
                'nova_paging_service_manager': 'pidfile',
                'pools_watcher_install_package': False}}}}}}, f)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(
        work, 'collections'), ANSIBLE_LOCAL_TEMP=os.path.join(work, 'tmp'),
        ANSIBLE_NOCOLOR='1', ANSIBLE_GATHERING='explicit')
    return ['-i', inventory, 'nova_paging.fleet.pools'], env


def watcher_conf(work, api_port, prometheus_port, nova, placement):
    """watcher.conf of a Watcher deployed beside this fleet: its database,
    its API without Keystone, Prometheus as its datasource
    ([prometheus_client], as Watcher's docs set it), Nova's API and
    placement (Nova's framework takes the token admin:admin)."""
    conf = configparser.ConfigParser()
    conf.read_dict({
        'DEFAULT': {'host': 'watcher-1', 'transport_url': 'fake:/',
                    'enable_authentication': 'false'},
        'api': {'host': '127.0.0.1', 'port': str(api_port)},
        'database': {'connection': 'sqlite:///%s' % os.path.join(
            work, 'watcher.sqlite')},
        'oslo_concurrency': {'lock_path': os.path.join(work, 'locks')},
        # How often the decision engine looks for new continuous audits
        # (10 s by default): the test need not wait.
        'watcher_decision_engine': {'continuous_audit_interval': '1'},
        # The compute model only: this fleet has no Cinder or Ironic
        # (the storage collector would ask Keystone's catalog for one).
        'collector': {'collector_plugins': 'compute'},
        'watcher_datasources': {'datasources': 'prometheus'},
        'prometheus_client': {'host': '127.0.0.1',
                              'port': str(prometheus_port)},
        'nova': {'auth_type': 'admin_token', 'endpoint': nova + '/v2.1',
                 'token': 'admin:admin'},
        'placement': {'auth_type': 'admin_token', 'endpoint': placement,
                      'token': 'admin:admin'},
        'watcher_clients_auth': {'auth_type': 'admin_token',
                                 'endpoint': nova + '/v2.1',
                                 'token': 'admin:admin'},
    })
    path = os.path.join(work, 'watcher.conf')
    with open(path, 'w', encoding='utf-8') as f:
        conf.write(f)
    return path


class WatcherAPI:
    """Watcher's REST API as ``openstack optimize`` calls it (an admin,
    authentication off)."""

    HEADERS = {'X-User-Id': 'admin', 'X-Project-Id': 'admin',
               'X-Roles': 'admin', 'Content-Type': 'application/json'}

    def __init__(self, url, work):
        self.url, self.work = url, work
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(url + '/', timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise AssertionError('watcher-api did not answer at %s: %s'
                                     % (url, self.log('watcher-api-wsgi')))
            time.sleep(0.3)

    def post(self, path, body, status=201):
        resp = requests.post(self.url + path, data=json.dumps(body),
                             headers=self.HEADERS, timeout=30)
        assert resp.status_code == status, (path, resp.status_code,
                                            resp.text)
        return resp.json() if status == 201 else resp.text

    def get(self, path):
        resp = requests.get(self.url + path, headers=self.HEADERS,
                            timeout=30)
        assert resp.ok, (path, resp.status_code, resp.text)
        return resp.json()

    def wait_for(self, path, key, name, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if name in {x['name'] for x in self.get(path)[key]}:
                return
            time.sleep(0.3)
        raise AssertionError('%s: no %s after %d s: %s' % (
            path, name, timeout, self.log('watcher-decision-engine')))

    def log(self, service):
        with open(os.path.join(self.work, service + '.log')) as f:
            return f.read()[-4000:]

    def wait_for_plan(self, audit, timeout=60):
        """The action plan of the continuous ``audit``'s (a name) first
        run, once that run is over (Watcher saves the plan before its
        actions, and the audit's next run time after both); found as
        watcher.rst finds it: the audit's UUID from its name."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.get('/v1/audits/%s' % audit)
            if state['state'] == 'FAILED':
                break
            if state['next_run_time']:
                plans = self.get('/v1/action_plans/detail?audit_uuid=%s'
                                 % state['uuid'])['action_plans']
                assert len(plans) == 1, plans
                return plans[0]
            time.sleep(0.5)
        raise AssertionError('no action plan for audit %s (%s): %s' % (
            audit, state['state'], self.log('watcher-decision-engine')))
