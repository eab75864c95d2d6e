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

"""Calls that may never return, made with a deadline.

A C library that waits for ever (libvirt's client waits for its daemon's
answer without end) cannot be interrupted from Python.  The calls run in
one thread of their own; the caller waits at most a deadline, and while
a call hangs no other is made (the hung one holds the thread, and a new
thread per call would pile up behind it).
"""

import queue
import threading
import time


class _Call:
    def __init__(self, what, fn, args):
        self.what, self.fn, self.args = what, fn, args
        self.started = time.monotonic()
        self.done = threading.Event()
        self.result = self.error = None


class CallThread:
    """Runs calls in one daemon thread of its own, each under a deadline:
    :meth:`call` returns its result, raises what it raised, or raises
    ``late(what, seconds)`` when it has not returned after ``timeout``
    seconds.  While a call hangs, the next one raises ``busy(what of the
    hung one, seconds since it started)`` at once: no thread is made per
    call, none piles up."""

    def __init__(self, timeout, late, busy, name='calls'):
        self.timeout = timeout
        self.late, self.busy, self.name = late, busy, name
        self._queue = queue.SimpleQueue()
        self._current = None
        self._thread = None

    def _run(self):
        while True:
            call = self._queue.get()
            try:
                call.result = call.fn(*call.args)
            except BaseException as exc:    # handed to the caller
                call.error = exc
            call.done.set()

    def hung(self):
        """The call that has not returned (what, since when), or None."""
        current = self._current
        if current is None or current.done.is_set():
            return None
        return current.what, current.started

    def call(self, what, fn, *args, timeout=None):
        hung = self.hung()
        if hung is not None:
            raise self.busy(hung[0], time.monotonic() - hung[1])
        if self._thread is None:
            self._thread = threading.Thread(target=self._run,
                                            name=self.name, daemon=True)
            self._thread.start()
        call = self._current = _Call(what, fn, args)
        self._queue.put(call)
        limit = self.timeout if timeout is None else timeout
        if not call.done.wait(limit):
            raise self.late(what, limit)
        if call.error is not None:
            raise call.error
        return call.result
