"""A real Prometheus (Debian's package) for the telemetry tests:
backfilled with ``promtool tsdb create-blocks-from openmetrics`` and
started on a free loopback port, stopped by the fixture."""

import os
import shutil
import socket
import subprocess
import time

import pytest
import requests


def binaries():
    found = [shutil.which(b) for b in ('prometheus', 'promtool')]
    if None in found:
        if os.environ.get('NAP_REQUIRE_PROMETHEUS'):
            pytest.fail('prometheus/promtool missing: apt-get install '
                        'prometheus')
        pytest.skip('Debian\'s prometheus package is not installed')
    return found


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, workdir, openmetrics_text):
        prometheus, promtool = binaries()
        self.data = os.path.join(workdir, 'tsdb')
        source = os.path.join(workdir, 'fleet.om')
        with open(source, 'w', encoding='utf-8') as f:
            f.write(openmetrics_text)
        subprocess.run([promtool, 'tsdb', 'create-blocks-from',
                        'openmetrics', source, self.data], check=True,
                       capture_output=True, text=True)
        config = os.path.join(workdir, 'prometheus.yml')
        with open(config, 'w', encoding='utf-8') as f:
            f.write('global:\n  scrape_interval: 1m\n')
        self.port = free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        self.log = open(os.path.join(workdir, 'prometheus.log'), 'w')
        self.proc = subprocess.Popen(
            [prometheus, '--config.file=' + config,
             '--storage.tsdb.path=' + self.data,
             '--storage.tsdb.retention.time=3650d',
             '--web.listen-address=127.0.0.1:%d' % self.port],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + '/-/ready', timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.3)
        self.stop()
        raise RuntimeError('prometheus did not become ready (see %s)'
                           % self.log.name)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
