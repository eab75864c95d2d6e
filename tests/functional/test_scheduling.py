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

"""Where guests land, in Nova's functional framework.

Two ways a request reaches a capable host, and both make placement
select, whatever ``max_placement_results`` is.  A flavor written by
``nova-paging flavor set`` carries ``hw:paging`` and its required trait,
Nova's own mechanism and the contract (TestPairedFlavors).  A flavor
with ``hw:paging`` alone gets the trait from the request filter the
filter registers (TestKeyAlone, TestFleetScale); without it (turned off,
or a Nova whose internals changed) the scheduler runs on and refuses
such a flavor, saying why (TestRequestFilterOff, TestChangedNova).  The
control run (test_control.py) runs this module without the filter and
without the pair: every test here fails there, except the few listed in
it that assert what the project must not change.
"""

import os

import fixtures
from nova.scheduler import request_filter as nova_request_filter
from nova.tests.functional.api import client as api_client
from nova.virt import fake
from prometheus_client import parser

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import capabilities
from nova_adaptive_paging import policy
from nova_adaptive_paging.scheduler import request_filter
from tests.functional import base

CAN = {
    'adaptive': {'patched1', 'patched2'},
    'shadow': {'stock-noept', 'patched1', 'patched2'},
    'hap': {'stock-ept', 'patched1', 'patched2'},
}


class LandingMixin(object):

    def check_lands(self, flavor, allowed, boots=3):
        hosts = {self.host_of(self.boot(flavor)) for _ in range(boots)}
        self.assertTrue(hosts <= allowed, hosts)
        return hosts

    def warnings(self):
        return self.logged('WARNING')

    def logged(self, level, *words):
        return [line for line in self.stdlog.logger.output.splitlines()
                if 'paging' in line.lower() and level in line
                and all(word in line for word in words)]

    def exported(self):
        """The request filter's state as node_exporter would read it."""
        with open(os.path.join(self.textfile_dir, request_filter.TEXTFILE),
                  encoding='utf-8') as f:
            fams = list(parser.text_string_to_metric_families(f.read()))
        return {s.labels['state'] for f in fams for s in f.samples
                if s.value == 1}

    def refused_saying_why(self, flavor, *words):
        """The flavor is refused (NoValidHost) and one INFO line of the
        filter names ``words``."""
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']))
        said = self.logged('INFO', 'AdaptivePagingFilter refuses', *words)
        self.assertEqual(1, len(said), said)
        return server


class TestPairedFlavors(LandingMixin, base.PagingTestBase):
    """Placement selects through the flavor's own trait."""

    def test_each_policy_lands_where_it_can_be_given(self):
        for paging, first in (('adaptive', 'patched1'),
                              ('shadow', 'stock-noept'),
                              ('hap', 'stock-ept')):
            self.assertEqual({first}, self.check_lands(
                self.paging_flavor(paging), CAN[paging]))
        self.assertEqual([], self.warnings())

    def test_no_paging_spec_boots_where_it_always_did(self):
        # A mixed fleet: the most preferred host has no agent and no
        # CUSTOM_PAGING_* trait at all; a flavor that asks nothing of
        # paging goes there, whatever the agents' default_policy is.
        self.assertEqual({'bare'}, self.check_lands(self.paging_flavor(),
                                                    set(base.HOSTS)))
        self.assertEqual({'bare'}, self.check_lands(
            self.paging_flavor(**{'hw:cpu_policy': 'shared'}),
            set(base.HOSTS), boots=1))
        self.assertEqual([], self.warnings())

    def test_extra_spec_validation_at_latest_microversion(self):
        flavor = self._create_flavor(vcpu=1, memory_mb=256, disk=1)
        for value in ('adaptive', 'hap', 'shadow'):
            self.api.post_extra_spec(flavor, {'extra_specs': {
                'hw:paging': value}})
        self.api.post_extra_spec(flavor, {'extra_specs': {
            'hw:paging': 'adaptive', 'hw:paging_interval': '10',
            'hw:paging_profile': 'amd-zen3'}})
        for key, bad in (('hw:paging', 'bogus'),
                         ('hw:paging_interval', '0'),
                         ('hw:paging_profile', 'No Such')):
            exc = self.assertRaises(
                api_client.OpenStackApiException, self.api.post_extra_spec,
                flavor, {'extra_specs': {key: bad}})
            self.assertEqual(400, exc.response.status_code)
            self.assertIn(bad, exc.response.text)


