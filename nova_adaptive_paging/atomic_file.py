"""Files written whole or not at all."""

import os
import tempfile


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
