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

"""/metrics over HTTP, with TLS and basic auth configured by the web
configuration file Prometheus' exporters share (exporter-toolkit's
format), so an operator's existing file works as it is::

    tls_server_config:
      cert_file: /etc/nova-adaptive-paging/agent.crt
      key_file: /etc/nova-adaptive-paging/agent.key
      client_auth_type: RequireAndVerifyClientCert   # optional
      client_ca_file: /etc/nova-adaptive-paging/ca.crt
      min_version: TLS12                             # optional
    basic_auth_users:
      prometheus: $2y$10$...                         # bcrypt hashes

Other keys of the format (``http_server_config``) are refused rather
than ignored: a setting that seems to apply but does not is worse than
an error at start.  So is ``basic_auth_users`` without
``tls_server_config`` (passwords in clear on the network), unless
``[agent] basic_auth_without_tls`` says so.

Each connection is served in a thread of its own, TLS handshake
included, and has ``[agent] connection_timeout`` in all: handshake,
request and response (a per-read timeout would let a client that sends
a byte now and then hold its slot for ever).
:class:`ConnectionDeadlines` shuts a connection down when its time is
up, which ends any read or write its thread is blocked in.  An idle or
slow client holds its own thread, never the accept loop, and at most
``[agent] max_connections`` are served at once; one more is closed at
once.  Scrapes themselves serve
the agent's last snapshot (:mod:`nova_adaptive_paging.telemetry.
collector`) and never wait for its loop.
"""

import base64
import hashlib
import heapq
import hmac
import itertools
import logging
import socket
import ssl
import threading
import time
from wsgiref import simple_server

import bcrypt
from prometheus_client import exposition
import yaml

from nova_adaptive_paging import exception

LOG = logging.getLogger(__name__)

TOP = ('tls_server_config', 'basic_auth_users')
TLS_KEYS = ('cert_file', 'key_file', 'client_auth_type', 'client_ca_file',
            'min_version', 'max_version')
CLIENT_AUTH = {'NoClientCert': ssl.CERT_NONE,
               'RequireAndVerifyClientCert': ssl.CERT_REQUIRED,
               'VerifyClientCertIfGiven': ssl.CERT_OPTIONAL}
VERSIONS = {'TLS12': ssl.TLSVersion.TLSv1_2, 'TLS13': ssl.TLSVersion.TLSv1_3}


class WebConfigError(exception.Error):
    def __init__(self, source, key, problem):
        super().__init__('%s: %s: %s' % (source, key, problem))


def _tls_context(path, tls):
    if not isinstance(tls, dict):
        raise WebConfigError(path, 'tls_server_config', 'expected a mapping')
    for key in tls:
        if key not in TLS_KEYS:
            raise WebConfigError(path, 'tls_server_config.%s' % key,
                                 'unknown key; expected %s'
                                 % ', '.join(TLS_KEYS))
    for key in ('cert_file', 'key_file'):
        if not isinstance(tls.get(key), str):
            raise WebConfigError(path, 'tls_server_config.%s' % key,
                                 'required (a file name)')
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(tls['cert_file'], tls['key_file'])
    except (OSError, ssl.SSLError) as exc:
        raise WebConfigError(path, 'tls_server_config.cert_file', '%s, %s: '
                             '%s' % (tls['cert_file'], tls['key_file'], exc))
    mode = tls.get('client_auth_type', 'NoClientCert')
    if mode not in CLIENT_AUTH:
        raise WebConfigError(path, 'tls_server_config.client_auth_type',
                             'expected one of %s, got %r'
                             % (', '.join(CLIENT_AUTH), mode))
    ctx.verify_mode = CLIENT_AUTH[mode]
    if mode != 'NoClientCert':
        try:
            ctx.load_verify_locations(tls.get('client_ca_file'))
        except (OSError, ssl.SSLError, TypeError) as exc:
            raise WebConfigError(path, 'tls_server_config.client_ca_file',
                                 'required with %s: %s' % (mode, exc))
    for key, attr in (('min_version', 'minimum_version'),
                      ('max_version', 'maximum_version')):
        if key in tls:
            if tls[key] not in VERSIONS:
                raise WebConfigError(path, 'tls_server_config.%s' % key,
                                     'expected %s, got %r' % (
                                         ' or '.join(VERSIONS), tls[key]))
            setattr(ctx, attr, VERSIONS[tls[key]])
    return ctx


