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

"""Files written whole or not at all."""

import os
import tempfile


def _umask():
    """The process's umask.  Read from /proc (Linux 4.7 and later)
    rather than with os.umask(), which sets it: a file another thread
    created meanwhile would get the wrong mode."""
    try:
        with open('/proc/self/status', encoding='ascii') as f:
            for line in f:
                if line.startswith('Umask:'):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode(path):
    """The mode open(path, 'w') leaves a file with: an existing file's
    own, else 0666 less the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def atomic_write(path, content=None, writer=None, binary=False):
    """Replace ``path`` with ``content`` (or what ``writer(file)`` writes):
    a temporary file beside it, flushed to disk and renamed over it, so a
    reader sees the old file or the new one, never half of one.  An
    OSError names ``path``, not the temporary file."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.'
                                   % os.path.basename(path), suffix='.tmp')
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None
    try:
        # mkstemp makes the file 0600 whatever the umask: give it the
        # mode open() would have, so that a profile written for the
        # agent's user can be read by it.
        os.fchmod(fd, file_mode(path))
        with os.fdopen(fd, 'wb' if binary else 'w',
                       **({} if binary else {'encoding': 'utf-8'})) as f:
            if writer is not None:
                writer(f)
            else:
                f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, path) from None
        raise


def check_writable(path):
    """Raise OSError naming ``path`` unless a file can be created there."""
    directory = os.path.dirname(os.path.abspath(path)) or '.'
    if not os.path.isdir(directory):
        raise OSError(2, 'no such directory %s' % directory, path)
    if not os.access(directory, os.W_OK):
        raise OSError(13, 'directory %s is not writable' % directory, path)
