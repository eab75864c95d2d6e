"""AdaptivePagingFilter on its own: Nova's objects and HostStates.

Placement is stood in for by a function returning the providers with a
trait (tests/functional runs the filter against the real placement
fixture); here each test says what placement holds.
"""

import logging
import threading
import uuid

import pytest

from nova import objects
from nova.tests.unit.scheduler import fakes

from nova_adaptive_paging.scheduler.filters import paging_filter
from nova_adaptive_paging import vocabulary

objects.register_all()

LOGGER = paging_filter.LOG.logger.name


class Response(object):
    def __init__(self, status, body=None, text=''):
        self.status_code, self._body, self.text = status, body, text

    def json(self):
        return self._body


class Placement(object):
    """Which providers have which trait; counts the look-ups."""

    def __init__(self, traits, before_answer=None):
        self.traits = traits          # trait -> provider uuids
        self.calls = []
        self.before_answer = before_answer

    def get(self, url, version=None, global_request_id=None):
        self.calls.append(url)
        trait = url.split('required=', 1)[1]
        if self.before_answer:
            self.before_answer(trait)
        return Response(200, {'resource_providers': [
            {'uuid': u} for u in self.traits.get(trait, ())]})


@pytest.fixture
def hosts():
    return [fakes.FakeHostState('host%d' % i, 'node%d' % i,
                                {'uuid': str(uuid.uuid4()),
                                 'aggregates': []}) for i in range(6)]


def use(monkeypatch, placement):
    monkeypatch.setattr(
        'nova.scheduler.client.report.report_client_singleton',
        lambda: placement)
    return placement


def spec(extra_specs, image_traits=None):
    image = objects.ImageMeta(properties=objects.ImageMetaProps(
        **({'traits_required': image_traits} if image_traits else {})))
    return objects.RequestSpec(
        flavor=objects.Flavor(name='m1.test', extra_specs=extra_specs),
        image=image, scheduler_hints={}, instance_uuid=str(uuid.uuid4()))


def names(passed):
    return {h.host for h in passed}


def paired(paging):
    return {'hw:paging': paging,
            'trait:' + vocabulary.REQUIRED_TRAIT[
                vocabulary.Paging(paging)]: 'required'}


def run(hosts, request):
    return names(paging_filter.AdaptivePagingFilter().filter_all(hosts,
                                                                 request))


def test_no_paging_spec_passes_every_host(monkeypatch, hosts):
    placement = use(monkeypatch, Placement({}))
    assert run(hosts, spec({})) == names(hosts)
    assert run(hosts, spec({'hw:cpu_policy': 'shared'})) == names(hosts)
    assert placement.calls == []


@pytest.mark.parametrize('paging', ['adaptive', 'hap', 'shadow'])
def test_paired_flavor_leaves_the_selection_to_placement(monkeypatch, hosts,
                                                         caplog, paging):
    placement = use(monkeypatch, Placement({}))
    with caplog.at_level(logging.WARNING, LOGGER):
        assert run(hosts, spec(paired(paging))) == names(hosts)
    assert placement.calls == []
    assert caplog.records == []


def test_image_can_require_the_trait(monkeypatch, hosts):
    placement = use(monkeypatch, Placement({}))
    assert run(hosts, spec({'hw:paging': 'shadow'},
                           ['CUSTOM_PAGING_SHADOW'])) == names(hosts)
    assert placement.calls == []


def test_unpaired_flavor_asks_placement_once_and_warns(monkeypatch, hosts,
                                                       caplog):
    capable = hosts[1::2]
    placement = use(monkeypatch, Placement({
        'CUSTOM_PAGING_SHADOW': [h.uuid for h in capable]}))
    with caplog.at_level(logging.WARNING, LOGGER):
        assert run(hosts, spec({'hw:paging': 'shadow'})) == names(capable)
    assert placement.calls == [
        '/resource_providers?required=CUSTOM_PAGING_SHADOW']
    [record] = caplog.records
    message = record.getMessage()
    assert 'm1.test' in message and 'hw:paging=shadow' in message
    assert 'trait:CUSTOM_PAGING_SHADOW=required' in message
    assert '\n' not in message


