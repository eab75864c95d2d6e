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

"""What the ``nova-paging`` command modules share."""

import contextlib
import importlib
import os
import select
import signal
import sys

import click

from nova_adaptive_paging import conf
from nova_adaptive_paging.costmodel import hardware
from nova_adaptive_paging import cpu
from nova_adaptive_paging import exception
from nova_adaptive_paging.host import vm as vmfiles
from nova_adaptive_paging import profiles

CONF = conf.CONF


def fail(message):
    """Print one ``error:`` line and exit 2."""
    click.echo('error: %s' % message, err=True)
    sys.exit(2)


def first_line(exc):
    """The first line of an exception's message (a client library's can
    run to many), or its type's name when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def os_error_line(exc):
    """``path: reason`` of an OSError, without Python's decoration."""
    where = exc.filename if exc.filename is not None else ''
    reason = exc.strerror or str(exc)
    return '%s: %s' % (where, reason) if where else reason


def _reader_gone(stream):
    """Whether ``stream`` is a pipe whose reader has closed it: poll(2)
    reports POLLERR on such a write end.  A broken pipe elsewhere (a
    helper's, a socket) is an error to report."""
    try:
        poller = select.poll()
        poller.register(stream.fileno(), 0)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError):
        return False


class Boundary(click.Group):
    """The one place where the package's errors become one line and an
    exit status: a known error (:class:`exception.Error`) or an OSError
    names its input and exits 2; Ctrl-C exits 130.  A traceback is left
    only for a bug."""

    def __init__(self, *args, lazy=None, **kwargs):
        super().__init__(*args, **kwargs)
        # name -> 'module:attribute' of a command imported on first use:
        # what the simulated host needs is never imported on a compute
        # node that runs only the host commands.
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx, name):
        if name in self.lazy and name not in self.commands:
            module, attr = self.lazy[name].split(':')
            self.add_command(getattr(importlib.import_module(module),
                                     attr), name)
        return super().get_command(ctx, name)

    def main(self, *args, standalone_mode=True, **kwargs):
        """Click's own handling, but a usage error is one ``error:`` line
        too, naming the command whose --help says more."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            # Not standalone, click returns ctx.exit()'s code instead of
            # exiting with it.
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as exc:
            path = exc.ctx.command_path if exc.ctx else self.name
            fail('%s (see %s --help)' % (exc.format_message(), path))
        except click.ClickException as exc:
            click.echo('error: %s' % exc.format_message(), err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo('error: interrupted', err=True)
            sys.exit(130)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except exception.Error as exc:
            fail(str(exc))
        except BrokenPipeError as exc:
            if not _reader_gone(sys.stdout):
                fail(os_error_line(exc))
            # A reader that stopped early (``| head``) is no error to
            # report: click ends such a command quietly, status 1.
            raise
        except OSError as exc:
            fail(os_error_line(exc))
        except KeyboardInterrupt:
            click.echo('error: interrupted', err=True)
            sys.exit(130)


def key_values(items, what='KEY=VALUE'):
    """``KEY=VALUE`` arguments as a dict; an item without ``=``, with an
    empty key or whose key came before is an error, never a silent
    last-one-wins."""
    found = {}
    for item in items:
        key, sep, value = item.partition('=')
        if not sep or not key.strip():
            fail('%r: expected %s with a non-empty KEY' % (item, what))
        if key in found:
            fail('%s given twice (%r, then %r): give each key once'
                 % (key, found[key], value))
        found[key] = value
    return found


def vm_options(what):
    """``--root``, ``--vm`` and ``--domain``: the VM a command works on,
    given one way or the other (:func:`resolve_vm`)."""
    def wrap(command):
        for option in reversed((
                click.option('--root', default='/', show_default=True,
                             type=click.Path(file_okay=False),
                             help='Root of the interface\'s files.'),
                click.option('--vm', metavar='PID-FD', help='%s: QEMU\'s '
                             'pid and its VM descriptor (the debugfs '
                             'directory name).' % what),
                click.option('--domain', metavar='NAME', help='%s: its '
                             'libvirt domain (its QEMU pid file gives the '
                             'VM).' % what))):
            command = option(command)
        return command
    return wrap


def resolve_vm(root, transport, vm, domain):
    """The VM directory of ``--vm`` or of ``--domain``, exactly one."""
    if bool(vm) == bool(domain):
        fail('give exactly one of --vm and --domain')
    return vm or vmfiles.vm_for_domain(root, transport, domain)


def resolve_hardware(name):
    """A hardware cost profile by shipped name, generation key or file,
    or one of the simulated fleet's generations (the demo's: invented
    costs), so every generation the demo shows can be simulated too.
    The simulated fleet is imported only when asked for."""
    try:
        return hardware.resolve(name)
    except hardware.HardwareError as exc:
        if os.path.exists(name):
            raise
        from nova_adaptive_paging.simhost import scraped_fleet
        fleet = scraped_fleet.truths()
        for hw in fleet:
            if name in (hw.generation, hw.name):
                return hw
        raise hardware.HardwareError(name, '(file)', '%s, nor a generation '
                                     'of the simulated fleet (%s)' % (
                                         exc.problem, ', '.join(sorted(
                                             hw.generation for hw in fleet)))
                                     ) from None


def profile_set():
    """Built-ins plus the configured directories; a bad file is reported
    and left out on its own."""
    found = profiles.ProfileSet()
    paths = profiles.paths_in(CONF.adaptive_paging.profile_dirs)
    for exc in found.reload(paths):
        click.echo('warning: %s' % exc.left_out(), err=True)
    return found


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM ends the block like Ctrl-C (KeyboardInterrupt), so a
    measurement puts its VM back on either."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt()
    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def configured_generation():
    """[adaptive_paging] cpu_generation, else the CPU of host_root."""
    return CONF.adaptive_paging.cpu_generation or detect_generation(
        cpu.cpuinfo_path(CONF.adaptive_paging.host_root))


def detect_generation(cpuinfo='/proc/cpuinfo', libvirt_model=None):
    try:
        return cpu.host_generation(cpuinfo, libvirt_model)
    except (OSError, ValueError) as exc:
        fail('cannot read the host CPU: %s' % exc)
