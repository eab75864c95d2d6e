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

"""A simulated fleet on a modeled clock: hosts of several CPU
generations, each with its guests and one real agent (in process, real
libvirt test driver), scraped every ``scrape_s`` modeled seconds into
OpenMetrics text that ``promtool tsdb create-blocks-from openmetrics``
loads into a real Prometheus.  A test and benchmark fixture: every
figure is modeled.
"""

import dataclasses
import os

from oslo_config import cfg
from prometheus_client.core import CollectorRegistry

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.telemetry import collector
from nova_adaptive_paging.agent import service
from nova_adaptive_paging.conf import adaptive_paging as ap_conf
from nova_adaptive_paging.conf import agent as agent_conf
from nova_adaptive_paging.conf import nova as nova_conf
from nova_adaptive_paging.conf import placement as placement_conf
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging.telemetry import queries as Q

AGENT_PORT = 9118


class Clock:
    """The fleet's modeled time (ns), shared by its hosts."""

    def __init__(self):
        self.ns = 0

    def __call__(self):
        return self.ns


@dataclasses.dataclass
class Member:
    name: str
    sim: object
    agent: object
    registry: object


def agent_conf_for(root, uri, default='hap', count_all=False, pool=False):
    conf = cfg.ConfigOpts()
    for module in (ap_conf, agent_conf, nova_conf, placement_conf):
        module.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override('host_root', root, 'adaptive_paging')
    conf.set_override('libvirt_uri', uri, 'adaptive_paging')
    conf.set_override('default_policy', default, 'adaptive_paging')
    conf.set_override('profile_dirs', [os.path.join(root, 'profiles')],
                      'adaptive_paging')
    conf.set_override('count_all_guests', count_all, 'adaptive_paging')
    conf.set_override('pool', pool, 'adaptive_paging')
    return conf


class StockTransport:
    """The simulated host as a stock kernel: KVM without the switching
    interface (no ``paging_switch_abi``), so its agent only advises."""

    def __init__(self, model):
        self.model = model

    def __getattr__(self, name):
        return getattr(self.model, name)

    def read(self, rel):
        if rel.endswith(spec.PARAM_ABI):
            raise FileNotFoundError(2, 'No such file', rel)
        return self.model.read(rel)

    def paging_mode_cap(self):
        return False            # nor the mechanism's control


class TraceCounters:
    """Stands in for perf.GuestCounters (guest-only hardware counters),
    which no machine here has: the simulated guest's own cumulative
    instructions and TLB misses."""

    def __init__(self, sim, pid):
        self.vm = [v for v in sim.vms.values() if str(v.pid) == str(pid)][0]

    def read(self):
        return self.vm.counters()[:2]

    def close(self):
        pass


class SimBalloon:
    """The agent's libvirt domains, with each guest's page-fault count
    from the simulated guest: what a real guest's virtio-balloon
    statistics report, which libvirt's test driver cannot (it reports a
    constant).  The one stand-in of the stock fleet; the rest of the
    agent's libvirt use is the real test driver."""

    def __init__(self, domains, sim):
        self.domains = domains
        self.sim = sim

    def __getattr__(self, name):
        return getattr(self.domains, name)

    def guest_faults(self, name):
        vm = self.sim.vms.get(name)
        return None if vm is None else int(vm.counters()[2])


class Fleet:
    def __init__(self, root):
        self.root = root
        self.clock = Clock()
        self.members = []

    def add_host(self, name, hardware, generation, vm_specs, profile=None,
                 stock=False, count_all=True, tdp=True, balloon=False,
                 pool=False):
        """A host and its guests.  ``count_all``: a profiling host, whose
        kernel counts the events of every guest, not only of adaptive
        ones (what the profiler's per-event costs divide by).  ``stock``:
        a kernel without the switching series (its agent advises), in
        the hap pool or, with ``tdp`` off, the shadow pool; ``balloon``:
        its guests report their page faults (SimBalloon); ``pool``: a
        member of the fleet's paging pools."""
        root = os.path.join(self.root, name)
        os.makedirs(os.path.join(root, 'profiles'), exist_ok=True)
        sim = simhost.SimHost(root, hardware, profile or profiles.builtin(),
                              clock=self.clock, tdp=tdp)
        for vm_spec in vm_specs:
            sim.start_vm(vm_spec)
        if stock:
            conf = agent_conf_for(root, sim.libvirt_uri, count_all=count_all,
                                  pool=pool)
            agent = service.Agent(
                conf, generation,
                transport=StockTransport(sim.model),
                counters=lambda pid: TraceCounters(sim, pid),
                clock=sim.now_s)
            if balloon:
                agent.domains = SimBalloon(agent.domains, sim)
        else:
            agent = service.Agent(
                agent_conf_for(root, sim.libvirt_uri, count_all=count_all),
                generation, transport=sim.model, clock=sim.now_s)
        registry = CollectorRegistry()
        registry.register(collector.Collector(agent))
        self.members.append(Member(name, sim, agent, registry))
        return self.members[-1]

    def member(self, name):
        return next(m for m in self.members if m.name == name)

    def migrate(self, domain, source, destination, stall_ns=0):
        """Live-migrate ``domain`` between two members (names), its
        workload going on after ``stall_ns`` of modeled cost.  Both
        agents reconnect to libvirt, as its migration events would make
        them look (a test driver's file is read at connect)."""
        src, dst = self.member(source), self.member(destination)
        vm = src.sim.migrate_vm(domain)
        dst.sim.adopt_vm(vm, stall_ns)
        for m in (src, dst):
            m.agent.domains.close()
            m.agent.reconcile()

    def step(self, seconds):
        """``seconds`` of modeled time, then one read by every agent."""
        self.clock.ns += int(seconds * 1e9)
        for m in self.members:
            m.sim.tick()
            m.agent.sample()

    def run(self, seconds, agent_interval_s=5, scrape_s=60, epoch=0.0,
            sink=None):
        """Advance every host ``seconds`` of modeled time; each agent
        samples every ``agent_interval_s`` and is scraped every
        ``scrape_s`` (``sink(text)`` gets the OpenMetrics lines)."""
        for m in self.members:
            m.agent.reconcile()
        end = self.clock.ns + int(seconds * 1e9)
        next_scrape = self.clock.ns
        while self.clock.ns < end:
            self.step(agent_interval_s)
            if sink is not None and self.clock.ns >= next_scrape:
                stamp = epoch + self.clock.ns / 1e9
                for m in self.members:
                    sink(scrape_lines(m, stamp))
                next_scrape += int(scrape_s * 1e9)


