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

"""Boot placement in Nova's scheduler: PagingPoolWeigher loaded from
``[filter_scheduler] weight_classes`` beside the framework's host name
weigher (which prefers the hap pool's host), reading a real Prometheus
that holds what the agents reported of the guests of one image (they
did better in the shadow pool; MODELED figures set by hand).  A server
of that image boots in the shadow pool; a server of an image nobody ran
boots where the other weighers put it; with Prometheus down, every
server still boots."""

import socket
import time

import fixtures
from nova.tests.fixtures import glance

from nova_adaptive_paging import capabilities
from nova_adaptive_paging import policy
from nova_adaptive_paging.scheduler.weights import paging_pool
from nova_adaptive_paging.simhost import prometheus
from tests.functional import base
from tests.functional import prometheus as test_prometheus
from tests.functional import test_scheduling
from tests.unit import test_paging_pool_weigher as history

WEIGHER = '%s.%s' % (paging_pool.__name__,
                     paging_pool.PagingPoolWeigher.__name__)
# The project of the guests the agents reported on: not the servers'.
PROJECT = 'cccccccc-0000-4000-8000-000000000001'


class BootPlacementBase(base.PagingTestBase):
    hosts = test_scheduling.POOLS
    # The host name weigher alone would put every pools guest in the hap
    # pool: pool-hap 300, pool-shadow 200, patched1 100, normalized 1,
    # 0.5, 0.  The paging pool weigher's 1 x 2.0 for the predicted pool
    # outweighs it.
    weights = {'bare': 500, 'outside': 400, 'pool-hap': 300,
               'pool-shadow': 200, 'patched1': 100}
    extra_weighers = (WEIGHER,)
    prometheus_url = None

    def setUp(self):
        self.flags(prometheus_url=self.url(), pool_weight_multiplier=2.0,
                   prometheus_timeout=2.0, group='adaptive_paging')
        super().setUp()
        self.flavor = self._create_flavor(
            vcpu=1, memory_mb=256, disk=1,
            extra_spec=capabilities.flavor_extra_specs(policy.PagingPolicy(
                policy.parse_paging('adaptive')), pools=True))

    def boot_image(self, image):
        server = self._create_server(flavor_id=self.flavor, networks='none',
                                     image_uuid=image)
        return self.host_of(server)


class TestBootPlacement(BootPlacementBase):
    server = None

    @classmethod
    def url(cls):
        if cls.server is None:
            test_prometheus.binaries()
            work = fixtures.TempDir()
            work.setUp()
            cls.work = work
            # Shadow would have saved g1 600 s in the hap pool; hap would
            # have cost g2 300 s more in the shadow pool.
            image = cls.shadow_image()
            guests = [('g1', image, 'pool-hap', 3600, 600.0),
                      ('g2', image, 'pool-shadow', 3600, -300.0)]
            cls.server = prometheus.Server(work.path, openmetrics=(
                history.openmetrics(
                    int(time.time()) - 30,
                    pools={'pool-hap': 'hap', 'pool-shadow': 'shadow'},
                    guests=guests, project=PROJECT)))
        return cls.server.url

    @staticmethod
    def shadow_image():
        # The glance fixture's images are fixed: the first one's guests
        # are the ones the agents reported on.
        return glance.GlanceFixture.image1['id']

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop()
            cls.work.cleanUp()
        super().tearDownClass()

    def test_a_guest_of_the_image_boots_in_the_pool_it_did_best_in(self):
        self.assertEqual('pool-shadow', self.boot_image(self.shadow_image()))

    def test_an_image_nobody_ran_boots_where_the_others_put_it(self):
        self.assertEqual('pool-hap', self.boot_image(
            glance.GlanceFixture.image2['id']))


class TestBootPlacementWithoutPrometheus(BootPlacementBase):
    @classmethod
    def url(cls):
        with socket.socket() as s:          # nobody listens there
            s.bind(('127.0.0.1', 0))
            return 'http://127.0.0.1:%d' % s.getsockname()[1]

    def test_every_guest_still_boots(self):
        self.assertEqual('pool-hap', self.boot_image(
            TestBootPlacement.shadow_image()))
        self.assertEqual('pool-hap', self.boot_image(
            glance.GlanceFixture.image2['id']))
