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

"""``nova-paging flavor set``: openstacksdk against Nova's real API.

The library call the command makes (:func:`flavors.set_policy`) runs
through openstacksdk's compute proxy over HTTP to the in-process nova-api,
and the flavor it writes then schedules: placement selects the capable
host by the trait, and the filter has nothing to warn about.
"""

import openstack
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from nova_adaptive_paging import flavors
from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary

from tests.functional import base


class TestFlavorSet(base.PagingTestBase):

    def setUp(self):
        super().setUp()
        # Nova's functional API authenticates by these headers (its
        # stubbed keystone middleware), as TestOpenStackClient sends them.
        sess = ks_session.Session(
            auth=token_endpoint.Token(self.api_fixture.base_url, 'admin'),
            additional_headers={
                'X-Auth-User': 'admin', 'X-User-Id': 'admin',
                'X-Auth-Project-Id': self.api_fixture.project_id,
                'X-Roles': 'reader,member,admin'})
        self.compute = openstack.connection.Connection(
            session=sess,
            compute_endpoint_override=self.api_fixture.base_url).compute

    def extra_specs(self, flavor_id):
        return self.api.api_get('/flavors/%s/os-extra_specs'
                                % flavor_id).body['extra_specs']

    def test_writes_the_pair_and_replaces_an_earlier_policy(self):
        flavor_id = self._create_flavor(vcpu=1, memory_mb=256, disk=1,
                                        extra_spec={'hw:cpu_policy':
                                                    'shared'})
        name = self.api.api_get('/flavors/%s' % flavor_id).body[
            'flavor']['name']
        _, written, removed = flavors.set_policy(
            self.compute, name, policy.PagingPolicy(
                vocabulary.Paging.ADAPTIVE, interval_s=5))
        self.assertEqual({'hw:paging': 'adaptive', 'hw:paging_interval': '5',
                          'trait:CUSTOM_PAGING_SWITCHING': 'required',
                          'hw:cpu_policy': 'shared'},
                         self.extra_specs(flavor_id))
        self.assertEqual([], removed)
        server = self.boot(flavor_id)
        self.assertEqual('patched1', self.host_of(server))

        # To shadow: the switching trait and the interval go, and only
        # what changed is written.
        _, written, removed = flavors.set_policy(
            self.compute, flavor_id,
            policy.PagingPolicy(vocabulary.Paging.SHADOW))
        self.assertEqual({'hw:paging': 'shadow',
                          'trait:CUSTOM_PAGING_SHADOW': 'required'}, written)
        self.assertEqual(['hw:paging_interval',
                          'trait:CUSTOM_PAGING_SWITCHING'], removed)
        self.assertEqual({'hw:paging': 'shadow',
                          'trait:CUSTOM_PAGING_SHADOW': 'required',
                          'hw:cpu_policy': 'shared'},
                         self.extra_specs(flavor_id))
        # Again: nothing to do.
        self.assertEqual(({}, []), flavors.set_policy(
            self.compute, flavor_id,
            policy.PagingPolicy(vocabulary.Paging.SHADOW))[1:])
        # Unset: only what the package owns goes.
        flavors.set_policy(self.compute, flavor_id, None)
        self.assertEqual({'hw:cpu_policy': 'shared'},
                         self.extra_specs(flavor_id))
