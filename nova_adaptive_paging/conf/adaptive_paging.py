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

from oslo_config import cfg

from nova_adaptive_paging import vocabulary

adaptive_paging_group = cfg.OptGroup(
    'adaptive_paging',
    title='Adaptive paging options',
    help="""
Options of nova-adaptive-paging on a compute node: which paging mode guests
get when their flavor does not say, where calibrated DSP threshold profiles
live, and where the switching patch's interface is found.
""")

policy_opts = [
    cfg.StrOpt('default_policy',
               mutable=True,
               default=vocabulary.Paging.HAP.value,
               choices=[
                   (vocabulary.Paging.HAP.value,
                    'Hardware-assisted paging (EPT/NPT), KVM\'s default'),
                   (vocabulary.Paging.SHADOW.value, 'Shadow paging'),
                   (vocabulary.Paging.ADAPTIVE.value,
                    'Let the switching patch choose at run time'),
               ],
               help="""
Paging policy the agent applies on this host to a guest whose flavor has
no ``hw:paging`` extra spec.

It is not a scheduling requirement: such a flavor asks nothing of paging
and may land on any host, with or without the agent. A flavor that needs
a mode says so with ``hw:paging`` and its trait (``nova-paging flavor
set``).
"""),
]

profile_opts = [
    cfg.ListOpt('profile_dirs',
                mutable=True,
                default=['/etc/nova-adaptive-paging/profiles'],
                help="""
Directories searched for DSP threshold profile files (``*.yaml``). A file
overrides the built-in profile of the same generation. A malformed file is
reported and ignored as a whole: the profiles in force before stay in force.
"""),
    cfg.StrOpt('cpu_generation',
               help="""
CPU generation key of this host (for example ``intel-icelake-server``),
used to pick its threshold profile. Unset means detect it from
``/proc/cpuinfo`` and the libvirt host CPU model. A generation without a
profile uses the built-in ``intel-nehalem`` profile.
"""),
    cfg.BoolOpt('count_all_guests',
                mutable=True,
                default=False,
                help="""
Have the kernel count the instructions and TLB misses of every guest on
this host (kvm's ``dsp_pmu_all``), not only of those under the
``adaptive`` policy. The profiler needs them to learn a CPU generation's
per-event costs from guests that stay in one mode. A counted guest's vCPU
threads hold hardware counters that its own virtual PMU then cannot use:
set this on the hosts that profile, not on the whole fleet. The agent
brings the parameter to this value at every pass; a kernel that cannot
honour ``True`` is reported as ``agent_errors_total{kind="counters"}``.
"""),
    cfg.BoolOpt('count_walk_cycles',
                mutable=True,
                default=True,
                help="""
Have the kernel count the cycles of the guests' page walks (kvm's
``dsp_walk_events``) with the PMU events this host's CPU generation has
for them (``nova-paging host capabilities`` names them, or says why there
are none). The profiler divides them by the TLB misses to learn what a
miss costs hap paging. They take two more hardware counters per counted
vCPU, which the guest's own virtual PMU then cannot use; ``False`` frees
them.
"""),
]

decision_opts = [
    cfg.StrOpt('decision',
               mutable=True,
               default=vocabulary.DECIDED_BY_KERNEL,
               choices=[
                   (vocabulary.DECIDED_BY_KERNEL,
                    "the kernel's engine decides (policy adaptive)"),
                   (vocabulary.DECIDED_BY_AGENT,
                    'the agent decides and sets policy hap or shadow'),
               ],
               help="""
Where an adaptive guest's paging mode is decided. ``kernel``: the agent
writes ``adaptive`` and the kernel's engine (the series' policy patches)
switches the guest. ``agent``: for a kernel with the switching mechanism
only, the agent runs the same decision and switch guard (``dsp.py``) on
each adaptive guest's guest-only instruction and TLB-miss counts and its
balloon page-fault count, every ``[agent] interval``, and switches the
guest through the mechanism's own control, ``KVM_SET_PAGING_MODE`` on
its VM descriptor (on a kernel with the text interface, the same as
writing ``hap`` or ``shadow`` to its ``paging_policy``). The kernel then
counts those switches in the guest's statistics as it counts any
other. Needs the guest-only perf counters the agent's advisory mode
uses (``nova-paging host capabilities`` says whether the host has them).
"""),
    cfg.StrOpt('decision_samples_dir',
               mutable=True,
               help="""
Test hook, as the kernel's ``dsp_inject``: with ``decision = agent``, take
each adaptive guest's counts from the file ``<this directory>/<domain
name>`` (three cumulative decimal counts: guest instructions, TLB misses,
page faults) instead of the PMU and the balloon, for emulated hosts that
have no PMU. Never set on a production host.
"""),
]

pool_opts = [
    cfg.BoolOpt('pool',
                mutable=True,
                default=False,
                help="""
This host, whose kernel cannot switch, is in the fleet's hap or shadow
pool (its ``kvm_intel ept=`` or ``kvm_amd npt=`` decides which; a PVM
host, ``kvm_pvm``, is always in the shadow pool): it then
publishes ``CUSTOM_PAGING_POOL`` and takes guests whose flavor asks for
``hw:paging=adaptive`` in pools (``nova-paging flavor set --pools``),
which the ``paging_fit`` Watcher strategy moves to the pool that suits
them (doc/source/stock-fleet.rst).  Hosts that switch publish the trait
whatever this says.
"""),
]

host_opts = [
    cfg.StrOpt('host_root',
               default='/',
               help="""
Root under which the switching patch's files are found
(``sys/module/kvm/parameters`` and ``sys/kernel/debug/kvm``) and the
host's ``proc/cpuinfo`` (its CPU generation). ``/`` on a
real compute node; a simulated host's directory in tests and demos.
"""),
    cfg.StrOpt('libvirt_uri',
               default='qemu:///system',
               help="""
libvirt connection URI of the local hypervisor.
"""),
]

ALL_OPTS = (policy_opts + profile_opts + decision_opts + pool_opts
            + host_opts)


def register_opts(conf):
    conf.register_group(adaptive_paging_group)
    conf.register_opts(ALL_OPTS, group=adaptive_paging_group)


def list_opts():
    return {adaptive_paging_group: ALL_OPTS}
