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

"""``nova-paging``: the operator's command line."""

import json
import sys

import click

from nova_adaptive_paging.abi import conformance
from nova_adaptive_paging.abi import spec
from nova_adaptive_paging import capabilities
from nova_adaptive_paging.cmd import calibration
from nova_adaptive_paging.cmd import common
from nova_adaptive_paging.cmd import flavor
from nova_adaptive_paging.cmd import host
from nova_adaptive_paging.cmd import profile
from nova_adaptive_paging.cmd import simulate
from nova_adaptive_paging.cmd import simulate_pools
from nova_adaptive_paging.cmd import switch_cost
from nova_adaptive_paging.cmd import telemetry
from nova_adaptive_paging import conf
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging import cpu
from nova_adaptive_paging import exception
from nova_adaptive_paging import profiles
from nova_adaptive_paging import host as hostiface
from nova_adaptive_paging.host import transport as host_transport
from nova_adaptive_paging import vocabulary

CONF = common.CONF
_fail = common.fail


@click.group(cls=common.Boundary,
             context_settings={'help_option_names': ['-h', '--help']},
             lazy={'demo': 'nova_adaptive_paging.cmd.demo:demo',
                   'sim-host': 'nova_adaptive_paging.cmd.sim_host:sim_host',
                   'sim-vm': 'nova_adaptive_paging.cmd.sim_host:sim_vm'})
@click.option('--config-file', 'config_files', multiple=True,
              type=click.Path(dir_okay=False),
              help='oslo.config file(s) with an [adaptive_paging] section.')
def main(config_files):
    """Adaptive paging (EPT/NPT <-> shadow) for OpenStack/KVM fleets."""
    args = []
    for path in config_files:
        args += ['--config-file', path]
    try:
        CONF(args, project='nova-adaptive-paging', default_config_files=[])
        conf.check_values(CONF)
    except Exception as exc:  # oslo.config's errors share no base class
        _fail('configuration %s: %s' % (', '.join(config_files) or
                                        '(defaults)', exc))


# -- policy ----------------------------------------------------------------
@main.group('policy')
def policy_group():
    """Flavor extra specs (hw:paging, hw:paging_interval, ...)."""


@policy_group.command('check')
@click.argument('specs', nargs=-1, required=True, metavar='KEY=VALUE...')
@click.option('--default-policy', type=click.Choice(vocabulary.POLICIES),
              help='Host default for a flavor without hw:paging '
                   '(default: [adaptive_paging] default_policy).')
def policy_check(specs, default_policy):
    """Validate flavor extra specs and print the policy they ask for.

    The flavor's trait keys are checked against its hw:paging: one that
    forbids what the policy needs is refused, as nova-api and the
    scheduler refuse it."""
    parsed = capabilities.flavor_policy(common.key_values(specs))
    resolved = parsed.resolve(default_policy
                              or CONF.adaptive_paging.default_policy)
    source = 'flavor' if parsed.paging is not None else 'host default'
    click.echo('hw:paging=%s (%s)' % (resolved.paging, source))
    if resolved.interval_s is not None:
        click.echo('interval: %d s' % resolved.interval_s)
    if resolved.profile is not None:
        click.echo('threshold profile: %s' % resolved.profile)


# -- thresholds ------------------------------------------------------------
@main.group('thresholds')
def thresholds_group():
    """DSP threshold profiles per CPU generation."""


@thresholds_group.command('show')
@click.option('--generation', metavar='KEY',
              help='CPU generation key (default: this host\'s).')
@click.option('--file', 'path', type=click.Path(dir_okay=False),
              help='Show this profile file instead.')