def _users(path, users):
    if not isinstance(users, dict) or not all(
            isinstance(k, str) and isinstance(v, str)
            and v.startswith('$2') for k, v in users.items()):
        raise WebConfigError(path, 'basic_auth_users', 'expected user: '
                             'bcrypt hash pairs')
    return {k: v.encode() for k, v in users.items()}


def load(path, basic_auth_without_tls=False):
    """(ssl.SSLContext or None, {user: bcrypt hash}) of a web config
    file; WebConfigError names the file, key and problem."""
    try:
        with open(path, encoding='utf-8') as f:
            doc = yaml.safe_load(f) or {}
    except OSError as exc:
        raise WebConfigError(path, '(file)', exc.strerror or str(exc))
    except yaml.YAMLError as exc:
        raise WebConfigError(path, '(document)', 'not valid YAML: %s' % exc)
    if not isinstance(doc, dict):
        raise WebConfigError(path, '(document)', 'expected a mapping')
    for key in doc:
        if key not in TOP:
            raise WebConfigError(path, key, 'not supported; expected %s'
                                 % ', '.join(TOP))
    ctx = (_tls_context(path, doc['tls_server_config'])
           if doc.get('tls_server_config') else None)
    users = (_users(path, doc['basic_auth_users'])
             if doc.get('basic_auth_users') else {})
    if users and ctx is None and not basic_auth_without_tls:
        raise WebConfigError(path, 'basic_auth_users', 'refused without '
                             'tls_server_config: passwords would cross the '
                             'network in clear (set [agent] '
                             'basic_auth_without_tls = true to allow it)')
    return ctx, users


class _BasicAuth:
    """A WSGI app that lets a request through with a user's password.
    bcrypt is slow by design: a password that matched is remembered (as
    its SHA-256) so that a scrape every few seconds costs no bcrypt."""

    def __init__(self, app, users):
        self.app = app
        self.users = users
        self._good = {}
        self._lock = threading.Lock()

    def _ok(self, header):
        if not header.startswith('Basic '):
            return False
        try:
            user, _, password = base64.b64decode(
                header[6:]).decode('utf-8').partition(':')
        except (ValueError, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if hashed is None:
            return False
        digest = hashlib.sha256(password.encode()).digest()
        with self._lock:
            known = self._good.get(user)
        if known is not None and hmac.compare_digest(known, digest):
            return True
        if not bcrypt.checkpw(password.encode(), hashed):
            return False
        with self._lock:
            self._good[user] = digest
        return True

    def __call__(self, environ, start_response):
        if self._ok(environ.get('HTTP_AUTHORIZATION', '')):
            return self.app(environ, start_response)
        start_response('401 Unauthorized', [
            ('WWW-Authenticate', 'Basic realm="nova-paging-agent"'),
            ('Content-Type', 'text/plain')])
        return [b'Unauthorized\n']


class ConnectionDeadlines:
    """Shuts connections down at their deadlines, from one thread."""

    def __init__(self):
        self._heap = []
        self._live = {}
        self._ids = itertools.count()
        self._cond = threading.Condition()
        threading.Thread(target=self._run, name='metrics-deadlines',
                         daemon=True).start()

    def add(self, sock, seconds):
        """Shut ``sock`` down ``seconds`` from now unless :meth:`done`
        says it ended; returns the token :meth:`done` takes."""
        token = next(self._ids)
        with self._cond:
            self._live[token] = sock
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            self._cond.notify()
        return token

    def done(self, token):
        with self._cond:
            self._live.pop(token, None)

    def swap(self, token, sock):
        """The connection of ``token`` is ``sock`` from now on (a TLS
        socket takes its plain socket's descriptor and detaches it)."""
        with self._cond:
            if token in self._live:
                self._live[token] = sock

    def _run(self):
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                at, token = self._heap[0]
                left = at - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
                sock = self._live.pop(token, None)
            if sock is not None:
                try:
                    # The plain socket's shutdown, on a TLS socket too:
                    # the descriptor's, leaving the TLS state to the
                    # thread that is reading it.
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass                # closed meanwhile


class _Server(exposition.ThreadingWSGIServer):
    """prometheus_client's threading server, with the TLS handshake in
    the connection's thread, a timeout on every connection and a cap on
    how many are served at once."""

    tls = None
    timeout_s = 10.0
    # socketserver's listen backlog is 5: a burst of connections beyond
    # it waits for SYN retransmits (1, 3, 7 s ...) before accept sees it.
    request_queue_size = 128

    def setup_slots(self, limit):
        self._slots = threading.BoundedSemaphore(limit)
        self._deadlines = ConnectionDeadlines()

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)     # over the cap: closed now
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        # The whole connection's deadline; the TLS socket shares the
        # descriptor, so shutting the plain one down ends it too.
        token = self._deadlines.add(request, self.timeout_s)
        try:
            # Inherited by the TLS socket, and kept by the handler (whose
            # own timeout is None): no one read outlasts the deadline.
            request.settimeout(self.timeout_s)
            if self.tls is not None:
                try:
                    request = self.tls.wrap_socket(request,
                                                   server_side=True)
                    self._deadlines.swap(token, request)
                except OSError:     # ssl.SSLError and socket.timeout too
                    return          # a failed or idle handshake: its own
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self._deadlines.done(token)
            self.shutdown_request(request)
            self._slots.release()

    def handle_error(self, request, client_address):
        # A client's broken or timed-out connection: its own, not an
        # error of the agent's (socketserver would print a traceback).
        LOG.debug('/metrics connection from %s', client_address,
                  exc_info=True)