class TestKeyAlone(LandingMixin, base.PagingTestBase):
    """``openstack flavor set --property hw:paging=...`` and nothing
    else: the request filter requires the trait, the filter refuses a
    value that predates the API's validation and applies the aggregates'
    withholding."""

    def test_unpaired_policy_lands_where_it_can_be_given(self):
        # The scheduler that started in setUp() added the request filter
        # once, after Nova's own, however many schedulers this process
        # started before (nothing resets the list between tests), and
        # says so to node_exporter.
        filters = nova_request_filter.ALL_REQUEST_FILTERS
        self.assertEqual(1, filters.count(
            request_filter.require_paging_trait))
        self.assertIs(request_filter.require_paging_trait, filters[-1])
        self.assertEqual({'registered'}, self.exported())
        for paging, first in (('adaptive', 'patched1'),
                              ('shadow', 'stock-noept'),
                              ('hap', 'stock-ept')):
            flavor = self.paging_flavor(paging, paired=False)
            self.assertEqual({first}, self.check_lands(flavor, CAN[paging]))
        # Nothing to warn about: the key alone is a complete request.
        self.assertEqual([], self.warnings())

    def test_multi_create_lands_every_instance_where_it_can(self):
        flavor = self.paging_flavor('adaptive', paired=False)
        body = self._build_server(flavor_id=flavor, networks='none')
        body.update(min_count=3, max_count=3, return_reservation_id=True)
        resv = self.api.post_server({'server': body})['reservation_id']
        servers = self.api.get_servers(search_opts={'reservation_id': resv})
        self.assertEqual(3, len(servers))
        for server in servers:
            server = self._wait_for_state_change(server, 'ACTIVE')
            self.assertIn(self.host_of(server), CAN['adaptive'])

    def test_a_flavor_whose_traits_contradict_it_gets_the_reason(self):
        # Nova's API validates one key at a time, whether a request sets
        # the two keys together (adaptive) or one after the other
        # (shadow): the scheduler, which sees the whole flavor, refuses
        # it, naming the key and the trait in the fault
        # (RequestFilterFailed, as Nova's request filters refuse).
        for paging, key, together in (
                ('adaptive', 'trait:CUSTOM_PAGING_SWITCHING', True),
                ('shadow', 'trait1:CUSTOM_PAGING_SHADOW', False)):
            flavor = self._create_flavor(vcpu=1, memory_mb=256, disk=1)
            specs = [{'hw:paging': paging}, {key: 'forbidden'}]
            if together:
                specs = [dict(specs[0], **specs[1])]
            for body in specs:
                self.api.post_extra_spec(flavor, {'extra_specs': body})
            server = self.boot(flavor, expected_state='ERROR')
            fault = server['fault']['message']
            self.assertIn('No valid host', fault)
            self.assertIn("%s='forbidden'" % key, fault)
            self.assertIn('hw:paging=%s' % paging, fault)
            self.assertEqual({}, self._get_allocations_by_server_uuid(
                server['id']))

    def test_nobody_capable_is_novalidhost_without_trait_names(self):
        for host in ('patched1', 'patched2'):
            self.publish(host, base.HOSTS['stock-ept'])
        server = self.boot(self.paging_flavor('adaptive', paired=False),
                           expected_state='ERROR')
        fault = server['fault']['message']
        # Nova's own fault, which a tenant may read: no trait names.
        self.assertIn('No valid host', fault)
        self.assertNotIn('CUSTOM_PAGING', fault)
        # Nova cleaned up the allocation it had not made.
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']))

    def test_aggregate_can_withhold_a_policy(self):
        agg = self.admin_api.post_aggregate(
            {'aggregate': {'name': 'no-adaptive'}})
        for host in ('patched1', 'patched2'):
            self.admin_api.add_host_to_aggregate(agg['id'], host)
        self.admin_api.post_aggregate_action(agg['id'], {
            'set_metadata': {'metadata': {
                'adaptive_paging:policies': 'hap,shadow'}}})
        server = self.boot(self.paging_flavor('adaptive'),
                           expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        # hap still lands on the patched hosts' aggregate mates as before
        self.check_lands(self.paging_flavor('hap'), CAN['hap'], boots=1)

    def test_bad_value_set_below_2_86_is_refused_by_the_filter(self):
        flavor = self._create_flavor(vcpu=1, memory_mb=256, disk=1)
        self.api.microversion = '2.85'     # Nova validates from 2.86 on
        self.api.post_extra_spec(flavor, {'extra_specs': {
            'hw:paging': 'bogus'}})
        self.api.microversion = 'latest'
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])


