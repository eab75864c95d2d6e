"""Fixtures the agent's tests share: a simulated KVM host (its files,
its libvirt test-driver XML, a clock that moves only when told) and an
agent driving it through the model's own interface."""

import os

import pytest

from nova_adaptive_paging.agent import service
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging import vocabulary

GENERATION = 'amd-zen3'


@pytest.fixture
def sim(tmp_path):
    clock = simfleet.Clock()
    host = simhost.SimHost(str(tmp_path), hardware.resolve('nehalem'),
                           profiles.builtin(), clock=clock)
    host.clock = clock
    os.makedirs(os.path.join(host.root, 'profiles'))
    return host


@pytest.fixture
def start_guest(sim):
    """start_guest(name, extra specs, trace=...): a running domain."""
    def start(name, specs, trace='phases-tlb-fault', **kw):
        return sim.start_vm(simhost.VmSpec(name, traces.builtin()[trace],
                                           specs, **kw))
    return start


@pytest.fixture
def make_agent(sim):
    """make_agent(default=..., transport=...): an agent of ``sim``."""
    def make(default=vocabulary.HAP, count_all=False, transport=None,
             **kw):
        conf = simfleet.agent_conf_for(sim.root, sim.libvirt_uri, default,
                                       count_all)
        kw.setdefault('clock', sim.now_s)
        return service.Agent(conf, GENERATION,
                             transport=transport or sim.model, **kw)
    return make