class _QuietHandler(simple_server.WSGIRequestHandler):
    """A request handler that logs no line per scrape to stderr."""

    def log_message(self, format, *args):
        pass


def _server_class(address, port):
    """:class:`_Server` for the address family ``address`` resolves to
    (socketserver's default is IPv4 only: ``::1`` would not bind); a
    name that does not resolve raises socket.gaierror, an OSError."""
    family = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM,
                                flags=socket.AI_PASSIVE)[0][0]
    return type('_Server', (_Server,), {'address_family': family})


def _rendered(app, render):
    """``app``, but a plain scrape (a GET of the text format, no
    ``name[]`` filter) is answered with ``render()``'s bytes: the
    agent's snapshot, rendered by its loop."""
    def rendered(environ, start_response):
        if (environ['REQUEST_METHOD'] == 'GET'
                and not environ.get('QUERY_STRING')
                and environ.get('PATH_INFO') != '/favicon.ico'
                and 'openmetrics' not in environ.get('HTTP_ACCEPT', '')):
            body = render()
            start_response('200 OK', [
                ('Content-Type', exposition.CONTENT_TYPE_LATEST),
                ('Content-Length', str(len(body)))])
            return [body]
        return app(environ, start_response)
    return rendered


def serve(registry, address, port, web_config=None, timeout=10.0,
          max_connections=32, basic_auth_without_tls=False, render=None):
    """Serve ``registry`` in a daemon thread; return (server, thread).
    ``render``: what a plain scrape gets (bytes of the text format),
    already rendered; other requests are the registry's."""
    ctx, users = (load(web_config, basic_auth_without_tls) if web_config
                  else (None, {}))
    app = exposition.make_wsgi_app(registry)
    if render is not None:
        app = _rendered(app, render)
    if users:
        app = _BasicAuth(app, users)
    httpd = simple_server.make_server(
        address, port, app, _server_class(address, port),
        handler_class=_QuietHandler)
    httpd.tls, httpd.timeout_s = ctx, timeout
    httpd.setup_slots(max_connections)
    thread = threading.Thread(target=httpd.serve_forever,
                              name='metrics-http', daemon=True)
    thread.start()
    return httpd, thread
