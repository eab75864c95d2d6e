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

"""AdaptivePagingFilter and its request filter on their own: Nova's
objects and HostStates, no placement (tests/functional runs both in the
real scheduler against the placement fixture)."""

import logging
import os
import uuid

import pytest

import nova.conf
from nova import exception as nova_exception
from nova import objects
from nova.scheduler import request_filter as nova_request_filter
from nova.tests.unit.scheduler import fakes
from oslo_concurrency import processutils
from prometheus_client import parser

from nova_adaptive_paging.scheduler.filters import paging_filter
from nova_adaptive_paging.scheduler import request_filter
from nova_adaptive_paging import vocabulary

objects.register_all()

LOGGER = paging_filter.LOG.logger.name
RF_LOGGER = request_filter.LOG.logger.name
CONF = nova.conf.CONF


@pytest.fixture(autouse=True)
def nova_request_filters(monkeypatch, tmp_path):
    """Nova's own list, for the filter's constructor to append to; the
    scheduler configured to run the filter, its status file in a
    directory of the test's own."""
    filters = [f for f in nova_request_filter.ALL_REQUEST_FILTERS
               if f is not request_filter.require_paging_trait]
    monkeypatch.setattr(nova_request_filter, 'ALL_REQUEST_FILTERS', filters)
    monkeypatch.setattr(request_filter, 'STATUS', None)
    CONF.set_override('enabled_filters', [request_filter.FILTER_NAME],
                      'filter_scheduler')
    CONF.set_override('textfile_collector_dir', str(tmp_path),
                      'adaptive_paging')
    yield filters
    CONF.clear_override('enabled_filters', 'filter_scheduler')
    CONF.clear_override('textfile_collector_dir', 'adaptive_paging')
    CONF.clear_override('request_filter', 'adaptive_paging')


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
    assert 'without trait:CUSTOM_PAGING_SHADOW=required' in caplog.text


def test_bad_value_is_refused_with_a_reason_naming_the_key(hosts, caplog):
    # Set below microversion 2.86, before Nova validated extra specs.
    request = spec({'hw:paging': 'ept'})
    exc = pytest.raises(nova_exception.RequestFilterFailed,
                        request_filter.require_paging_trait, None, request)
    assert "hw:paging='ept'" in str(exc.value)
    assert request.root_required == set()
    # The host filter alone (the request filter off): every host fails,
    # and one INFO line says why.
    with caplog.at_level(logging.DEBUG, LOGGER):
        assert names(paging_filter.AdaptivePagingFilter().filter_all(
            hosts, request)) == set()
    info = [r.getMessage() for r in caplog.records
            if r.levelname == 'INFO' and r.name == LOGGER]
    assert len(info) == 1 and "hw:paging='ept'" in info[0]


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
    # ... nor does a flavor with hw:paging alone, which the request filter
    # (not run on a rebuild) would have given its trait, or a request
    # the filter would refuse as a whole.
    for extra in ({'hw:paging': 'adaptive'}, {'hw:paging': 'ept'}):
        request = spec(extra)
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


# -- the trait the flavor forbids --------------------------------------------
@pytest.mark.parametrize('extra, key, trait', [
    # the pair the flavor contradicts itself with
    ({'hw:paging': 'adaptive', 'trait:CUSTOM_PAGING_SWITCHING': 'forbidden'},
     'trait:CUSTOM_PAGING_SWITCHING', 'CUSTOM_PAGING_SWITCHING'),
    # ... in a granular group
    ({'hw:paging': 'shadow', 'trait1:CUSTOM_PAGING_SHADOW': 'forbidden'},
     'trait1:CUSTOM_PAGING_SHADOW', 'CUSTOM_PAGING_SHADOW'),
    # ... beside the pair nova-paging flavor set writes
    ({'hw:paging': 'hap', 'trait:CUSTOM_PAGING_HAP': 'required',
      'trait_x:CUSTOM_PAGING_HAP': 'forbidden'},
     'trait_x:CUSTOM_PAGING_HAP', 'CUSTOM_PAGING_HAP'),
    # a host that switches runs hap too: forbidding hap forbids it
    ({'hw:paging': 'adaptive', 'trait:CUSTOM_PAGING_HAP': 'forbidden'},
     'trait:CUSTOM_PAGING_HAP', 'CUSTOM_PAGING_SWITCHING'),
])
def test_a_flavor_forbidding_what_its_policy_needs_is_refused_naming_both(
        hosts, caplog, extra, key, trait):
    request = spec(extra)
    with caplog.at_level(logging.INFO, RF_LOGGER):
        exc = pytest.raises(nova_exception.RequestFilterFailed,
                            request_filter.require_paging_trait, None,
                            request)
    reason = str(exc.value)
    assert key + "='forbidden'" in reason and trait in reason
    assert 'hw:paging=' + extra['hw:paging'] in reason
    assert len(reason.splitlines()) == 1
    # Said at INFO in the scheduler's log too.
    assert key in caplog.text
    # The host filter alone refuses it as well.
    assert names(paging_filter.AdaptivePagingFilter().filter_all(
        hosts, request)) == set()


