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

"""The simulated host's control spool and its run loop.

``nova-paging sim-vm`` drops a request (JSON) into ``<root>/.sim/control``;
the running sim-host handles it and leaves ``.done`` or ``.failed`` with
the reason.  A test and demo fixture, like the rest of the package.
"""

import json
import os
import signal
import threading
import time

from nova_adaptive_paging.costmodel import traces
from nova_adaptive_paging import exception
from nova_adaptive_paging import atomic_file
from nova_adaptive_paging import host as hostiface
from nova_adaptive_paging.simhost import fusefs
from nova_adaptive_paging.simhost import host as simhost


class ControlError(exception.Error):
    """A sim-vm request that the sim-host refused or did not answer."""


CONTROL_DIR = os.path.join(hostiface.SIMULATED_MARKER, 'control')
STATUS_FILE = os.path.join(hostiface.SIMULATED_MARKER, 'status.json')
POLL_S = 0.25       # how often the control spool is looked at
BATCH_S = 0.1       # samples due within this are taken together
STATUS_S = 5.0


def vm_spec(request):
    """A VmSpec from a control request (a dict)."""
    return simhost.VmSpec(
        name=request['name'], trace=traces.resolve(request['trace']),
        extra_specs=dict(request.get('extra_specs', {})),
        flavor=request.get('flavor', 'm1.sim'),
        uuid=request.get('uuid', ''),
        memory_mib=int(request.get('memory_mib', 1024)),
        can_shadow=bool(request.get('can_shadow', True)),
        guest_faults=bool(request.get('guest_faults', True)))


def handle(host, request):
    op = request.get('op')
    if op == 'start':
        host.start_vm(vm_spec(request))
    elif op in ('stop', 'migrate'):
        if request.get('name') not in host.vms:
            raise ValueError('no running domain %r' % request.get('name'))
        host.stop_vm(request['name'], 'stopped' if op == 'stop'
                     else 'migrated')
    else:
        raise ValueError('unknown op %r' % (op,))


def process_control(host):
    """Run the spooled requests in name order; leave .done or .failed."""
    spool = os.path.join(host.root, CONTROL_DIR)
    for entry in sorted(os.listdir(spool)):
        if not entry.endswith('.json'):
            continue
        path = os.path.join(spool, entry)
        try:
            with open(path, encoding='utf-8') as f:
                handle(host, json.load(f))
            outcome, text = '.done', ''
        except (OSError, ValueError, KeyError, TypeError,
                traces.TraceError) as exc:
            outcome, text = '.failed', str(exc)
        with open(path[:-5] + outcome, 'w', encoding='utf-8') as f:
            f.write(text)
        os.unlink(path)


def run_loop(host, stop, duration):
    status = os.path.join(host.root, STATUS_FILE)
    end = time.monotonic() + duration if duration else None
    written = 0.0
    while not stop.is_set():
        process_control(host)
        host.tick()
        now = time.monotonic()
        if now - written >= STATUS_S:
            atomic_file.atomic_write(status, json.dumps(host.status()))
            written = now
        if end is not None and now >= end:
            break
        due = host.next_due_ns()
        wait = POLL_S
        if due is not None:
            wait = min(wait, max(BATCH_S, (due - host.now_ns()) / 1e9
                                 / host.speed))
        stop.wait(wait)


def serve(host, specs, duration=None, fuse=True):
    """Lay ``host`` out, start ``specs`` and run it until SIGTERM, SIGINT
    or ``duration`` real seconds, serving the interface's files with FUSE
    unless ``fuse`` is false; raises ControlError if they cannot be
    served."""
    os.makedirs(os.path.join(host.root, CONTROL_DIR), exist_ok=True)
    mountpoint = os.path.join(host.root, fusefs.MOUNT_DIR)
    os.makedirs(mountpoint, exist_ok=True)
    host.write_layout()
    for spec in specs:
        host.start_vm(spec)
    stop = threading.Event()
    mounted = threading.Event()

    def loop():
        while fuse and not mounted.is_set() and not stop.is_set():
            if os.path.ismount(mountpoint):
                mounted.set()
            else:
                stop.wait(0.05)
        run_loop(host, stop, duration)
        if fuse:
            os.kill(os.getpid(), signal.SIGTERM)   # ends the FUSE loop
    ticker = threading.Thread(target=loop, daemon=True)
    ticker.start()
    if not fuse:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while ticker.is_alive():
                ticker.join(0.5)
        except KeyboardInterrupt:
            stop.set()
        return
    try:
        fusefs.serve(host, mountpoint)
    except Exception as exc:  # libfuse reports failures without a type
        # libfuse also returns non-zero when a signal ends a served mount.
        if not mounted.is_set():
            stop.set()
            raise ControlError('cannot serve %s with FUSE: %s'
                               % (mountpoint, exc))
    stop.set()
    ticker.join(5)


def request(root, request, timeout):
    """Spool ``request`` for the sim-host under ``root`` and wait for its
    answer."""
    spool = os.path.join(root, CONTROL_DIR)
    if not os.path.isdir(spool):
        raise ControlError('%s: no sim-host spool here' % spool)
    stem = os.path.join(spool, '%020d-%d' % (time.time_ns(), os.getpid()))
    with open(stem + '.tmp', 'w', encoding='utf-8') as f:
        json.dump(request, f)
    os.replace(stem + '.tmp', stem + '.json')
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for outcome in ('.done', '.failed'):
            if os.path.exists(stem + outcome):
                with open(stem + outcome, encoding='utf-8') as f:
                    text = f.read()
                os.unlink(stem + outcome)
                if outcome == '.failed':
                    raise ControlError(text)
                return
        time.sleep(0.05)
    raise ControlError('sim-host did not answer within %g s' % timeout)
