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

"""Publishing capabilities to the real placement fixture."""

from click.testing import CliRunner

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.cmd import cli
from nova_adaptive_paging import placement
from nova_adaptive_paging import vocabulary

from tests.functional import base


class TestPublishing(base.PagingTestBase):

    def test_traits_on_the_right_provider(self):
        self.assertTrue({vocabulary.TRAIT_SWITCHING, vocabulary.TRAIT_HAP,
                         vocabulary.TRAIT_SHADOW, vocabulary.TRAIT_CALIBRATED,
                         'CUSTOM_PAGING_CPU_INTEL_NEHALEM'}
                        <= self.traits_of('patched2'))
        self.assertEqual(
            {vocabulary.TRAIT_HAP, 'CUSTOM_PAGING_CPU_INTEL_ICELAKE_SERVER'},
            {t for t in self.traits_of('stock-ept')
             if t.startswith(vocabulary.TRAIT_PREFIX)})
        self.assertFalse({t for t in self.traits_of('bare')
                          if t.startswith(vocabulary.TRAIT_PREFIX)})

    def test_republishing_replaces_only_our_traits(self):
        before = self.traits_of('patched1')
        nova_owned = {t for t in before
                      if not t.startswith(vocabulary.TRAIT_PREFIX)}
        self.assertTrue(nova_owned)         # e.g. COMPUTE_* traits
        _, added, removed = self.publish('patched1',
                                         base.HOSTS['stock-noept'])
        # A host that switches takes adaptive guests of the pools too.
        self.assertEqual({vocabulary.TRAIT_SWITCHING, vocabulary.TRAIT_HAP,
                          vocabulary.TRAIT_POOL,
                          'CUSTOM_PAGING_CPU_AMD_ZEN3'}, removed)
        after = self.traits_of('patched1')
        self.assertEqual(nova_owned, {t for t in after
                                      if not t.startswith(
                                          vocabulary.TRAIT_PREFIX)})
        self.assertIn(vocabulary.TRAIT_SHADOW, after)
        self.assertEqual((set(), set()), self.publish(
            'patched1', base.HOSTS['stock-noept'])[1:])

    def test_traits_survive_periodics_and_a_compute_restart(self):
        mine = {t for t in self.traits_of('patched1')
                if t.startswith(vocabulary.TRAIT_PREFIX)}
        self._run_periodics()
        self.computes['patched1'] = self.restart_compute_service(
            self.computes['patched1'])
        self._run_periodics()
        self.assertTrue(mine <= self.traits_of('patched1'))

    def test_concurrent_change_is_retried(self):
        """Another writer bumps the provider generation between our read
        and our write: the write gets 409, is retried, and the other
        writer's trait is kept."""
        adapter = self.placement_adapter
        rp = self.rp_uuids['stock-ept']
        puts = []
        real_put = adapter.put

        def racing_put(url, **kwargs):
            if url.endswith('/traits') and not puts:
                current = adapter.get(url, microversion='1.6').json()
                real_put('/traits/CUSTOM_SOMEONE_ELSE', microversion='1.6')
                real_put(url, microversion='1.6', json={
                    'traits': current['traits'] + ['CUSTOM_SOMEONE_ELSE'],
                    'resource_provider_generation':
                        current['resource_provider_generation']})
            resp = real_put(url, **kwargs)
            if url.endswith('/traits'):
                puts.append(resp.status_code)
            return resp

        self.useFixture(base.fixtures.MonkeyPatch(
            'keystoneauth1.adapter.Adapter.put',
            lambda _self, url, **kw: racing_put(url, **kw)))
        added, removed = placement.reconcile(
            adapter, rp, base.HOSTS['patched1'].traits())
        self.assertEqual([409, 200], puts)
        traits = self.traits_of('stock-ept')
        self.assertIn('CUSTOM_SOMEONE_ELSE', traits)
        self.assertIn(vocabulary.TRAIT_SWITCHING, traits)

    def test_cli_publishes_from_the_host_files(self):
        root = self.useFixture(base.fixtures.TempDir()).path
        for rel, value in (('sys/module/kvm/parameters/paging_switch_abi',
                            str(spec.ABI_VERSION)),
                           ('sys/module/kvm/parameters/tdp_mmu', 'Y'),
                           ('sys/module/kvm_amd/parameters/npt', 'Y')):
            path = '%s/%s' % (root, rel)
            base.os.makedirs(base.os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write(value + '\n')
        conf = '%s/agent.conf' % root
        with open(conf, 'w') as f:
            f.write('[adaptive_paging]\nhost_root = %s\n'
                    'cpu_generation = amd-zen4\nprofile_dirs =\n'
                    '[placement]\ncompute_node_name = bare\n'
                    'auth_type = admin_token\nendpoint = %s\n'
                    'token = admin\n'
                    % (root, self.placement.fixture.endpoint))
        result = CliRunner().invoke(cli.main, [
            '--config-file', conf, 'host', 'publish-capabilities'])
        self.assertEqual(0, result.exit_code, result.output)
        self.assertIn('provider bare (%s)' % self.rp_uuids['bare'],
                      result.output)
        self.assertTrue({vocabulary.TRAIT_SWITCHING, vocabulary.TRAIT_SHADOW,
                         vocabulary.TRAIT_HAP, 'CUSTOM_PAGING_CPU_AMD_ZEN4'}
                        <= self.traits_of('bare'))
        # ... and the scheduler now sends adaptive guests there.
        server = self.boot(self.paging_flavor('adaptive'))
        self.assertEqual('bare', self.host_of(server))

    def test_provider_found_by_the_name_nova_gave_it(self):
        adapter = self.placement_adapter
        # Nova named it after the short name; the FQDN is tried too.
        self.assertEqual(('bare', self.rp_uuids['bare']),
                         placement.find_provider(
                             adapter, ['bare.example.org', 'bare']))
        err = self.assertRaises(placement.PlacementError,
                                placement.find_provider, adapter,
                                ['nowhere', 'nowhere.example.org'])
        self.assertIn("'nowhere' or 'nowhere.example.org'", str(err))
        self.assertIn('compute_node_name', str(err))
        err = self.assertRaises(placement.PlacementError,
                                placement.find_provider, adapter,
                                ['bare', 'patched1'])
        self.assertIn('all match this host', str(err))

    def test_a_trait_that_cannot_be_set_is_an_error(self):
        rp = self.rp_uuids['stock-ept']
        before = self.traits_of('stock-ept')
        err = self.assertRaises(placement.PlacementError,
                                placement.reconcile, self.placement_adapter,
                                rp, {'CUSTOM_PAGING_CPU_' + 'X' * 250})
        self.assertIn(rp, str(err))
        self.assertIn('CUSTOM_PAGING_CPU_XXX', str(err))
        self.assertEqual(before, self.traits_of('stock-ept'))