class TestRequestFilterOff(LandingMixin, base.PagingTestBase):
    """``[adaptive_paging] request_filter = False``: the pair is the
    contract, and the filter refuses ``hw:paging`` alone, saying why."""

    def setUp(self):
        self.flags(request_filter=False, group='adaptive_paging')
        super().setUp()

    def test_the_pair_lands_and_the_key_alone_is_refused(self):
        self.assertEqual({'disabled'}, self.exported())
        for paging in sorted(CAN):
            self.check_lands(self.paging_flavor(paging), CAN[paging],
                             boots=1)
        self.refused_saying_why(
            self.paging_flavor('shadow', paired=False),
            'trait:CUSTOM_PAGING_SHADOW=required', 'request_filter is off')
        self.assertEqual([], self.logged('ERROR'))


class TestChangedNova(LandingMixin, base.PagingTestBase):
    """A Nova release whose request filters are no longer a list: the
    request filter cannot be added, and nova-scheduler starts anyway."""

    def setUp(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_filter.ALL_REQUEST_FILTERS',
            tuple(f for f in nova_request_filter.ALL_REQUEST_FILTERS
                  if f is not request_filter.require_paging_trait)))
        # A scheduler process starting: nothing said about it yet.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_adaptive_paging.scheduler.request_filter.STATUS', None))
        super().setUp()

    def test_the_scheduler_runs_on_refusing_the_key_alone(self):
        # One error, naming what changed, and the state exported.
        errors = self.logged('ERROR')
        self.assertEqual(1, len(errors), errors)
        self.assertIn('ALL_REQUEST_FILTERS is not a list', errors[0])
        self.assertEqual({'failed'}, self.exported())
        # The pair schedules as ever; hw:paging alone is refused rather
        # than misplaced, and the scheduler's log says why.
        self.check_lands(self.paging_flavor('adaptive'), CAN['adaptive'],
                         boots=1)
        self.refused_saying_why(
            self.paging_flavor('adaptive', paired=False),
            'trait:CUSTOM_PAGING_SWITCHING=required',
            'ALL_REQUEST_FILTERS is not a list')


class BaremetalDriver(fake.MediumFakeDriver):
    """Nova's fake driver shaped the way the ironic driver reports: two
    nodes behind one nova-compute, each a provider holding one unit of a
    custom resource class and no VCPU, memory or disk.  (No ironic service
    can run here; the scheduler, placement and the filter are real.)"""

    def init_host(self, host):
        super().init_host(host)
        self._set_nodes(['bm-1', 'bm-2'])
        self.host_status_base['hypervisor_type'] = 'ironic'

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        provider_tree.update_inventory(nodename, {'CUSTOM_BAREMETAL_GOLD': {
            'total': 1, 'min_unit': 1, 'max_unit': 1, 'step_size': 1,
            'allocation_ratio': 1.0, 'reserved': 0}})


class TestBaremetalNodes(LandingMixin, base.PagingTestBase):
    """Ironic nodes in the same cells as the KVM fleet: no agent, no
    CUSTOM_PAGING_* trait, a flavor that says nothing of paging."""

    def setUp(self):
        super().setUp()
        # Nova loads a compute driver from nova.virt only.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.fake.BaremetalDriver', BaremetalDriver))
        self.flags(compute_driver='fake.BaremetalDriver')
        self._start_compute('ironic')
        self.flags(compute_driver=self.compute_driver)

    def test_baremetal_flavor_boots_on_the_nodes(self):
        flavor = self.paging_flavor(**{
            'resources:CUSTOM_BAREMETAL_GOLD': '1', 'resources:VCPU': '0',
            'resources:MEMORY_MB': '0', 'resources:DISK_GB': '0'})
        nodes = set()
        for _ in range(2):
            server = self.admin_api.get_server(self.boot(flavor)['id'])
            self.assertEqual('ironic', server['OS-EXT-SRV-ATTR:host'])
            nodes.add(server['OS-EXT-SRV-ATTR:hypervisor_hostname'])
        self.assertEqual({'bm-1', 'bm-2'}, nodes)
        # Both nodes taken: the next one fails for want of nodes, as it
        # always did.
        self.boot(flavor, expected_state='ERROR')
        self.assertEqual([], self.warnings())

    def test_paging_flavor_never_lands_on_a_node(self):
        # A flavor the nodes fit, resources and all, that also asks for a
        # paging mode no ironic node can give: NoValidHost, with two free
        # nodes and no KVM host able to hold a CUSTOM_BAREMETAL_GOLD.
        flavor = self.paging_flavor('hap', paired=False, **{
            'resources:CUSTOM_BAREMETAL_GOLD': '1', 'resources:VCPU': '0',
            'resources:MEMORY_MB': '0', 'resources:DISK_GB': '0'})
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']))


