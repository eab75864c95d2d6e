"""AdaptivePagingFilter in Nova's functional framework."""

from nova.tests.functional.api import client as api_client

from tests.functional import base

CAN = {
    'adaptive': {'patched1', 'patched2'},
    'shadow': {'stock-noept', 'patched1', 'patched2'},
    'hap': {'stock-ept', 'patched1', 'patched2'},
}


class TestPlacement(base.PagingTestBase):

    def check_lands(self, extra_specs, allowed, boots=3):
        flavor = self.paging_flavor(**extra_specs)
        self.lookups.clear()
        hosts = {self.host_of(self.boot(flavor)) for _ in range(boots)}
        self.assertTrue(hosts <= allowed, (extra_specs, hosts))
        # One placement look-up per scheduling request, not per host.
        self.assertEqual(boots, len(self.lookups))
        return hosts

    def test_adaptive_lands_on_patched_hosts(self):
        self.assertEqual({'patched1'},
                         self.check_lands({'hw:paging': 'adaptive'},
                                          CAN['adaptive']))

    def test_shadow_lands_where_shadow_is_possible(self):
        self.assertEqual({'stock-noept'},
                         self.check_lands({'hw:paging': 'shadow'},
                                          CAN['shadow']))

    def test_hap_lands_where_hap_is_possible(self):
        self.assertEqual({'stock-ept'},
                         self.check_lands({'hw:paging': 'hap'}, CAN['hap']))

    def test_no_paging_spec_uses_the_default_policy(self):
        self.check_lands({}, CAN['hap'])
        self.flags(default_policy='shadow', group='adaptive_paging')
        self.assertEqual({'stock-noept'},
                         self.check_lands({}, CAN['shadow']))

    def test_multi_create_looks_placement_up_once(self):
        flavor = self.paging_flavor(**{'hw:paging': 'adaptive'})
        self.lookups.clear()
        body = self._build_server(flavor_id=flavor, networks='none')
        body.update(min_count=3, max_count=3, return_reservation_id=True)
        resv = self.api.post_server({'server': body})['reservation_id']
        servers = self.api.get_servers(search_opts={'reservation_id': resv})
        self.assertEqual(3, len(servers))
        for server in servers:
            server = self._wait_for_state_change(server, 'ACTIVE')
            self.assertIn(self.host_of(server), CAN['adaptive'])
        self.assertEqual(
            ['/resource_providers?required=CUSTOM_PAGING_SWITCHING'],
            self.lookups)

    def test_nobody_capable_fails_naming_the_requirement(self):
        for host in ('patched1', 'patched2'):
            self.publish(host, base.HOSTS['stock-ept'])
        server = self.boot(self.paging_flavor(**{'hw:paging': 'adaptive'}),
                           expected_state='ERROR')
        fault = server['fault']['message']
        self.assertIn('No valid host', fault)
        self.assertIn('hw:paging=adaptive', fault)
        self.assertIn('CUSTOM_PAGING_SWITCHING', fault)

    def test_aggregate_can_withhold_a_policy(self):
        agg = self.admin_api.post_aggregate(
            {'aggregate': {'name': 'no-adaptive'}})
        for host in ('patched1', 'patched2'):
            self.admin_api.add_host_to_aggregate(agg['id'], host)
        self.admin_api.post_aggregate_action(agg['id'], {
            'set_metadata': {'metadata': {
                'adaptive_paging:policies': 'hap,shadow'}}})
        server = self.boot(self.paging_flavor(**{'hw:paging': 'adaptive'}),
                           expected_state='ERROR')
        self.assertIn('withhold', server['fault']['message'])
        # hap still lands on the patched hosts' aggregate mates as before
        self.check_lands({'hw:paging': 'hap'}, CAN['hap'], boots=1)

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

    def test_bad_value_set_below_2_86_is_refused_by_the_filter(self):
        flavor = self._create_flavor(vcpu=1, memory_mb=256, disk=1)
        self.api.microversion = '2.85'     # Nova validates from 2.86 on
        self.api.post_extra_spec(flavor, {'extra_specs': {
            'hw:paging': 'bogus'}})
        self.api.microversion = 'latest'
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn("invalid hw:paging='bogus'",
                      server['fault']['message'])


class TestMoves(base.PagingTestBase):

    def test_resize_from_hap_to_adaptive_moves_to_a_patched_host(self):
        server = self.boot(self.paging_flavor(**{'hw:paging': 'hap'}))
        self.assertEqual('stock-ept', self.host_of(server))
        adaptive = self.paging_flavor(**{'hw:paging': 'adaptive'})
        server = self._resize_server(server, adaptive)
        self.assertEqual('patched1', self.host_of(server))
        self._confirm_resize(server)

    def test_live_migration_never_targets_an_incapable_host(self):
        server = self.boot(self.paging_flavor(**{'hw:paging': 'adaptive'}))
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
        server = self.boot(self.paging_flavor(**{'hw:paging': 'shadow'}))
        self.assertEqual('stock-noept', self.host_of(server))
        server = self._migrate_server(server)
        self.assertIn(self.host_of(server), CAN['shadow'] - {'stock-noept'})
        self._confirm_resize(server)
        self._shelve_server(server, expected_state='SHELVED_OFFLOADED')
        server = self._unshelve_server(server)
        self.assertEqual('stock-noept', self.host_of(server))

    def test_evacuate_keeps_the_policy(self):
        server = self.boot(self.paging_flavor(**{'hw:paging': 'adaptive'}))
        self.assertEqual('patched1', self.host_of(server))
        self.computes['patched1'].stop()
        service = self.admin_api.get_services(host='patched1',
                                              binary='nova-compute')[0]
        self.admin_api.put_service(service['id'], {'forced_down': True})
        server = self._evacuate_server(server, expected_host='patched2')
        self.assertEqual('patched2', self.host_of(server))

    def test_rebuild_keeps_the_host(self):
        server = self.boot(self.paging_flavor(**{'hw:paging': 'adaptive'}))
        self.publish('patched1', base.HOSTS['stock-ept'])
        self.lookups.clear()
        server = self._rebuild_server(
            server, 'a2459075-d96c-40d5-893e-577ff92e721c')
        self.assertEqual('patched1', self.host_of(server))
        self.assertEqual([], self.lookups)
