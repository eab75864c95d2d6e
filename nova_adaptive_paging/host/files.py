"""The switching interface's files under a root directory."""

import os


class FileTransport:
    """Reads and writes the interface's files under ``root``."""

    def __init__(self, root):
        self.root = root

    def _path(self, rel):
        return os.path.join(self.root, rel)

    def read(self, rel):
        with open(self._path(rel), encoding='ascii') as f:
            return f.read()

    def write(self, rel, text):
        # One write(2) per value, unbuffered, as the kernel expects.
        fd = os.open(self._path(rel), os.O_WRONLY)
        try:
            os.write(fd, text.encode('ascii'))
        finally:
            os.close(fd)

    def listdir(self, rel):
        return os.listdir(self._path(rel))

    def exists(self, rel):
        return os.path.exists(self._path(rel))
