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

"""Profile files as untrusted input.

A profile directory is the operator's, but what lies in it may not be:
a link somebody else made, a FIFO, a device, a file another user can
write.  The agent (which may run as root) reads a profile only when:

* the directory is not writable by every user (without the sticky bit
  anybody could replace its files);
* the file is a regular file, opened without blocking (a FIFO or a
  device is refused before it is read), of at most :data:`MAX_BYTES`;
* it is owned by root or by the agent's user, and not writable by every
  user;
* a symbolic link is followed only when root or the agent's user made
  it and the file it names has the link's owner (the rule of Linux's
  ``fs.protected_symlinks``): a link into another user's file is never
  read.  Every link met on the way is held to that rule, a directory's
  included (:func:`_follow`): a good link into a directory another
  user controls would otherwise lead through that user's own link to
  any file of the good link's owner.

A file refused is :class:`profiles.ProfileError` naming the file and
the reason, never its content.
"""

import errno
import os
import stat

from nova_adaptive_paging import profiles

# A profile is a few hundred bytes; a file this large is not one.
MAX_BYTES = 64 * 1024
# The kernel's own limit on the links of one path lookup (MAXSYMLINKS).
MAX_LINKS = 40


def trusted_owners():
    """The users whose files may hold the agent's profiles."""
    return {0, os.geteuid()}


def _owner(uid):
    return 'uid %d' % uid


def directory_problem(directory, owners=None):
    """Why no profile of ``directory`` can be trusted, or None."""
    owners = trusted_owners() if owners is None else owners
    try:
        st = os.stat(directory)
    except OSError:
        return None                 # nothing in it to read
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return ('%s: writable by every user (mode %04o), so anybody could '
                'have written its profiles' % (
                    directory, stat.S_IMODE(st.st_mode)))
    if st.st_uid not in owners:
        return ('%s: owned by %s, not by root or the agent\'s user'
                % (directory, _owner(st.st_uid)))
    return None


def _refuse(path, reason):
    return profiles.ProfileError(str(path), '(file)', reason)


def _follow(path, owners):
    """Where the link ``path`` leads, resolved one name at a time:
    every further link on the way (the target's, a directory's) must
    have been made by one of ``owners``, as the first one was; else
    ProfileError naming that link.  ``os.path.realpath`` would follow
    them all, whoever made them."""
    resolved = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    names = os.readlink(path).split('/')
    if not names[0]:
        resolved = '/'
    links = 1
    while names:
        name = names.pop(0)
        if name in ('', '.'):
            continue
        if name == '..':
            resolved = os.path.dirname(resolved)
            continue
        here = os.path.join(resolved, name)
        st = os.lstat(here)
        if not stat.S_ISLNK(st.st_mode):
            resolved = here
            continue
        links += 1
        if links > MAX_LINKS:
            raise _refuse(path, 'refused: more than %d symbolic links'
                          % MAX_LINKS)
        if st.st_uid not in owners:
            raise _refuse(path, 'refused: it leads through %s, a symbolic '
                          'link made by %s, not by root or the agent\'s '
                          'user' % (here, _owner(st.st_uid)))
        text = os.readlink(here)
        if text.startswith('/'):
            resolved = '/'
        names[:0] = text.split('/')
    return resolved


def read_text(path, owners=None, max_bytes=MAX_BYTES):
    """The text of the profile file ``path``; ProfileError (naming the
    file and why, nothing of its content) when it may not be read."""
    owners = trusted_owners() if owners is None else owners
    problem = directory_problem(os.path.dirname(os.path.abspath(path)),
                                owners)
    if problem:
        raise _refuse(path, 'refused: the directory %s' % problem)
    try:
        link = os.lstat(path)
    except OSError as exc:
        raise _refuse(path, exc.strerror or str(exc))
    target = path
    if stat.S_ISLNK(link.st_mode):
        if link.st_uid not in owners:
            raise _refuse(path, 'refused: a symbolic link made by %s, not '
                          'by root or the agent\'s user' % _owner(link.st_uid))
        try:
            target = _follow(path, owners)
        except OSError as exc:
            raise _refuse(path, exc.strerror or str(exc))
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW
                     | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, 'refused: a symbolic link that changed '
                          'while it was read')
        raise _refuse(path, exc.strerror or str(exc))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, 'refused: not a regular file')
        if target is not path and st.st_uid != link.st_uid:
            raise _refuse(path, 'refused: a symbolic link to a file of '
                          'another owner (%s)' % _owner(st.st_uid))
        if st.st_uid not in owners:
            raise _refuse(path, 'refused: owned by %s, not by root or the '
                          'agent\'s user' % _owner(st.st_uid))
        if st.st_mode & stat.S_IWOTH:
            raise _refuse(path, 'refused: writable by every user (mode '
                          '%04o)' % stat.S_IMODE(st.st_mode))
        if st.st_size > max_bytes:
            raise _refuse(path, 'refused: %d bytes, more than a profile\'s '
                          '%d' % (st.st_size, max_bytes))
        data = os.read(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise _refuse(path, 'refused: more than a profile\'s %d bytes'
                      % max_bytes)
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        raise _refuse(path, 'not UTF-8 text')


def load(path):
    """The checked file's profile (:func:`profiles.ProfileSet.reload`'s
    loader)."""
    return profiles.loads(read_text(path), str(path))
