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

"""The guests of the local hypervisor, from libvirt.

One read-only connection (``[adaptive_paging] libvirt_uri``): listing
domains, their XML, their lifecycle events and their balloon statistics
all work on one, and a read-only connection cannot start, stop or change
a guest, so the agent's user needs no ``libvirt`` group (which is root
in all but name).  libvirt's own event loop runs in a thread: lifecycle
events (started, stopped, crashed, migrated, resumed, rebooted) wake the
agent at once, and a close callback marks the connection lost and wakes
it too.  While libvirtd is down the agent retries on a backoff doubling
from one second up to ``max_backoff`` (:meth:`Domains.retry_in` tells the
loop when), and a connection that is made again wakes it for a full
pass: a guest started meanwhile gets its mode within the interval.
Events are a shortcut, not the source of truth: the agent lists the
running domains on every reconcile, so a missed event cannot leave a
guest unmanaged.

Every call has a deadline.  libvirt's client waits for its daemon's
answer for ever (a libvirtd that accepts and never answers held one
call for minutes), so the calls run in a thread of their own
(:class:`.call_thread.CallThread`) and the caller gives up after
``timeout`` seconds: the call is logged and counted as libvirt being
down, no other call is made until the hung one returns, and the loop,
its stop and /metrics go on.  An open connection also runs libvirt's
keepalive, which closes it (and so ends a hung call) when the daemon
stops answering.
"""

import dataclasses
import logging
import threading
import time

import libvirt

from nova_adaptive_paging.agent import call_thread

LOG = logging.getLogger(__name__)

_loop_started = False
_loop_lock = threading.Lock()


def _ignore_errors(ctx, err):
    # libvirt prints every error to stderr by default; the agent logs
    # the ones it cannot handle itself.
    pass


def start_event_loop():
    """libvirt's default event loop, in a daemon thread, once per
    process; it must exist before the first connection is opened."""
    global _loop_started
    with _loop_lock:
        if _loop_started:
            return
        libvirt.registerErrorHandler(_ignore_errors, None)
        libvirt.virEventRegisterDefaultImpl()

        def run():
            while True:
                libvirt.virEventRunDefaultImpl()
        threading.Thread(target=run, name='libvirt-events',
                         daemon=True).start()
        _loop_started = True


@dataclasses.dataclass(frozen=True)
class Domain:
    name: str
    uuid: str
    xml: str


class LibvirtUnavailable(Exception):
    pass


