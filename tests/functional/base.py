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

"""Nova's own functional framework, with the project's filter enabled.

Real nova-api (in-process, wsgi-intercept), conductor, scheduler and the
placement fixture; computes run Nova's fake virt driver, since no machine
here runs KVM guests (the fake driver is the one part that is not real).
Capabilities are published exactly as the agent does: through
``nova_adaptive_paging.placement`` over a keystoneauth adapter talking HTTP
to the placement fixture.
"""

import os
import sysconfig
import time

import fixtures
import nova.conf
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import integrated_helpers

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import capabilities
from nova_adaptive_paging.conf import scheduler as scheduler_conf
from nova_adaptive_paging import placement
from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary

FILTER = 'AdaptivePagingFilter'
# nova.conf's [adaptive_paging], registered as the filter's module does
# (the control run never loads it).
scheduler_conf.register_opts(nova.conf.CONF)
FILTER_PATH = ('nova_adaptive_paging.scheduler.filters.paging_filter.'
               + FILTER)
HOST_NAME_WEIGHER = 'nova.tests.fixtures.nova.HostNameWeigher'
API_PASTE_INI = os.path.join(sysconfig.get_path('data'), 'etc', 'nova',
                             'api-paste.ini')

# The control run (test_control.py): the scheduler without the project's
# part in it, neither the filter (and the request filter it registers)
# nor the trait that ``nova-paging flavor set`` pairs with hw:paging.
CONTROL_ENV = 'NOVA_PAGING_TEST_WITHOUT_FILTER'

# What each fake compute host can give, as its agent would detect it.
HOSTS = {
    'bare': None,                                   # no agent: no traits
    'stock-noept': capabilities.Capabilities(0, False, 'intel-icelake-'
                                             'server', False),
    'stock-ept': capabilities.Capabilities(0, True, 'intel-icelake-server',
                                           False),
    'patched1': capabilities.Capabilities(spec.ABI_VERSION, True, 'amd-zen3',
                                          False),
    'patched2': capabilities.Capabilities(spec.ABI_VERSION, True,
                                          'intel-nehalem', True),
}
# The hosts that may not take a request weigh most, so that a guest lands
# where it may because of the filter, not because of the weighers.
WEIGHTS = {'bare': 500, 'stock-noept': 400, 'stock-ept': 300,
           'patched1': 200, 'patched2': 100}


class PagingTestBase(integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = 'fake.MediumFakeDriver'
    microversion = 'latest'
    # The fleet: host name -> capabilities its agent publishes (None: no
    # agent), and the weight that makes the scheduler prefer a host.
    hosts = HOSTS
    weights = WEIGHTS
    # The control run (test_control.py) turns the filter and the pair off.
    filter_enabled = not os.environ.get(CONTROL_ENV)
    # Weighers the scheduler loads beside the fixture's host name weigher.
    extra_weighers = ()

    def setUp(self):
        # The scheduler builds its filters and weighers when it starts, in
        # super().setUp(): configure them first.
        self.flags(api_paste_config=API_PASTE_INI, group='wsgi')
        self.flags(available_filters=['nova.scheduler.filters.all_filters',
                                      FILTER_PATH],
                   group='filter_scheduler')
        enabled = [f for f in nova.conf.CONF.filter_scheduler
                   .enabled_filters if f != FILTER]
        if self.filter_enabled:
            enabled.append(FILTER)
        self.flags(enabled_filters=enabled, group='filter_scheduler')
        self.useFixture(nova_fixtures.HostNameWeigherFixture(self.weights))
        if self.extra_weighers:
            # After the fixture, which loads its weigher alone.
            self.flags(weight_classes=[HOST_NAME_WEIGHER]
                       + list(self.extra_weighers), group='filter_scheduler')
        # The request filter's state, exported where node_exporter would
        # read it: this test's own directory, not the machine's.
        self.textfile_dir = self.useFixture(fixtures.TempDir()).path
        self.flags(textfile_collector_dir=self.textfile_dir,
                   group='adaptive_paging')
        # Nothing to undo between tests in Nova's list of request filters:
        # the scheduler's start adds the entry once, and the entry acts
        # only while this test's scheduler runs the filter with
        # [adaptive_paging] request_filter on (read per request).
        super().setUp()

        self.placement_adapter = ks_adapter.Adapter(
            ks_session.Session(auth=token_endpoint.Token(
                self.placement.fixture.endpoint, 'admin')),
            service_type='placement', raise_exc=False)
        self.rp_uuids = {}
        for host, caps in self.hosts.items():
            self._start_compute(host)
            self.rp_uuids[host] = self._get_provider_uuid_by_host(host)
            if caps is not None:
                self.publish(host, caps)

    def _clear_attrs(self):
        # nova.test.TestCase deletes instance attributes in a cleanup,
        # which breaks pytest's own teardown; pytest needs none of it.
        pass

    def publish(self, host, caps):
        return placement.publish(self.placement_adapter, host, caps)[1:]

    def traits_of(self, host):
        resp = self.placement_adapter.get(
            '/resource_providers/%s/traits' % self.rp_uuids[host],
            microversion='1.6')
        return set(resp.json()['traits'])

    def paging_flavor(self, paging=None, paired=True, memory_mb=256,
                      **extra_specs):
        """A flavor asking ``hw:paging=paging``, with its required trait
        (as ``nova-paging flavor set`` writes it) unless ``paired`` is
        false or this is the control run; ``extra_specs`` are added as
        they are."""
        paired = paired and self.filter_enabled
        if paging is not None:
            specs = capabilities.flavor_extra_specs(
                policy.PagingPolicy(policy.parse_paging(paging)))
            if not paired:
                specs = {vocabulary.KEY_POLICY: paging}
            extra_specs = dict(specs, **extra_specs)
        return self._create_flavor(vcpu=1, memory_mb=memory_mb, disk=1,
                                   extra_spec=extra_specs or None)

    def boot(self, flavor, expected_state='ACTIVE'):
        server = self._create_server(flavor_id=flavor, networks='none',
                                     expected_state=expected_state)
        return server

    def boot_either(self, flavor):
        """Boot; the server once it is ACTIVE or in ERROR with its fault."""
        server = self.api.post_server({'server': self._build_server(
            flavor_id=flavor, networks='none')})
        for _ in range(20):
            server = self.admin_api.get_server(server['id'])
            if server['status'] == 'ACTIVE' or 'fault' in server:
                return server
            time.sleep(0.5)
        self.fail('server neither ACTIVE nor in ERROR: %s' % server)

    def host_of(self, server):
        return self.admin_api.get_server(server['id'])[
            'OS-EXT-SRV-ATTR:host']
