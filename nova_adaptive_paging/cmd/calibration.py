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

"""``nova-paging calibration``: run the calibration microbenchmarks in a
calibration guest on this host, and fit per-generation thresholds from
the results of many hosts (the Ansible collection's ``calibrate`` role
runs both)."""

import json
import os

import click

from nova_adaptive_paging.cmd import common
from nova_adaptive_paging import costmodel
from nova_adaptive_paging import atomic_file
from nova_adaptive_paging import host as hostiface
from nova_adaptive_paging.host import calibration_runs
from nova_adaptive_paging.host import transport as host_transport
from nova_adaptive_paging.tuning import cost_fit


@click.group('calibration')
def calibration_group():
    """Calibration runs on real hosts, and thresholds fitted from them."""


@calibration_group.command('measure')
@common.vm_options('The calibration VM')
@click.option('--bin-dir', required=True, metavar='DIR',
              help='Where nap-tlb-chase and nap-fault-churn are, as the '
              'command prefix sees it (in the guest).')
@click.option('--exec', 'prefix', default='', metavar='PREFIX',
              help='Command prefix that runs a program in the calibration '
              'guest, e.g. "ssh -o BatchMode=yes calib@192.0.2.10".')
@click.option('--tlb-args', default='', help='Arguments of nap-tlb-chase.')
@click.option('--fault-args', default='',
              help='Arguments of nap-fault-churn.')
@click.option('--repeats', default=3, show_default=True,
              type=click.IntRange(1, 100), help='Runs of each kind.')
@click.option('--host-name', help='Host name recorded (default: this '
              'host\'s).')
@click.option('--out', required=True, type=click.Path(dir_okay=False),
              help='Results file (JSON) to write.')
def measure(root, vm, domain, bin_dir, prefix, tlb_args, fault_args,
            repeats, host_name, out):
    """Run both benchmarks with the VM in hap, in shadow and with a
    round trip; the VM is put back as it was."""
    atomic_file.check_writable(out)
    transport = host_transport.for_root(root)
    vm = common.resolve_vm(root, transport, vm, domain)
    with common.sigterm_as_interrupt():
        try:
            doc = calibration_runs.measure(
                transport, vm, bin_dir, prefix, repeats,
                {calibration_runs.TLB: tlb_args,
                 calibration_runs.FAULT: fault_args},
                root=root, host=host_name,
                echo=lambda line: click.echo(line, err=True))
        except KeyboardInterrupt:
            common.fail('interrupted; the VM\'s policy was restored')
    doc['modeled'] = doc['modeled'] or hostiface.simulated(root)
    atomic_file.atomic_write(out, json.dumps(doc, indent=1) + '\n')
    click.echo('%s: %d runs on VM %s, generation %s%s' % (
        out, len(doc['runs']), vm, doc['generation'],
        ' (%s)' % costmodel.MODELED_NOTE if doc['modeled'] else ''))


@calibration_group.command('fit')
@click.argument('results', nargs=-1, required=True,
                type=click.Path(dir_okay=False))
@click.option('--out', required=True, type=click.Path(file_okay=False),
              help='Directory for one threshold profile per generation.')
def fit(results, out):
    """Fit per-event and switching costs per CPU generation from
    RESULTS files and write OUT/<generation>.yaml for each."""
    documents = []
    for path in results:
        try:
            with open(path, encoding='utf-8') as f:
                documents.append((path, json.load(f)))
        except ValueError as exc:
            common.fail('%s: not JSON (%s); expected the file "nova-paging '
                        'calibration measure" writes' % (path, exc))
    fitted = cost_fit.fit(documents)
    os.makedirs(out, exist_ok=True)
    for gen, (profile, hosts, costs) in fitted.items():
        path = os.path.join(out, '%s.yaml' % gen)
        atomic_file.atomic_write(path, profile.dump())
        click.echo('%s: %d host(s); %.4g us per fault (shadow), %.4g ns '
                   'per TLB miss (hap), %.4g us per switch' % (
                       path, len(hosts), costs.fault_s * 1e6,
                       costs.miss_s * 1e9, costs.switch_s * 1e6))
