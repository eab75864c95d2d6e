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

"""``nova-paging sim-host`` and ``nova-paging sim-vm``: a simulated host.

``sim-host`` lays out a compute node under ``--root`` (see
:mod:`nova_adaptive_paging.simhost.host`), serves the switching interface's
files under ``<root>/sys`` with FUSE and runs the VMs until it is
stopped (SIGTERM, SIGINT) or ``--duration`` has passed.  While it runs,
``sim-vm start|stop|migrate --root DIR`` starts and removes VMs through
a spool directory, ``<root>/.sim/control``.
"""

import itertools
import sys

import click

from nova_adaptive_paging import capabilities
from nova_adaptive_paging.cmd import common
from nova_adaptive_paging.cmd import simulate as simcmd
from nova_adaptive_paging import costmodel
from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import profiles
from nova_adaptive_paging.simhost import control
from nova_adaptive_paging.simhost import host as simhost
from nova_adaptive_paging import vocabulary


@click.command('sim-host')
@click.option('--root', required=True, type=click.Path(file_okay=False),
              help='Directory to lay the simulated node out under.')
@click.option('--hardware', 'hw_name', default='nehalem',
              show_default=True, help=simcmd.HARDWARE_HELP)
@click.option('--thresholds', type=click.Path(dir_okay=False),
              help='Threshold profile for the host-wide parameters '
                   '(default: the built-in profile).')
@click.option('--vms', default=1, show_default=True,
              type=click.IntRange(0, 10000), help='VMs to start with.')
@click.option('--trace', 'trace_refs', multiple=True,
              help='Traces (shipped names or files) the initial VMs cycle '
                   'through (default: all shipped traces).')
@click.option('--paging', 'pagings', multiple=True,
              type=click.Choice(vocabulary.POLICIES + ('none',)),
              help='hw:paging extra specs the initial VMs cycle through '
                   '(default: adaptive; none: no extra spec).')
@click.option('--speed', default=1.0, show_default=True,
              type=click.FloatRange(min=0.001),
              help='Simulated seconds per real second.')
@click.option('--duration', type=click.FloatRange(min=0),
              help='Stop after this many real seconds.')
@click.option('--no-fuse', is_flag=True,
              help='Do not mount: run the VMs and lay out the libvirt '
                   'files only (no ABI files are served).')
def sim_host(root, hw_name, thresholds, vms, trace_refs, pagings, speed,
             duration, no_fuse):
    """Run a simulated KVM host under ROOT (modeled)."""
    hw = common.resolve_hardware(hw_name)
    profile = (profiles.load(thresholds) if thresholds
               else profiles.builtin())
    refs = list(trace_refs) or [p.name[:-4]
                                for p in traces.builtin_paths()]
    loaded = [traces.resolve(r) for r in refs]
    host = simhost.SimHost(root, hw, profile, speed)
    cycle = zip(range(vms), itertools.cycle(loaded),
                itertools.cycle(pagings or [vocabulary.ADAPTIVE]))
    specs = [simhost.VmSpec('instance-%08x' % (i + 1), trace,
                            {} if paging == 'none' else
                            {'hw:paging': paging})
             for i, trace, paging in cycle]
    click.echo('%s; simulated host under %s, libvirt URI %s, %d VM(s)'
               % (costmodel.MODELED_NOTE, host.root, host.libvirt_uri, vms),
               err=True)
    control.serve(host, specs, duration, fuse=not no_fuse)


@click.group('sim-vm')
def sim_vm():
    """Start, stop or migrate away VMs of a running sim-host."""


TIMEOUT = click.option('--timeout', default=10.0, show_default=True,
                       help='Seconds to wait for the sim-host.')
ROOT = click.option('--root', required=True,
                    type=click.Path(file_okay=False))


@sim_vm.command('start')
@ROOT
@TIMEOUT
@click.argument('name')
@click.option('--trace', 'trace_ref', required=True,
              help='Shipped trace name or trace file.')
@click.option('--extra-spec', 'extra', multiple=True, metavar='KEY=VALUE',
              help='Flavor extra spec, e.g. hw:paging=adaptive.')
@click.option('--flavor', default='m1.sim', show_default=True)
@click.option('--no-shadow', is_flag=True,
              help='The VM cannot run in shadow mode.')
def sim_vm_start(root, timeout, name, trace_ref, extra, flavor, no_shadow):
    """Start domain NAME running a trace."""
    # Refused here, as Nova would refuse the flavor (its API a bad value,
    # its scheduler keys that contradict each other), before any request
    # reaches the sim-host.
    specs = common.key_values(extra)
    capabilities.flavor_policy(specs)
    control.request(root, {'op': 'start', 'name': name, 'trace': trace_ref,
                           'extra_specs': specs, 'flavor': flavor,
                           'can_shadow': not no_shadow}, timeout)


def _removal(op, doc):
    @sim_vm.command(op, help=doc)
    @ROOT
    @TIMEOUT
    @click.argument('name')
    def command(root, timeout, name):
        control.request(root, {'op': op, 'name': name}, timeout)
    return command


sim_vm_stop = _removal('stop', 'Destroy domain NAME.')
sim_vm_migrate = _removal('migrate', 'Migrate domain NAME away (it leaves '
                          'this host).')


if __name__ == '__main__':    # pragma: no cover
    sim_host(sys.argv[1:])
