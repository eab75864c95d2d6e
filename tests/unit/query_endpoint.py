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

"""An HTTPS endpoint of the Prometheus query API for the Watcher
strategy's tests, in a process of its own (the Watcher tests' process
runs eventlet's monkey patching): real TLS, client certificates checked
against the given CA, fixed answers to the strategy's three queries, and
a log of how it was asked.  It stands in for Prometheus's query engine
only (tests/functional/test_stock_fleet.py queries a real Prometheus).

    python -m tests.unit.query_endpoint CERT KEY SERIES.json LOG.jsonl

prints its port on stdout, then serves until killed.  SERIES.json:
{"pool": [[labels, value], ...], "observed": [...], "gain": [...]}.
"""

import http.server
import json
import ssl
import sys
import urllib.parse

ADVISED = 'nova_paging_guest_advised_seconds'


def main(cert, key, series_file, log_file):
    with open(series_file, encoding='utf-8') as f:
        series = json.load(f)

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self, params):
            expr = params.get('query', [''])[0]
            with open(log_file, 'a', encoding='utf-8') as log:
                log.write(json.dumps({
                    'method': self.command, 'headers': dict(self.headers),
                    'client_cert': bool(self.connection.getpeercert()),
                    'query': expr}) + '\n')
            kind = ('gain' if 'offset' in expr else 'observed'
                    if ADVISED in expr else 'pool')
            body = json.dumps({'status': 'success', 'data': {
                'resultType': 'vector', 'result': [
                    {'metric': m, 'value': [0, str(v)]}
                    for m, v in series[kind]]}}).encode()
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self.answer(urllib.parse.parse_qs(
                urllib.parse.urlparse(self.path).query))

        def do_POST(self):
            length = int(self.headers.get('Content-Length', 0))
            self.answer(urllib.parse.parse_qs(
                self.rfile.read(length).decode()))

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.load_verify_locations(cert)
    context.verify_mode = ssl.CERT_OPTIONAL
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == '__main__':
    main(*sys.argv[1:5])
