"""Bounding one store operation in time (the ``operation_timeout`` option of the server backends).

What a store says when an operation timed out is written here once (:func:`timed_out`,
:data:`WRITE_FATE_UNKNOWN`), and so is the means to cut a connection whose operation outlived
its bound (:func:`cut_after`), for drivers that cannot bound an operation themselves.

Some drivers can wait on a server forever: psycopg has no client-side deadline for a statement,
and a server that stops answering while its machine still acknowledges the packets (a stopped
process, a stuck proxy) is not noticed by TCP keepalives or ``tcp_user_timeout`` either. A store
of such a driver arms an :class:`Alarm` around each statement: when the alarm fires, the
connection's socket is shut down, so the driver's wait ends at once with a connection error that
the store reports as timed out. One daemon thread serves every alarm of the process.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable

__all__ = ["WRITE_FATE_UNKNOWN", "Alarm", "cut_after", "timed_out"]


class Alarm:
    """A callback due at a moment, unless disarmed first; see :func:`cut_after`."""

    __slots__ = ("_callback", "_fired", "_lock", "_pending", "_release")

    def __init__(self, callback: Callable[[], None], release: Callable[[], None]) -> None:
        self._callback = callback
        self._release = release
        self._lock = threading.Lock()
        self._pending = True
        self._fired = False

    @property
    def fired(self) -> bool:
        """Whether the alarm fired (its callback ran or is running)."""
        return self._fired

    def disarm(self) -> bool:
        """Stop the alarm (waiting for its callback if that is running); return whether it fired."""
        with self._lock:
            self._pending = False
            self._release()
            return self._fired

    def _fire(self) -> None:
        with self._lock:
            if not self._pending:
                return
            self._pending, self._fired = False, True
            with contextlib.suppress(OSError):  # the socket is already gone: nothing left to cut
                self._callback()


_FIRST_SWEEP = 1024


class _Watchdog:
    """One thread calling the alarms that fell due (started on first use, again after a fork)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Alarm]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._pid = 0
        self._sweep_at = _FIRST_SWEEP

    def arm(self, alarm: Alarm, seconds: float) -> None:
        with self._changed:
            if self._pid != os.getpid():
                self._pid, self._due = os.getpid(), []
                threading.Thread(target=self._watch, name="chronica watchdog", daemon=True).start()
            # Disarmed alarms stay queued until their moment: sweep them out whenever the queue has
            # doubled since the last sweep (amortised, a constant cost per alarm).
            if len(self._due) > self._sweep_at:
                self._due = [entry for entry in self._due if entry[2]._pending]
                heapq.heapify(self._due)
                self._sweep_at = max(_FIRST_SWEEP, 2 * len(self._due))
            heapq.heappush(self._due, (time.monotonic() + seconds, next(self._order), alarm))
            if self._due[0][2] is alarm:
                self._changed.notify()

    def _watch(self) -> None:
        while True:
            with self._changed:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._changed.wait(self._due[0][0] - time.monotonic() if self._due else None)
                _, _, alarm = heapq.heappop(self._due)
            alarm._fire()


_WATCHDOG = _Watchdog()


def cut_after(seconds: float, fileno: int) -> Alarm:
    """Shut down the socket ``fileno`` in ``seconds`` unless the returned alarm is disarmed first.

    The socket is duplicated now (and the copy closed when the alarm fires or is disarmed), so a
    descriptor the driver closes and the process reuses meanwhile is never touched.

    Args:
        seconds: how long the operation may take, in seconds.
        fileno: the connection's socket, as its driver reports it.

    Returns:
        The alarm: call :meth:`Alarm.disarm` once the operation is over (it returns ``True`` when
        the socket was cut; the connection is then broken and must be closed, not reused).

    Raises:
        OSError: ``fileno`` is not an open descriptor.
    """
    copy = socket.socket(fileno=os.dup(fileno))

    def shut_down() -> None:
        try:
            copy.shutdown(socket.SHUT_RDWR)
        finally:
            copy.close()

    alarm = Alarm(shut_down, copy.close)  # closing twice does nothing
    _WATCHDOG.arm(alarm, seconds)
    return alarm


WRITE_FATE_UNKNOWN = "a write may or may not have been committed (retry it with its idempotency key)"
"""What a store adds when an operation that had reached the server timed out."""


def timed_out(seconds: float, *, sent: bool = True) -> str:
    """What a store says when an operation outlived ``operation_timeout`` (``seconds``).

    Args:
        seconds: the option's value.
        sent: whether the operation had reached the server (a write may then have landed).
    """
    if not sent:
        return f"timed out: no free connection within operation_timeout ({seconds:g} s); nothing was sent"
    return (
        f"timed out: no answer within operation_timeout ({seconds:g} s), so the connection was cut;"
        f" {WRITE_FATE_UNKNOWN}"
    )
