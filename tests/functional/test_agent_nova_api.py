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

"""The agent's Nova API fallback against Nova's real API (in-process, the
functional framework): a guest whose domain metadata predates Nova
32.0.0 gets its flavor's extra specs from the server's embedded flavor."""

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from nova_adaptive_paging.agent import guest
from nova_adaptive_paging.agent import nova_api
from tests.functional import base


class TestNovaApiLookup(base.PagingTestBase):

    def lookup(self):
        api = self.api_fixture
        # Nova's functional API takes the caller from these headers (its
        # noauth middleware); a deployment gets a keystone token instead.
        headers = {'X-Auth-User': 'agent', 'X-Roles': 'admin,reader',
                   'X-Auth-Project-Id': api.project_id}
        return nova_api.ServerFlavors(lambda: ks_adapter.Adapter(
            ks_session.Session(auth=token_endpoint.Token(
                api.base_url, 'agent')), endpoint_override=api.base_url,
            additional_headers=headers))

    def test_the_servers_own_flavor_answers(self):
        flavor = self.paging_flavor('shadow')
        server = self.boot(flavor)
        lookup = self.lookup()
        old = guest.Instance(server['id'], 'instance-1', flavor='m1.old',
                             extra_specs=None)
        decision = guest.decide(old, 'hap', lookup)
        assert decision.source == guest.FROM_NOVA_API
        assert decision.policy.paging.value == 'shadow'
        # Editing the flavor afterwards does not change what the instance
        # runs with (Nova embedded its flavor at boot).
        self.admin_api.post_extra_spec(
            flavor, {'extra_specs': {'hw:paging': 'hap'}})
        fresh = self.lookup()
        assert guest.decide(old, 'hap', fresh).policy.paging.value == \
            'shadow'
        # Answers are kept: a second guest pass asks nothing new.
        before = lookup.requests
        guest.decide(old, 'hap', lookup)
        assert lookup.requests == before

    def test_a_server_nova_does_not_know_gets_the_default(self):
        lookup = self.lookup()
        ghost = guest.Instance('00000000-0000-0000-0000-000000000001',
                               'instance-2', flavor='m1.gone',
                               extra_specs=None)
        decision = guest.decide(ghost, 'shadow', lookup)

        assert decision.policy.paging.value == 'shadow'
        assert decision.problem is None
