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

"""What the agent's tests share: the simulated host's guests, an agent
of it whose writes are kept, scraping and reading /metrics."""

import subprocess
import urllib.request

from prometheus_client import parser

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.agent import service
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import dsp
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.simhost import scraped_fleet as simfleet
from nova_adaptive_paging.telemetry import metrics
from nova_adaptive_paging import vocabulary

NEHALEM = hardware.resolve('nehalem')
TRACES = traces.builtin()
GENERATION = 'amd-zen3'

# A profile for this host's generation, with thresholds unlike the
# built-in fallback's (so that its arrival is visible in dsp_thresholds).
ZEN3 = """format_version: 1
generation: amd-zen3
thresholds: {tlb_upper: 7, tlb_lower: 0.2, pf_upper: 4000, pf_lower: 90,
             pt_upper: 300, pt_lower: 120}
history_samples: 2
interval_s: 1
provenance: {method: calibrated, source: test, obtained: 2026-11-25,
             hosts: 1, samples: 10}
"""

Clock = simfleet.Clock


class Recording:
    """The model's interface, with every write kept (it is still the
    model that accepts or refuses them)."""

    def __init__(self, model):
        self.model = model
        self.writes = []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def write(self, rel, text):
        self.writes.append((rel, text.strip()))
        return self.model.write(rel, text)

    def set_mode(self, vm, mode):
        rel = spec.vm_path(vm, vmfiles.SET_MODE)
        self.writes.append((rel, mode))
        return self.model.set_mode(vm, mode)


make_conf = simfleet.agent_conf_for


def start(sim, name, specs, trace='phases-tlb-fault', **kw):
    return sim.start_vm(simhost.VmSpec(name, TRACES[trace], specs, **kw))


def agent_for(sim, default=vocabulary.HAP, count_all=False,
              generation=GENERATION, **kw):
    conf = make_conf(sim.root, sim.libvirt_uri, default, count_all)
    transport = Recording(sim.model)
    kw.setdefault('clock', sim.now_s)
    return service.Agent(conf, generation, transport=transport, **kw)


def policy_of(sim, name):
    return sim.model.vms[sim.vms[name].dirname].policy


def run(sim, seconds):
    for _ in range(int(seconds)):
        sim.clock.ns += int(1e9)
        sim.tick()


def follow_the_engine(sim, agent, name, each, intervals=60):
    """Sample guest ``name`` for ``intervals`` profile intervals while
    the test makes the decision itself on the same counts (the DSP
    engine and guard of the profile the agent uses, one interval a
    sample); ``each(mode)`` checks the guest after every step, and a
    reconcile pass every seventh must keep it there.  The modes decided."""
    profile = profiles.builtin()
    engine = dsp.Engine(profile.thresholds, profile.history_samples,
                        guard=profile.guard)
    vm = sim.vms[name]
    decided = []
    agent.sample()
    prev = vm.counters()
    for _ in range(intervals):
        run(sim, profile.interval_s)
        agent.sample()
        now = vm.counters()
        engine.step(dsp.Sample.from_counts(
            *[b - a for a, b in zip(prev, now)]),
            profile.interval_s * 10 ** 9)
        prev = now
        decided.append(str(engine.mode))
        each(decided[-1])
        if len(decided) % 7 == 0:
            agent.reconcile()
    return decided


def tlb_bound(tmp_path, name, sim, agent, intervals, reconcile=False):
    """Feed guest ``name`` TLB-bound counts through the test hook's file
    (``decision_samples_dir`` = ``tmp_path``) for ``intervals`` nominal
    intervals, each sampled (and with ``reconcile``, a pass after each):
    every rule of Figure 5 asks for shadow paging."""
    profile = profiles.builtin()
    path = tmp_path / name
    insns, tlb = (int(w) for w in (path.read_text().split()[:2]
                                   if path.exists() else (0, 0)))
    for _ in range(intervals):
        insns += 10 ** 9
        tlb += 10 ** 8
        path.write_text('%d %d 0\n' % (insns, tlb))
        run(sim, profile.interval_s)
        agent.sample()
        if reconcile:
            agent.reconcile()


def _scrape(port):
    with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port,
                                timeout=10) as resp:
        text = resp.read().decode()
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def _value(fams, metric, **labels):
    name = metric.name[:-len('_total')] if metric.kind == metrics.COUNTER \
        else metric.name
    for s in fams[name].samples:
        if all(s.labels.get(k) == v for k, v in labels.items()) and \
                not s.name.endswith(('_created', '_bucket', '_count',
                                     '_sum')):
            return s.value
    raise AssertionError('%s%s not scraped' % (metric.name, labels))


# Advisory mode: the guests' counters, and a stock kernel.
TraceCounters = simfleet.TraceCounters


def stock_kernel(agent):
    """The simulated host as a stock kernel: no paging_switch_abi."""
    agent.transport = simfleet.StockTransport(agent.transport)


def self_signed(tmp_path):
    """A self-signed certificate of 127.0.0.1 (key, cert paths)."""
    key, crt = tmp_path / 'agent.key', tmp_path / 'agent.crt'
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048',
                    '-nodes', '-days', '2', '-subj', '/CN=localhost',
                    '-addext', 'subjectAltName=IP:127.0.0.1',
                    '-keyout', str(key), '-out', str(crt)],
                   check=True, capture_output=True)
    return key, crt