class Domains:
    """The running domains of ``uri``; ``wake(reason)`` is called from
    libvirt's event thread on every lifecycle event and on a lost
    connection."""

    def __init__(self, uri, wake=None, max_backoff=60.0,
                 clock=time.monotonic, timeout=30.0, keepalive_s=5):
        self.uri = uri
        self.calls = call_thread.CallThread(
            timeout, lambda what, seconds: LibvirtUnavailable(
                '%s: %s did not answer within %.0f s ([agent] '
                'libvirt_timeout)' % (uri, what, seconds)),
            lambda what, seconds: LibvirtUnavailable(
                '%s: %s has not returned for %.0f s; no other call is '
                'made until it does' % (uri, what, seconds)),
            name='libvirt-calls')
        self.keepalive_s = keepalive_s
        self.wake = wake or (lambda reason: None)
        self.max_backoff = max_backoff
        self.clock = clock
        self.conn = None
        self.connects = 0
        self._backoff = 0.0
        self._next_try = 0.0
        self._callbacks = []

    # -- the connection ----------------------------------------------------
    def _lifecycle(self, conn, dom, event, detail, opaque):
        self.wake('domain %s: lifecycle event %d/%d' % (dom.name(), event,
                                                        detail))

    def _reboot(self, conn, dom, opaque):
        self.wake('domain %s: rebooted' % dom.name())

    def _closed(self, conn, reason, opaque):
        LOG.warning('libvirt connection to %s closed (reason %d); '
                    'reconnecting', self.uri, reason)
        self.conn = None
        self.wake('libvirt connection closed')

    def _backoff_after(self, now):
        self._backoff = min(max(1.0, self._backoff * 2), self.max_backoff)
        self._next_try = now + self._backoff

    def _call(self, what, fn, *args):
        """``fn(*args)`` under the deadline; a call that did not answer
        counts as a lost connection (retried on the backoff)."""
        try:
            return self.calls.call(what, fn, *args)
        except LibvirtUnavailable:
            if self.conn is not None or self._next_try <= self.clock():
                self.conn = None
                self._backoff_after(self.clock())
            raise

    def _open(self):
        conn = libvirt.openReadOnly(self.uri)
        try:
            # -1: the driver has no keepalive (the test driver, which
            # has no daemon to lose): not an error.
            conn.setKeepAlive(self.keepalive_s, 5)
        except libvirt.libvirtError:
            pass
        conn.registerCloseCallback(self._closed, None)
        callbacks = [
            conn.domainEventRegisterAny(
                None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                self._lifecycle, None),
            conn.domainEventRegisterAny(
                None, libvirt.VIR_DOMAIN_EVENT_ID_REBOOT,
                self._reboot, None)]
        return conn, callbacks

    def connect(self):
        """The connection, reopened if lost; raises LibvirtUnavailable
        (once per backoff period) while libvirt cannot be reached or
        does not answer within the deadline."""
        return self._call('connecting', self._connect)

    def _connect(self):
        if self.conn is not None:
            try:
                if self.conn.isAlive():
                    return self.conn
            except libvirt.libvirtError:
                pass
            self.conn = None
        now = self.clock()
        if now < self._next_try:
            raise LibvirtUnavailable('%s: not reachable; next try in %.0f s'
                                     % (self.uri, self._next_try - now))
        start_event_loop()
        try:
            conn, self._callbacks = self._open()
        except libvirt.libvirtError as exc:
            self._backoff_after(now)
            raise LibvirtUnavailable('%s: %s (retrying in %.0f s)' % (
                self.uri, exc.get_error_message(), self._backoff))
        self._backoff, self._next_try = 0.0, 0.0
        self.conn = conn
        self.connects += 1
        LOG.info('connected to libvirt at %s (read-only)', self.uri)
        if self.connects > 1:
            # What changed while it was away is seen by a full pass now,
            # not at the next reconcile_interval.
            self.wake('libvirt connection made again')
        return conn

    def retry_in(self):
        """Seconds until the next attempt to reconnect, while the
        connection is lost; None while it is up."""
        if self.conn is not None:
            return None
        return max(0.0, self._next_try - self.clock())

    def retry_due(self):
        """Whether the connection is lost and a reconnect is due."""
        return self.retry_in() == 0.0

    def close(self, timeout=2.0):
        """Close the connection, giving libvirt ``timeout`` seconds (a
        daemon that does not answer is left to its keepalive)."""
        conn, self.conn = self.conn, None
        if conn is None or self.calls.hung() is not None:
            return

        def close():
            try:
                for cb in self._callbacks:
                    conn.domainEventDeregisterAny(cb)
                conn.unregisterCloseCallback()
                conn.close()
            except libvirt.libvirtError:
                pass
        try:
            self.calls.call('closing the connection', close,
                            timeout=timeout)
        except LibvirtUnavailable as exc:
            LOG.warning('%s', exc)

    # -- the guests --------------------------------------------------------
    def running(self):
        """A :class:`Domain` per running domain.  A domain that goes away
        while it is read is left out (the next pass sees it gone)."""
        return self._call('listing domains', self._running)

    def _running(self):
        conn = self._connect()
        try:
            found = conn.listAllDomains(
                libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        except libvirt.libvirtError as exc:
            self.conn = None
            raise LibvirtUnavailable('%s: listing domains: %s' % (
                self.uri, exc.get_error_message()))
        out = []
        for dom in found:
            try:
                out.append(Domain(dom.name(), dom.UUIDString(),
                                  dom.XMLDesc(0)))
            except libvirt.libvirtError as exc:
                if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                    raise LibvirtUnavailable('%s: %s' % (
                        self.uri, exc.get_error_message()))
        return out

    def guest_faults(self, name):
        """The guest's own page-fault count from its virtio-balloon
        statistics, or None when it reports none (no balloon, or Nova's
        ``[libvirt] mem_stats_period_seconds = 0``).  Linux guests count
        every fault, major ones included, in ``minor_fault``: it is the
        total, and ``major_fault`` is not added to it."""
        return self._call('memory statistics of %s' % name,
                          self._guest_faults, name)

    def _guest_faults(self, name):
        conn = self._connect()
        try:
            stats = conn.lookupByName(name).memoryStats()
        except libvirt.libvirtError:
            return None
        value = stats.get('minor_fault')
        return int(value) if value is not None and value >= 0 else None