@click.option('--json', 'as_json', is_flag=True, help='Print JSON.')
def thresholds_show(generation, path, as_json):
    """Show the threshold profile a generation gets, with its provenance."""
    if path:
        profile = profiles.load(path)
        generation = profile.generation
        note = 'file %s' % path
    else:
        given = generation
        if generation is None:
            generation = common.configured_generation()
        generation = hardware.generation_key(generation)
        found = common.profile_set()
        if given is not None and not (cpu.is_generation_key(generation)
                                      or found.has(generation)):
            # A typo would otherwise show the fallback as if it applied.
            known = cpu.named_keys() | set(found.names())
            hint = exception.did_you_mean(generation, known)
            _fail('--generation %r: expected a CPU generation key as '
                  '"nova-paging cpu-generation" prints it (such as '
                  'intel-nehalem or intel-6-85)%s'
                  % (given, hint and '; ' + hint))
        profile = found.for_generation(generation)
        note = ('profile for %s' % generation if found.has(generation)
                else 'fallback: no profile for %s' % generation)
    abi_line = spec.ThresholdSet.from_profile(profile).format().strip()
    if as_json:
        doc = profile.to_dict()
        doc.update(requested_generation=generation, selection=note,
                   abi=abi_line)
        click.echo(json.dumps(doc, indent=2))
        return
    click.echo('generation:  %s (%s)' % (profile.generation, note))
    t = profile.to_dict()['thresholds']
    click.echo('FTLB  (TLB misses / 1000 insns):       upper %-8s lower %s'
               % (t['tlb_upper'], t['tlb_lower']))
    click.echo('FPF   (page faults / 1000 insns x1e7): upper %-8s lower %s'
               % (t['pf_upper'], t['pf_lower']))
    click.echo('P-to-T (FPF / FTLB):                   upper %-8s lower %s'
               % (t['pt_upper'], t['pt_lower']))
    click.echo('history: %d samples of %d s'
               % (profile.history_samples, profile.interval_s))
    p = profile.provenance
    click.echo('provenance: %s; %s; obtained %s; %d host(s), %d sample(s)'
               % (p.method, p.source or '-', p.obtained or '-', p.hosts,
                  p.samples))
    click.echo('kernel:  %s' % abi_line)


@thresholds_group.command('check')
@click.argument('paths', nargs=-1, required=True,
                type=click.Path(dir_okay=False))
def thresholds_check(paths):
    """Validate threshold profile files."""
    for path in paths:
        profile = profiles.load(path)
        click.echo('%s: ok (%s)' % (path, profile.generation))


# -- cpu ---------------------------------------------------------------------
@main.command('cpu-generation')
@click.option('--cpuinfo', default='/proc/cpuinfo', show_default=True,
              type=click.Path(dir_okay=False))
@click.option('--libvirt-model', help='libvirt host CPU model name.')
def cpu_generation(cpuinfo, libvirt_model):
    """Print this host's CPU generation key."""
    click.echo(common.detect_generation(cpuinfo, libvirt_model))


# -- abi ---------------------------------------------------------------------
@main.group('abi')
def abi_group():
    """The switching patch's interface."""


@abi_group.command('conformance')
@click.option('--root', required=True, type=click.Path(file_okay=False),
              help='Root of the interface\'s files: / on a patched host.')
@click.option('--vm', metavar='PID-FD', help='VM directory to exercise.')
def abi_conformance(root, vm):
    """Check an implementation of the interface against the spec."""
    transport = host_transport.for_root(root)
    version = spec.param_path(spec.PARAM_ABI)
    if not transport.exists(version):
        _fail('--root %s: not a root of the switching interface (no %s)'
              % (root, version))
    if vm is None and not hostiface.simulated(root):
        _fail('--root %s: not a simulated host: the suite changes the '
              'policy, mode and thresholds of the VM it exercises and the '
              'host-wide thresholds, so it touches no VM it was not given: '
              'start a test VM and name it with --vm PID-FD' % root)
    results = conformance.run(transport, vm)
    for name, error in results:
        click.echo('%s %s%s' % ('PASS' if error is None else 'FAIL', name,
                                '' if error is None else ': ' + error))
    failed = sum(1 for _, error in results if error is not None)
    click.echo('%d passed, %d failed' % (len(results) - failed, failed))
    sys.exit(1 if failed else 0)


abi_group.add_command(switch_cost.switch_cost)
main.add_command(flavor.flavor_group)
main.add_command(host.host_group)
main.add_command(simulate.simulate)
main.add_command(simulate.calibrate)
main.add_command(simulate_pools.simulate_pools)
main.add_command(telemetry.telemetry_group)
main.add_command(profile.profile)
main.add_command(calibration.calibration_group)

if __name__ == '__main__':
    main()
