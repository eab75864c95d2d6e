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

"""A calibration guest on the simulated host (MODELED; a test and demo
fixture).

No machine here runs a KVM guest whose paging mode costs anything, so
this stands in for ``ssh calibration-guest``: it runs the calibration
benchmark natively on this machine (its events and elapsed time are
real), then adds what the events would have cost the guest in the mode
its simulated VM is in, from the simulated host's hardware profile, and
labels the figures modeled::

    python -m nova_adaptive_paging.simhost.guest_bench \\
        --root ROOT --domain NAME --hardware HW -- nap-tlb-chase ...
"""

import argparse
import json
import subprocess
import sys

from nova_adaptive_paging.abi import spec
from nova_adaptive_paging.costmodel import hardware as costhw
from nova_adaptive_paging.host import calibration_runs
from nova_adaptive_paging.host import files
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging.tuning import cost_fit
from nova_adaptive_paging import vocabulary


def modeled(result, mode, hw):
    """``result`` with the mode's modeled extra time added."""
    extra = (result['minflt'] * hw.cost_s(mode, vocabulary.EVENT_PAGE_FAULT)
             + cost_fit.misses(result)
             * hw.cost_s(mode, vocabulary.EVENT_TLB_MISS))
    out = dict(result, elapsed_s=result['elapsed_s'] + extra,
               native_elapsed_s=result['elapsed_s'], mode=mode,
               modeled='native run on the build machine plus the %s '
               'mode costs of hardware profile %s' % (mode, hw.name))
    if calibration_runs.CPU_FIELD in result:
        # The modeled events are the vCPU's own work: CPU time too.
        cpu = calibration_runs.CPU_FIELD
        out[cpu] = result[cpu] + extra
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--root', required=True)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument('--vm')
    which.add_argument('--domain')
    parser.add_argument('--hardware', required=True)
    parser.add_argument('command', nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = [c for c in args.command if c != '--']
    hw = costhw.resolve(args.hardware)
    transport = files.FileTransport(args.root)
    vm = args.vm or vmfiles.vm_for_domain(args.root, transport, args.domain)
    mode = vmfiles.Vm(transport, vm).word(spec.FILE_MODE)
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    if done.returncode:
        return done.returncode
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(modeled(result, mode, hw)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
