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

"""The extra specs ``nova-paging flavor set`` writes, and its errors."""

from click.testing import CliRunner
import pytest

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import capabilities
from nova_adaptive_paging.cmd import cli
from nova_adaptive_paging import flavors
from nova_adaptive_paging import policy
from nova_adaptive_paging import vocabulary

SHARED = {'hw:cpu_policy': 'shared'}


def test_each_policy_gets_its_trait_as_placement_spells_it():
    # Nova's extra spec for a required trait: trait:<NAME>=required;
    # the trait names are the ones doc/source/scheduler.rst documents.
    for paging, trait in (('adaptive', 'CUSTOM_PAGING_SWITCHING'),
                          ('hap', 'CUSTOM_PAGING_HAP'),
                          ('shadow', 'CUSTOM_PAGING_SHADOW')):
        written, removed = flavors.plan(dict(SHARED), policy.PagingPolicy(
            vocabulary.Paging(paging)))
        assert written == {'hw:paging': paging,
                           'trait:%s' % trait: 'required'}
        assert removed == []


def test_a_new_policy_removes_what_the_old_one_left():
    current = dict(SHARED, **{'hw:paging': 'adaptive',
                              'hw:paging_interval': '5',
                              'hw:paging_profile': 'amd-zen3',
                              'trait:CUSTOM_PAGING_SWITCHING': 'required',
                              'trait:CUSTOM_PAGING_CPU_AMD_ZEN3':
                                  'required'})
    written, removed = flavors.plan(current, policy.PagingPolicy(
        vocabulary.Paging.HAP))
    assert written == {'hw:paging': 'hap',
                       'trait:CUSTOM_PAGING_HAP': 'required'}
    # The generation trait is the operator's, not a paging mode's.
    assert removed == ['hw:paging_interval', 'hw:paging_profile',
                       'trait:CUSTOM_PAGING_SWITCHING']


def test_unset_and_unchanged():
    current = dict(SHARED, **{'hw:paging': 'shadow',
                              'trait:CUSTOM_PAGING_SHADOW': 'required'})
    assert flavors.plan(current, policy.PagingPolicy(
        vocabulary.Paging.SHADOW)) == ({}, [])
    assert flavors.plan(current, None) == (
        {}, ['hw:paging', 'trait:CUSTOM_PAGING_SHADOW'])


def test_adaptive_in_pools_asks_for_a_pool_member_instead():
    current = dict(SHARED, **{'hw:paging': 'adaptive',
                              'trait:CUSTOM_PAGING_SWITCHING': 'required'})
    written, removed = flavors.plan(current, policy.PagingPolicy(
        vocabulary.Paging.ADAPTIVE), pools=True)
    assert written == {'trait:CUSTOM_PAGING_POOL': 'required'}
    assert removed == ['trait:CUSTOM_PAGING_SWITCHING']
    # ... and back: the pool trait is the project's to remove.
    current = dict(SHARED, **{'hw:paging': 'adaptive',
                              'trait:CUSTOM_PAGING_POOL': 'required'})
    assert flavors.plan(current, policy.PagingPolicy(
        vocabulary.Paging.ADAPTIVE)) == (
        {'trait:CUSTOM_PAGING_SWITCHING': 'required'},
        ['trait:CUSTOM_PAGING_POOL'])


def test_who_publishes_the_pool_trait():
    def traits(*args, **kw):
        return capabilities.Capabilities(*args, **kw).traits()
    pool = vocabulary.TRAIT_POOL
    assert pool in traits(0, True, 'g', False, pool=True)     # hap pool
    assert pool in traits(0, False, 'g', False, pool=True)    # shadow pool
    assert pool not in traits(0, True, 'g', False)             # outside
    assert pool in traits(spec.ABI_VERSION, True, 'g', False)  # switches
    # No KVM: no guest at all, pool or not.
    assert pool not in traits(0, True, 'g', False, kvm=False, pool=True)


def test_a_policy_nova_would_refuse_is_never_written():
    with pytest.raises(policy.PolicyError):
        flavors.plan({}, policy.PagingPolicy(vocabulary.Paging.HAP,
                                             interval_s=5))


def test_a_flavor_left_contradicting_itself_is_never_written():
    # The operator's granular key forbids what adaptive needs: writing the
    # pair would leave a flavor the scheduler refuses at every boot.
    current = dict(SHARED, **{'trait1:CUSTOM_PAGING_SWITCHING': 'forbidden'})
    with pytest.raises(policy.PolicyError) as exc:
        flavors.plan(current, policy.PagingPolicy(
            vocabulary.Paging.ADAPTIVE))
    assert "trait1:CUSTOM_PAGING_SWITCHING='forbidden'" in str(exc.value)
    assert 'hw:paging=adaptive' in str(exc.value)
    # Forbidding a trait the policy does not need is the operator's right
    # (adaptive in pools staying off switching hosts), and unset leaves
    # no hw:paging for the key to contradict.
    assert flavors.plan(current, policy.PagingPolicy(
        vocabulary.Paging.ADAPTIVE), pools=True) == (
        {'hw:paging': 'adaptive', 'trait:CUSTOM_PAGING_POOL': 'required'}, [])
    assert flavors.plan(current, None) == ({}, [])


def test_a_trait_the_operator_forbade_stays():
    # Adaptive in pools, kept off switching hosts (doc/source/
    # scheduler.rst): setting the policy again keeps the choice.
    current = dict(SHARED, **{'hw:paging': 'adaptive',
                              'trait:CUSTOM_PAGING_POOL': 'required',
                              'trait:CUSTOM_PAGING_SWITCHING': 'forbidden'})
    assert flavors.plan(current, policy.PagingPolicy(
        vocabulary.Paging.ADAPTIVE), pools=True) == ({}, [])
    # Unset removes the policy and its trait, not the choice.
    assert flavors.plan(current, None) == (
        {}, ['hw:paging', 'trait:CUSTOM_PAGING_POOL'])
    # A forbidden trait the new policy needs is refused, naming it, not
    # dropped behind the operator's back: a host that switches runs hap.
    current = dict(SHARED, **{'trait:CUSTOM_PAGING_HAP': 'forbidden'})
    with pytest.raises(policy.PolicyError) as exc:
        flavors.plan(current, policy.PagingPolicy(
            vocabulary.Paging.ADAPTIVE))
    assert "trait:CUSTOM_PAGING_HAP='forbidden'" in str(exc.value)


@pytest.mark.parametrize('args, expected', [
    (['set', 'm1', '--paging', 'hap', '--interval', '5'],
     'error: invalid hw:paging_interval=5: expected no value'),
    (['set', 'm1', '--paging', 'adaptive', '--interval', '0'],
     "error: invalid hw:paging_interval='0'"),
    (['--os-cloud', 'nowhere', 'set', 'm1', '--paging', 'hap'],
     'error: flavor m1: Cloud nowhere was not found.'),
    (['set', 'm1', '--paging', 'hap', '--pools'],
     'error: --pools: only for --paging adaptive'),
])
def test_errors_are_one_line(tmp_path, args, expected):
    clouds = tmp_path / 'clouds.yaml'
    clouds.write_text('clouds: {}\n')
    result = CliRunner().invoke(cli.main, ['flavor'] + args, env={
        'OS_CLIENT_CONFIG_FILE': str(clouds), 'OS_CLOUD': ''})
    assert result.exit_code == 2, result.output
    assert result.output.startswith(expected), result.output
    assert result.output.count('\n') == 1, result.output
    assert 'Traceback' not in result.output