# Sixteen hosts, two of which can give shadow paging (one of them
# adaptive too), placement allowed to return two candidates and asked to
# return them in random order, as a large fleet with
# [placement] randomize_allocation_candidates would.
FEW = dict(('host%02d' % i, base.HOSTS['stock-ept']) for i in range(14))
FEW['host14'] = base.HOSTS['stock-noept']
FEW['host15'] = base.HOSTS['patched1']


class TestFleetScale(LandingMixin, base.PagingTestBase):
    hosts = FEW
    weights = dict((host, 100) for host in FEW)

    def setUp(self):
        super().setUp()
        self.flags(max_placement_results=2, group='scheduler')
        self.flags(instances=12, group='quota')     # the test's 12 boots
        self.placement.fixture.conf_fixture.config(
            randomize_allocation_candidates=True, group='placement')

    def test_the_key_alone_and_the_pair_reach_the_rare_capable_hosts(self):
        # Without the trait in placement's query, each boot draws 2 of 16
        # hosts and misses both capable ones with probability 91/120;
        # with it, placement has only those to offer.  Sizes vary so that
        # no two requests are the same query.  (One test: sixteen computes
        # are the start-up this class pays per test.)
        for size in range(4):
            self.assertEqual({'host15'}, self.check_lands(
                self.paging_flavor('adaptive', paired=False,
                                   memory_mb=256 + 64 * size),
                {'host15'}, boots=1))
            self.check_lands(self.paging_flavor(
                'shadow', paired=False, memory_mb=256 + 64 * size),
                {'host14', 'host15'}, boots=1)
        self.check_lands(self.paging_flavor('shadow'), {'host14', 'host15'},
                         boots=4)


# A fleet of paging pools: stock hosts their operators put in the hap or
# the shadow pool ([adaptive_paging] pool), a stock host outside them,
# and one that switches.
POOLS = {
    'bare': None,
    'outside': capabilities.Capabilities(0, True, 'intel-icelake-server',
                                         False),
    'pool-hap': capabilities.Capabilities(0, True, 'intel-icelake-server',
                                          False, pool=True),
    'pool-shadow': capabilities.Capabilities(0, False,
                                             'intel-icelake-server', False,
                                             pool=True),
    'patched1': capabilities.Capabilities(spec.ABI_VERSION, True,
                                          'amd-zen3', False),
}


class TestStockPools(LandingMixin, base.PagingTestBase):
    """``hw:paging=adaptive`` in a fleet of pools: the flavor asks for
    CUSTOM_PAGING_POOL (``nova-paging flavor set --pools``) and lands on
    any pool member, which the paging_fit strategy later moves to the
    pool that suits it; without it adaptive still needs a host that
    switches.  Static policies are unchanged."""
    hosts = POOLS
    weights = {'bare': 500, 'outside': 400, 'pool-hap': 300,
               'pool-shadow': 200, 'patched1': 100}

    def pools_flavor(self):
        # The control run: hw:paging alone, as paging_flavor() does.
        specs = capabilities.flavor_extra_specs(policy.PagingPolicy(
            policy.parse_paging('adaptive')), pools=True) \
            if self.filter_enabled else {'hw:paging': 'adaptive'}
        return self._create_flavor(vcpu=1, memory_mb=256, disk=1,
                                   extra_spec=specs)

    def test_pool_members_publish_the_trait(self):
        self.assertIn('CUSTOM_PAGING_POOL', self.traits_of('pool-hap'))
        self.assertIn('CUSTOM_PAGING_POOL', self.traits_of('pool-shadow'))
        self.assertIn('CUSTOM_PAGING_POOL', self.traits_of('patched1'))
        self.assertNotIn('CUSTOM_PAGING_POOL', self.traits_of('outside'))

    def test_adaptive_in_pools_lands_on_any_pool_member(self):
        allowed = {'pool-hap', 'pool-shadow', 'patched1'}
        self.assertEqual({'pool-hap'}, self.check_lands(
            self.pools_flavor(), allowed))
        # The weighers' favourite pool member full: the next one.
        self.flags(max_placement_results=10, group='scheduler')
        self.assertTrue(self.check_lands(self.pools_flavor(), allowed))

    def test_adaptive_alone_still_needs_a_host_that_switches(self):
        self.assertEqual({'patched1'}, self.check_lands(
            self.paging_flavor('adaptive', paired=False), {'patched1'}))
        self.assertEqual({'patched1'}, self.check_lands(
            self.paging_flavor('adaptive'), {'patched1'}))

    def test_static_policies_keep_their_pools(self):
        self.assertEqual({'pool-shadow'}, self.check_lands(
            self.paging_flavor('shadow'), {'pool-shadow', 'patched1'}))
        self.assertEqual({'outside'}, self.check_lands(
            self.paging_flavor('hap'), {'outside', 'pool-hap', 'patched1'}))


