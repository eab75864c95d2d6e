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

"""A Prometheus server from Debian's package, started for the demo, the
telemetry tests and the benchmark: in its own directory, on a free
loopback port, optionally backfilled (``promtool tsdb
create-blocks-from openmetrics``), stopped by :meth:`Server.stop`."""

import os
import shutil
import socket
import subprocess
import time

import requests
import yaml

from nova_adaptive_paging import exception

INSTALL = ('Prometheus is needed: on Debian or Ubuntu run "sudo apt-get '
           'install prometheus" (it brings promtool), or put a prometheus '
           'binary on PATH')


class PrometheusMissing(exception.Error):
    pass


class ServerError(exception.Error):
    pass


def binaries():
    """(prometheus, promtool) paths; PrometheusMissing without them."""
    found = [shutil.which(b) for b in ('prometheus', 'promtool')]
    if None in found:
        raise PrometheusMissing(INSTALL)
    return found


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, workdir, config=None, openmetrics=None,
                 ready_timeout=60, port=None):
        prometheus, promtool = binaries()
        self.workdir = workdir
        data = os.path.join(workdir, 'tsdb')
        if openmetrics is not None:
            source = os.path.join(workdir, 'backfill.om')
            with open(source, 'w', encoding='utf-8') as f:
                f.write(openmetrics)
            done = subprocess.run([promtool, 'tsdb', 'create-blocks-from',
                                   'openmetrics', source, data],
                                  capture_output=True, text=True)
            os.unlink(source)
            if done.returncode:
                raise ServerError('promtool could not backfill: %s'
                                  % done.stderr.strip()[-300:])
        path = os.path.join(workdir, 'prometheus.yml')
        with open(path, 'w', encoding='utf-8') as f:
            yaml.safe_dump(config or {'global': {'scrape_interval': '1m'}},
                           f, sort_keys=False)
        # A port given: a client configured before the server started.
        port = port or free_port()
        self.url = 'http://127.0.0.1:%d' % port
        self.log_path = os.path.join(workdir, 'prometheus.log')
        self._log = open(self.log_path, 'w')
        self.proc = subprocess.Popen(
            [prometheus, '--config.file=' + path,
             '--storage.tsdb.path=' + data,
             '--storage.tsdb.retention.time=3650d',
             '--web.listen-address=127.0.0.1:%d' % port],
            stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_ready(ready_timeout)
        except ServerError:
            self.stop()
            raise

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError('prometheus exited with status %d (see %s)'
                                  % (self.proc.returncode, self.log_path))
            try:
                if requests.get(self.url + '/-/ready', timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise ServerError('prometheus was not ready after %d s (see %s)'
                          % (timeout, self.log_path))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._log.closed:
            self._log.close()