def test_a_trait_the_policy_does_not_ask_for_is_reported(monkeypatch, hosts,
                                                         caplog):
    use(monkeypatch, Placement({}))
    extra = dict(paired('hap'), **{'trait:CUSTOM_PAGING_SHADOW': 'required'})
    with caplog.at_level(logging.WARNING, LOGGER):
        run(hosts, spec(extra))
    assert 'CUSTOM_PAGING_SHADOW' in caplog.text
    assert 'hw:paging=hap' in caplog.text


def test_nothing_passes_without_raising(monkeypatch, hosts):
    use(monkeypatch, Placement({}))     # nobody has the trait
    assert run(hosts, spec({'hw:paging': 'adaptive'})) == set()


def test_bad_value_fails_every_host_with_a_debug_reason(monkeypatch, hosts,
                                                        caplog):
    placement = use(monkeypatch, Placement({}))
    with caplog.at_level(logging.DEBUG, LOGGER):
        assert run(hosts, spec({'hw:paging': 'ept'})) == set()
    assert "invalid hw:paging='ept'" in caplog.text
    assert placement.calls == []


def test_placement_failure_fails_closed(monkeypatch, hosts, caplog):
    def broken(trait):
        raise ConnectionError('placement unreachable')
    use(monkeypatch, Placement({}, before_answer=broken))
    with caplog.at_level(logging.DEBUG, LOGGER):
        assert run(hosts, spec({'hw:paging': 'hap'})) == set()
    assert 'placement unreachable' in caplog.text


def test_aggregate_withholds_a_policy_from_its_hosts(monkeypatch, hosts):
    use(monkeypatch, Placement({}))
    agg = objects.Aggregate(id=1, name='drain', hosts=[], metadata={
        vocabulary.AGGREGATE_KEY: 'hap, shadow'})
    for host in hosts[:2]:
        host.aggregates = [agg]
    assert run(hosts, spec(paired('adaptive'))) == names(hosts[2:])
    assert run(hosts, spec(paired('shadow'))) == names(hosts)


def test_runs_once_per_request():
    flt = paging_filter.AdaptivePagingFilter()
    assert flt.run_filter_for_index(0)
    assert not flt.run_filter_for_index(1)


def test_interleaved_requests_keep_their_own_answers(monkeypatch, hosts):
    """Request A (shadow) is still waiting for placement when request B
    (adaptive) is filtered from start to end on the same filter object:
    each gets the hosts of its own trait."""
    shadow, switching = hosts[:3], hosts[3:]
    b_done = threading.Event()

    def hold_a(trait):
        if trait == 'CUSTOM_PAGING_SHADOW':
            assert b_done.wait(10)
    use(monkeypatch, Placement({
        'CUSTOM_PAGING_SHADOW': [h.uuid for h in shadow],
        'CUSTOM_PAGING_SWITCHING': [h.uuid for h in switching]},
        before_answer=hold_a))
    flt = paging_filter.AdaptivePagingFilter()
    got = {}

    def filter_a():
        got['a'] = names(flt.filter_all(hosts, spec({'hw:paging':
                                                     'shadow'})))
    a = threading.Thread(target=filter_a)
    a.start()
    got['b'] = names(flt.filter_all(hosts, spec({'hw:paging':
                                                 'adaptive'})))
    b_done.set()
    a.join(10)
    assert got == {'a': names(shadow), 'b': names(switching)}


def test_rebuild_passes_the_host_it_has(monkeypatch, hosts):
    placement = use(monkeypatch, Placement({}))
    request = spec({'hw:paging': 'adaptive'})
    request.scheduler_hints = {'_nova_check_type': ['rebuild']}
    assert run(hosts, request) == names(hosts)
    assert placement.calls == []


def test_request_without_an_image(monkeypatch, hosts):
    # Volume-backed boots and some moves carry no image properties.
    use(monkeypatch, Placement({}))
    request = objects.RequestSpec(
        flavor=objects.Flavor(name='m1.test', extra_specs=paired('hap')),
        scheduler_hints={}, instance_uuid=str(uuid.uuid4()))
    assert run(hosts, request) == names(hosts)