def test_forbidding_another_mode_s_trait_is_no_contradiction(hosts):
    # Adaptive in pools, never on a host that switches: the stock pools.
    request = spec({'hw:paging': 'adaptive',
                    'trait:CUSTOM_PAGING_POOL': 'required',
                    'trait:CUSTOM_PAGING_SWITCHING': 'forbidden'})
    assert request_filter.require_paging_trait(None, request) is False
    assert schedule(hosts, request) == names(hosts)
    request = spec({'hw:paging': 'shadow',
                    'trait:CUSTOM_PAGING_HAP': 'forbidden'})
    assert request_filter.require_paging_trait(None, request) is True


def test_a_granular_group_s_required_trait_is_the_pair(hosts):
    # The traits sit on the compute node's provider alone: a group that
    # requires one is served by it.
    request = spec({'hw:paging': 'adaptive', 'resources1:VCPU': '1',
                    'trait1:CUSTOM_PAGING_SWITCHING': 'required'})
    assert request_filter.require_paging_trait(None, request) is False
    CONF.set_override('request_filter', False, 'adaptive_paging')
    assert schedule(hosts, request) == names(hosts)


# -- registration never stops the scheduler -----------------------------------
def _exported(tmp_path):
    with open(tmp_path / request_filter.TEXTFILE, encoding='utf-8') as f:
        fams = list(parser.text_string_to_metric_families(f.read()))
    assert [f.name for f in fams] == [
        'nova_paging_scheduler_request_filter']
    return {s.labels['state']: s.value for s in fams[0].samples}


def test_a_changed_nova_leaves_the_scheduler_running_and_says_so_once(
        monkeypatch, hosts, caplog, tmp_path):
    # Nova's list reshaped into a tuple by a release this one does not
    # know: the filter is built (the scheduler starts), one ERROR names
    # what changed, the state is exported.
    monkeypatch.setattr(nova_request_filter, 'ALL_REQUEST_FILTERS', ())
    with caplog.at_level(logging.INFO):
        paging_filter.AdaptivePagingFilter()
        flt = paging_filter.AdaptivePagingFilter()
    errors = [r.getMessage() for r in caplog.records
              if r.levelname == 'ERROR']
    assert len(errors) == 1
    assert 'ALL_REQUEST_FILTERS is not a list' in errors[0]
    assert 'runs on' in errors[0]
    assert _exported(tmp_path) == {'registered': 0, 'disabled': 0,
                                   'failed': 1}
    # hw:paging alone is refused by every host, and one INFO line says
    # which trait is missing and why; the pair schedules as before.
    caplog.clear()
    with caplog.at_level(logging.INFO, LOGGER):
        assert names(flt.filter_all(hosts, spec({'hw:paging': 'shadow'}))
                     ) == set()
    info = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(info) == 1
    assert 'trait:CUSTOM_PAGING_SHADOW=required' in info[0]
    assert 'ALL_REQUEST_FILTERS is not a list' in info[0]
    assert names(flt.filter_all(hosts, spec(paired('shadow')))) == \
        names(hosts)


@pytest.mark.parametrize('target', [
    'process_reqspec', 'ALL_REQUEST_FILTERS'])
def test_a_failed_check_leaves_no_entry_in_the_list(
        monkeypatch, nova_request_filters, target):
    paging_filter.AdaptivePagingFilter()
    assert request_filter.require_paging_trait in nova_request_filters
    # The next start meets a changed Nova: the list keeps no entry that
    # the status says is not there.
    if target == 'process_reqspec':
        monkeypatch.setattr(nova_request_filter, 'process_reqspec',
                            lambda ctxt, spec: None)
    else:
        monkeypatch.setattr(request_filter, '_calls', lambda f, n: False)
    paging_filter.AdaptivePagingFilter()
    assert request_filter.STATUS.state == request_filter.FAILED
    assert request_filter.require_paging_trait not in nova_request_filters