def scrape_lines(member, stamp):
    """One scrape of ``member``'s agent as OpenMetrics samples with the
    labels Prometheus adds (job, instance) and a timestamp."""
    target = {'job': Q.AGENT_JOB,
              Q.HOST: '%s:%d' % (member.name, AGENT_PORT)}
    out = []
    for fam in member.registry.collect():
        for s in fam.samples:
            if s.name.endswith('_created'):
                continue
            labels = dict(s.labels)
            labels.update(target)
            body = ','.join('%s="%s"' % (k, _escape(str(v)))
                            for k, v in sorted(labels.items()))
            line = '%s{%s} %r %.3f' % (s.name, body, float(s.value), stamp)
            out.append((s.name, line))
    up = ','.join('%s="%s"' % kv for kv in sorted(target.items()))
    out.append(('up', 'up{%s} 1 %.3f' % (up, stamp)))
    return out


def _escape(value):
    return value.replace('\\', '\\\\').replace('"', '\\"').replace(
        '\n', '\\n')


def openmetrics(scrapes):
    """OpenMetrics text of scrape_lines() batches: each series name a
    family of its own (type unknown), samples in time order."""
    by_name = {}
    for batch in scrapes:
        for name, line in batch:
            by_name.setdefault(name, []).append(line)
    parts = []
    for name in sorted(by_name):
        parts.append('# TYPE %s unknown\n' % name)
        parts.extend(line + '\n' for line in by_name[name])
    parts.append('# EOF\n')
    return ''.join(parts)


def truths():
    """The simulated generations' true cost profiles (modeled)."""
    from nova_adaptive_paging.costmodel import hardware
    here = os.path.join(os.path.dirname(__file__), 'data', 'fleet')
    return [hardware.resolve(os.path.join(here, name))
            for name in sorted(os.listdir(here)) if name.endswith('.yaml')]


# Each host's guests: (flavor's hw:paging, shipped trace).  Fixed-policy
# guests give the per-event costs (faults paid in shadow, walks in hap);
# adaptive guests on phase-changing traces switch.
GUESTS = (('shadow', 'fork-exec'), ('hap', 'mcf'),
          ('adaptive', 'phases-tlb-fault'), ('adaptive', 'phases-irregular'),
          ('adaptive', 'libquantum-bursts'), ('adaptive', 'gcc'))


def build(root, hosts_per_generation=2, guests=GUESTS, advisory=0):
    """A :class:`Fleet` of every truth() generation, and ``advisory``
    stock-kernel hosts of the first one (their agents only advise), in
    the paging pools: hap, shadow, hap, ..."""
    from nova_adaptive_paging.costmodel import traces
    shipped = traces.builtin()
    fleet = Fleet(root)
    for hw in truths():
        for h in range(hosts_per_generation):
            name = '%s-%d' % (hw.generation, h + 1)
            specs = [simhost.VmSpec(
                '%s-vm%d' % (name, i + 1), shipped[trace],
                {'hw:paging': policy}, flavor='m1.%s' % policy)
                for i, (policy, trace) in enumerate(guests)]
            fleet.add_host(name, hw, hw.generation, specs)
    hw = truths()[0]
    for h in range(advisory):
        name = '%s-stock-%d' % (hw.generation, h + 1)
        specs = [simhost.VmSpec(
            '%s-vm%d' % (name, i + 1), shipped[trace],
            {'hw:paging': 'adaptive'}, flavor='m1.adaptive', balloon=True,
            guest_faults=False)
            for i, trace in enumerate(('phases-tlb-fault', 'mcf'))]
        fleet.add_host(name, hw, hw.generation, specs, stock=True,
                       tdp=(h % 2 == 0), balloon=True, pool=True)
    return fleet


def main(argv=None):
    """``python -m nova_adaptive_paging.simhost.scraped_fleet OUT SECONDS END
    [HOSTS]``: simulate, write OUT in OpenMetrics with the last scrape
    at END (Unix time).  A process of its own: the agents run libvirt's
    event loop in threads, which eventlet-patched test processes (Nova's
    functional framework) cannot host."""
    import sys
    import tempfile
    args = (argv or sys.argv)[1:]
    out, seconds, end = args[0], float(args[1]), float(args[2])
    hosts = int(args[3]) if len(args) > 3 else 2
    with tempfile.TemporaryDirectory() as root:
        fleet = build(root, hosts)
        scrapes = []
        fleet.run(seconds, scrape_s=30, epoch=end - seconds,
                  sink=scrapes.append)
    with open(out, 'w', encoding='utf-8') as f:
        f.write(openmetrics(scrapes))


if __name__ == '__main__':
    main()
