"""AdaptivePagingFilter and its request filter on their own: Nova's
objects and HostStates, no placement (tests/functional runs both in the
real scheduler against the placement fixture)."""

import logging
import uuid

import pytest

from nova import objects
from nova.scheduler import request_filter as nova_request_filter
from nova.tests.unit.scheduler import fakes

from nova_adaptive_paging.scheduler.filters import paging_filter
from nova_adaptive_paging.scheduler import request_filter
from nova_adaptive_paging import vocabulary

objects.register_all()

LOGGER = paging_filter.LOG.logger.name


@pytest.fixture(autouse=True)
def nova_request_filters(monkeypatch):
    """Nova's own list, for the filter's constructor to append to."""
    filters = [f for f in nova_request_filter.ALL_REQUEST_FILTERS
               if f is not request_filter.require_paging_trait]
    monkeypatch.setattr(nova_request_filter, 'ALL_REQUEST_FILTERS', filters)
    return filters


@pytest.fixture
def hosts():
    return [fakes.FakeHostState('host%d' % i, 'node%d' % i,
                                {'uuid': str(uuid.uuid4()),
                                 'aggregates': []}) for i in range(6)]


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


def schedule(hosts, request):
    """What the scheduler does: the request filter (Nova's others need a
    database), then the host filter."""
    request_filter.require_paging_trait(None, request)
    return names(paging_filter.AdaptivePagingFilter().filter_all(hosts,
                                                                 request))


def test_constructing_the_filter_registers_the_request_filter_once(
        nova_request_filters):
    before = list(nova_request_filters)
    paging_filter.AdaptivePagingFilter()
    paging_filter.AdaptivePagingFilter()
    assert nova_request_filters == before + [
        request_filter.require_paging_trait]


def test_no_paging_spec_passes_every_host_and_requires_nothing(hosts):
    for extra in ({}, {'hw:cpu_policy': 'shared'}):
        request = spec(extra)
        assert schedule(hosts, request) == names(hosts)
        assert not request.root_required & vocabulary.MODE_TRAITS


@pytest.mark.parametrize('paging', ['adaptive', 'hap', 'shadow'])
def test_the_key_alone_gets_its_trait_required(hosts, paging):
    request = spec({'hw:paging': paging})
    assert request_filter.require_paging_trait(None, request) is True
    assert request.root_required == {
        vocabulary.REQUIRED_TRAIT[vocabulary.Paging(paging)]}
    assert paging_filter.AdaptivePagingFilter().filter_all(hosts, request)


@pytest.mark.parametrize('paging', ['adaptive', 'hap', 'shadow'])
def test_a_paired_flavor_or_image_needs_nothing_added(hosts, paging):
    trait = vocabulary.REQUIRED_TRAIT[vocabulary.Paging(paging)]
    for request in (spec(paired(paging)),
                    spec({'hw:paging': paging}, [trait])):
        assert request_filter.require_paging_trait(None, request) is False
        assert request.root_required == set()
        assert schedule(hosts, request) == names(hosts)


def test_a_request_that_skipped_placement_selection_fails_closed(
        hosts, caplog):
    request = spec({'hw:paging': 'shadow'})     # no request filter ran
    with caplog.at_level(logging.DEBUG, LOGGER):
        assert names(paging_filter.AdaptivePagingFilter().filter_all(
            hosts, request)) == set()
    assert 'without trait CUSTOM_PAGING_SHADOW' in caplog.text


def test_bad_value_fails_every_host_with_a_debug_reason(hosts, caplog):
    request = spec({'hw:paging': 'ept'})
    with caplog.at_level(logging.DEBUG, LOGGER):
        assert schedule(hosts, request) == set()
    assert "invalid hw:paging='ept'" in caplog.text
    assert request.root_required == set()


def test_aggregate_withholds_a_policy_from_its_hosts(hosts):
    agg = objects.Aggregate(id=1, name='drain', hosts=[], metadata={
        vocabulary.AGGREGATE_KEY: 'hap, shadow'})
    for host in hosts[:2]:
        host.aggregates = [agg]
    assert schedule(hosts, spec(paired('adaptive'))) == names(hosts[2:])
    assert schedule(hosts, spec({'hw:paging': 'adaptive'})) == \
        names(hosts[2:])
    assert schedule(hosts, spec(paired('shadow'))) == names(hosts)


def test_runs_once_per_request():
    flt = paging_filter.AdaptivePagingFilter()
    assert flt.run_filter_for_index(0)
    assert not flt.run_filter_for_index(1)


def test_rebuild_passes_the_host_it_has(hosts):
    # Nova runs no request filter on a rebuild; an aggregate withholding
    # the policy since the boot does not refuse the guest its own host.
    agg = objects.Aggregate(id=1, name='drain', hosts=[], metadata={
        vocabulary.AGGREGATE_KEY: 'hap'})
    for host in hosts:
        host.aggregates = [agg]
    request = spec(paired('adaptive'))
    request.scheduler_hints = {'_nova_check_type': ['rebuild']}
    assert names(paging_filter.AdaptivePagingFilter().filter_all(
        hosts, request)) == names(hosts)


def test_request_without_an_image(hosts):
    # Volume-backed boots and some moves carry no image properties.
    request = objects.RequestSpec(
        flavor=objects.Flavor(name='m1.test', extra_specs={
            'hw:paging': 'hap'}),
        scheduler_hints={}, instance_uuid=str(uuid.uuid4()))
    assert schedule(hosts, request) == names(hosts)
    assert request.root_required == {vocabulary.TRAIT_HAP}