class TestMoves(base.PagingTestBase):

    def test_resize_from_hap_to_adaptive_moves_to_a_patched_host(self):
        server = self.boot(self.paging_flavor('hap'))
        self.assertEqual('stock-ept', self.host_of(server))
        adaptive = self.paging_flavor('adaptive')
        server = self._resize_server(server, adaptive)
        self.assertEqual('patched1', self.host_of(server))
        self._confirm_resize(server)

    def test_live_migration_never_targets_an_incapable_host(self):
        server = self.boot(self.paging_flavor('adaptive'))
        self.assertEqual('patched1', self.host_of(server))
        self._live_migrate(server)
        self.assertEqual('patched2', self.host_of(server))
        # With no other capable host, the migration fails and the guest
        # stays where it is, although three other hosts have room.
        self.publish('patched1', base.HOSTS['stock-ept'])
        self._live_migrate(server, migration_expected_state='error',
                           server_expected_state='ACTIVE')
        self.assertEqual('patched2', self.host_of(server))

    def test_cold_migration_and_unshelve_keep_the_policy(self):
        server = self.boot(self.paging_flavor('shadow'))
        self.assertEqual('stock-noept', self.host_of(server))
        server = self._migrate_server(server)
        self.assertIn(self.host_of(server), CAN['shadow'] - {'stock-noept'})
        self._confirm_resize(server)
        self._shelve_server(server, expected_state='SHELVED_OFFLOADED')
        server = self._unshelve_server(server)
        self.assertEqual('stock-noept', self.host_of(server))

    def test_evacuate_keeps_the_policy(self):
        server = self.boot(self.paging_flavor('adaptive'))
        self.assertEqual('patched1', self.host_of(server))
        self.computes['patched1'].stop()
        service = self.admin_api.get_services(host='patched1',
                                              binary='nova-compute')[0]
        self.admin_api.put_service(service['id'], {'forced_down': True})
        server = self._evacuate_server(server, expected_host='patched2')
        self.assertEqual('patched2', self.host_of(server))

    def test_rebuild_keeps_the_host(self):
        # Since the guest booted, an aggregate withholds its policy from
        # its host.  A rebuild changes only the image (hw:paging is the
        # flavor's), so the filter must not refuse it: RUN_ON_REBUILD;
        # nor may it refuse a flavor with hw:paging alone, which Nova
        # runs no request filter for on a rebuild.
        server = self.boot(self.paging_flavor('adaptive', paired=False))
        self.assertEqual('patched1', self.host_of(server))
        agg = self.admin_api.post_aggregate(
            {'aggregate': {'name': 'no-adaptive'}})
        self.admin_api.add_host_to_aggregate(agg['id'], 'patched1')
        self.admin_api.post_aggregate_action(agg['id'], {
            'set_metadata': {'metadata': {
                'adaptive_paging:policies': 'hap,shadow'}}})
        server = self._rebuild_server(
            server, 'a2459075-d96c-40d5-893e-577ff92e721c')
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual('patched1', self.host_of(server))
        self.assertEqual('a2459075-d96c-40d5-893e-577ff92e721c',
                         server['image']['id'])

    def test_forced_moves_bypass_the_filter(self):
        # Microversion 2.67 and older let an admin force a live migration
        # or an evacuation to a host, skipping the scheduler: the guest
        # lands where its policy cannot be given (the agent there says so:
        # nova_paging_guest_policy_not_honoured).
        server = self.boot(self.paging_flavor('adaptive'))
        self.assertEqual('patched1', self.host_of(server))
        self.api.microversion = '2.67'
        self.api.post_server_action(server['id'], {'os-migrateLive': {
            'host': 'stock-ept', 'block_migration': 'auto', 'force': True}})
        self._wait_for_migration_status(server, ['completed'])
        self.assertEqual('stock-ept', self.host_of(server))
        self.computes['stock-ept'].stop()
        service = self.admin_api.get_services(host='stock-ept',
                                              binary='nova-compute')[0]
        self.admin_api.put_service(service['id'], {'forced_down': True})
        self.admin_api.microversion = '2.67'
        self._evacuate_server(server, {'host': 'bare', 'force': True},
                              expected_host='bare', expected_state='ACTIVE')
        self.assertEqual('bare', self.host_of(server))