def test_the_option_off_registers_nothing(nova_request_filters, hosts,
                                          tmp_path, caplog):
    before = list(nova_request_filters)
    paging_filter.AdaptivePagingFilter()
    CONF.set_override('request_filter', False, 'adaptive_paging')
    with caplog.at_level(logging.INFO, RF_LOGGER):
        flt = paging_filter.AdaptivePagingFilter()
    # The entry the earlier start added is gone: the list is Nova's.
    assert nova_request_filters == before
    assert _exported(tmp_path)['disabled'] == 1
    assert 'request_filter is off' in caplog.text
    assert not [r for r in caplog.records if r.levelname == 'ERROR']
    # An entry left in the list would not act either: the option is read
    # per request, as Nova's request filters read theirs.
    request = spec({'hw:paging': 'hap'})
    assert request_filter.require_paging_trait(None, request) is False
    assert names(flt.filter_all(hosts, request)) == set()
    assert names(flt.filter_all(hosts, spec(paired('hap')))) == names(hosts)


def test_the_request_filter_acts_only_beside_the_host_filter():
    paging_filter.AdaptivePagingFilter()
    CONF.set_override('enabled_filters', ['ComputeFilter'],
                      'filter_scheduler')
    request = spec({'hw:paging': 'hap'})
    assert request_filter.require_paging_trait(None, request) is False
    assert request.root_required == set()


def test_no_status_file_without_the_collector_s_directory(tmp_path):
    CONF.set_override('textfile_collector_dir', str(tmp_path / 'absent'),
                      'adaptive_paging')
    paging_filter.AdaptivePagingFilter()
    assert request_filter.STATUS.state == request_filter.REGISTERED
    assert not (tmp_path / 'absent').exists()


def test_every_scheduler_worker_has_the_request_filter(
        nova_request_filters, tmp_path):
    """nova-scheduler builds its manager (and this filter) in the parent,
    then forks ``[scheduler] workers`` processes, by default one per CPU
    (nova/cmd/scheduler.py; oslo.service forks with os.fork): each
    worker holds the registration and acts on a request."""
    workers = CONF.scheduler.workers or processutils.get_worker_count()
    paging_filter.AdaptivePagingFilter()
    assert _exported(tmp_path)['registered'] == 1
    read, write = os.pipe()
    pids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:                            # a worker
            code = 1
            try:
                request = spec({'hw:paging': 'shadow'})
                entry = nova_request_filter.ALL_REQUEST_FILTERS[-1]
                if (nova_request_filter.ALL_REQUEST_FILTERS.count(
                        entry) == 1 and entry(None, request)
                        and request.root_required == {
                            vocabulary.TRAIT_SHADOW}):
                    os.write(write, b'%d\n' % os.getpid())
                    code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    os.close(write)
    codes = [os.waitpid(pid, 0)[1] for pid in pids]
    with os.fdopen(read) as f:
        answered = {int(line) for line in f}
    assert codes == [0] * workers
    assert answered == set(pids)


def test_anything_registration_raises_leaves_the_scheduler_running(
        monkeypatch, caplog, tmp_path, nova_request_filters):
    # Not one of the checks: something this release never foresaw.
    def broken(*args):
        raise AttributeError("module 'nova.objects' has no attribute 'X'")
    paging_filter.AdaptivePagingFilter()
    assert request_filter.require_paging_trait in nova_request_filters
    monkeypatch.setattr(request_filter, '_check', broken)
    # Only what the failed start logs, at every level from INFO, whatever
    # level the process's logging was left at by an earlier import
    # (nova.tests.unit's set the root logger to INFO).
    caplog.clear()
    with caplog.at_level(logging.INFO, RF_LOGGER):
        paging_filter.AdaptivePagingFilter()
    assert [r.levelname for r in caplog.records] == ['ERROR']
    assert "AttributeError: module 'nova.objects'" in caplog.text
    assert _exported(tmp_path)['failed'] == 1
    assert request_filter.require_paging_trait not in nova_request_filters
