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

"""One agent per host.

Two agents driving one host would both write every guest's policy and
the host's thresholds, each undoing the other's view of what it wrote.
The agent takes an exclusive ``flock(2)`` on a file of its runtime
directory under the host's root (``/run/nova-paging-agent/agent.lock``
on a compute node, where systemd's RuntimeDirectory, or the Ansible
role in its pidfile mode, makes the directory) and holds it for its
life; the kernel drops it when the process ends, however it ends.  A
second agent exits 1 with one line naming the first one's pid.
"""

import errno
import fcntl
import os

from nova_adaptive_paging import exception

RUNTIME_DIR = 'run/nova-paging-agent'
LOCK_NAME = 'agent.lock'


class Held(exception.Error):
    """The host's lock is another's, or cannot be taken."""


def path_for(root):
    return os.path.join(root, RUNTIME_DIR, LOCK_NAME)


def acquire(root, path=None):
    """The open lock file of the host under ``root`` (``path``, if
    given); Held (one line) when another agent holds it or it cannot
    be made."""
    path = path or path_for(root)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise Held('%s: cannot take the host lock: %s (the agent\'s '
                   'runtime directory must exist and be its own)'
                   % (path, exc.strerror or exc))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
            os.close(fd)
            raise Held('%s: cannot take the host lock: %s'
                       % (path, exc.strerror or exc))
        try:
            other = os.read(fd, 32).decode('ascii', 'replace').strip()
        finally:
            os.close(fd)
        raise Held('another nova-paging-agent (pid %s) drives the host at '
                   '%s: it holds %s; one agent per host' % (
                       other or '?', root, path))
    os.ftruncate(fd, 0)
    os.write(fd, b'%d\n' % os.getpid())
    return fd
