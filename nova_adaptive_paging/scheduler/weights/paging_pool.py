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

"""PagingPoolWeigher: boot an adaptive guest in the paging pool that
suited the guests of its image (else its project) before it.

For a fleet of stock kernels in a hap and a shadow pool
(doc/source/stock-fleet.rst).  The decision is
:mod:`nova_adaptive_paging.pools.boot`'s, from the agents' advisory
figures in Prometheus (MODELED); this weigher asks it once per request
and gives 1 to each host of the predicted pool, 0 to every other host.
It only weighs: the filters (AdaptivePagingFilter, placement's traits)
have chosen the hosts, and a full pool's hosts are not among them.

It never fails a boot: a flavor that does not ask for
``hw:paging=adaptive``, no ``[adaptive_paging] prometheus_url``, a
Prometheus that does not answer within ``prometheus_timeout``, no
history of the image or project, or any error of its own, and every
host weighs the same (the other weighers decide).  The history is read
at most once every ``boot_refresh_s``; the scheduler's log says once
when predictions go off and why, and once when they are on again.
"""

from oslo_log import log as logging

import nova.conf
from nova.scheduler import utils
from nova.scheduler import weights

from nova_adaptive_paging.conf import scheduler as scheduler_conf
from nova_adaptive_paging import policy
from nova_adaptive_paging.pools import boot
from nova_adaptive_paging.telemetry import prometheus_api
from nova_adaptive_paging import vocabulary

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
scheduler_conf.register_opts(CONF)

MULTIPLIER_KEY = 'paging_pool_weight_multiplier'


class _NoSource(Exception):
    pass


def _read_history():
    conf = CONF.adaptive_paging
    if not conf.prometheus_url:
        raise _NoSource('[adaptive_paging] prometheus_url is not set')
    client = prometheus_api.Client(
        conf.prometheus_url, name='[adaptive_paging] prometheus_url %s'
        % conf.prometheus_url)
    return boot.read(boot.Deadline(client, conf.prometheus_timeout),
                     conf.boot_history)


def _image_id(spec_obj):
    image = spec_obj.image
    if image is None or not image.obj_attr_is_set('id'):
        return ''
    return image.id or ''


class PagingPoolWeigher(weights.BaseHostWeigher):
    minval = 0
    maxval = 1

    def __init__(self):
        super().__init__()
        conf = CONF.adaptive_paging
        self.history = boot.Cached(
            _read_history, conf.boot_refresh_s, boot.Params(
                min_guests=conf.boot_min_guests,
                threshold=conf.boot_threshold))

    def weight_multiplier(self, host_state):
        return utils.get_weight_multiplier(
            host_state, MULTIPLIER_KEY,
            CONF.adaptive_paging.pool_weight_multiplier)

    def _pool_of(self, spec_obj):
        """(mode, the history it comes from), or (None, None): weigh
        alike."""
        try:
            wanted = policy.from_extra_specs(
                spec_obj.flavor.extra_specs or {}).paging
        except policy.PolicyError:
            return None, None       # the filter says why
        if wanted is None or wanted.value != vocabulary.ADAPTIVE:
            return None, None
        current = self.history.get()
        changed, why = self.history.news()
        if changed and why is not None:
            LOG.warning('PagingPoolWeigher weighs all hosts alike until '
                        'it can read the fleet\'s history: %s', why)
        elif changed:
            LOG.info('PagingPoolWeigher reads the fleet\'s history again')
        if current is None:
            return None, None
        history, predictor = current
        prediction = predictor.predict(_image_id(spec_obj),
                                       spec_obj.project_id or '')
        LOG.debug('PagingPoolWeigher: flavor %s, image %s, project %s: %s',
                  spec_obj.flavor.name, _image_id(spec_obj) or '-',
                  spec_obj.project_id, prediction)
        if prediction.mode is None:
            return None, None
        return prediction.mode, history

    def _weights(self, host_states, spec_obj):
        try:
            mode, history = self._pool_of(spec_obj)
            if mode is None:
                return [0.0] * len(host_states)
            resolve = history.resolver()
            return [1.0 if history.pools.get(resolve(h.host)) == mode
                    else 0.0 for h in host_states]
        except Exception:           # never fail a boot
            LOG.exception('PagingPoolWeigher weighs all hosts alike: '
                          'unexpected error')
            return [0.0] * len(host_states)

    def weigh_objects(self, weighed_obj_list, spec_obj):
        # One prediction per request, not one per host.
        return self._weights([w.obj for w in weighed_obj_list], spec_obj)

    def _weigh_object(self, host_state, spec_obj):
        return self._weights([host_state], spec_obj)[0]
