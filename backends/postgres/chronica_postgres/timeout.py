"""The ``operation_timeout`` option: one statement bounded in time, on the client.

psycopg has no client-side deadline for a statement. The server's ``statement_timeout`` does not
help when the server itself stops answering (a stopped process, a stuck proxy or network), and
neither do TCP keepalives or libpq's ``tcp_user_timeout`` while the far machine still acknowledges
the packets. So the store arms an alarm (:func:`chronica_core.timeouts.cut_after`) around each
statement: when it fires, the connection's socket is shut down, psycopg's wait ends with a
connection error, and that error becomes :class:`OperationTimedOut`; the connection is closed, and
the pool replaces it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import PoolTimeout

from chronica_core.timeouts import cut_after, timed_out

if TYPE_CHECKING:
    from chronica_postgres.plans import Options

__all__ = ["OperationTimedOut", "bounded", "connection_wait", "waiting"]


_LEAST_SECONDS = 0.01
"""The least time a statement is given, even when waiting for its connection took all the rest."""


class OperationTimedOut(psycopg.OperationalError):
    """A statement got no answer within ``operation_timeout`` seconds; its connection was cut.

    The statement ran in autocommit, so it either committed whole or not at all; which one is
    unknown for a write (the server may still commit it after the cut). Retrying a write with its
    idempotency key is safe: it lands once.
    """

    def __init__(self, seconds: float, *, sent: bool = True) -> None:
        super().__init__(timed_out(seconds, sent=sent))


def connection_wait(options: Options) -> float | None:
    """How long an operation waits for a pooled connection, in seconds (``None``: the pool's own).

    ``operation_timeout``, when set, bounds the whole operation, this wait included.
    """
    if options.operation_timeout is None:
        return None
    return min(options.pool_timeout, options.operation_timeout)


@contextmanager
def waiting(options: Options) -> Iterator[float]:
    """Wrap the wait for a pooled connection; yield the moment it began (``time.monotonic()``).

    Raises:
        OperationTimedOut: ``operation_timeout`` passed before a connection was free (raised
            from the pool's ``PoolTimeout``; nothing was sent).
    """
    try:
        yield time.monotonic()
    except PoolTimeout as error:
        seconds = options.operation_timeout
        if seconds is not None and seconds <= options.pool_timeout:
            raise OperationTimedOut(seconds, sent=False) from error
        raise


@contextmanager
def bounded(
    options: Options, started: float, connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]
) -> Iterator[None]:
    """Run the statement of the ``with`` block on ``connection`` within its bound.

    The bound is what is left of ``operation_timeout`` since ``started`` (none when the option
    is ``None``).

    Raises:
        OperationTimedOut: the bound passed before the statement was done (raised from the
            connection error the cut caused); the connection is then closed.
    """
    seconds = options.operation_timeout
    if seconds is None:
        yield
        return
    left = max(_LEAST_SECONDS, seconds - (time.monotonic() - started))
    alarm = cut_after(left, connection.pgconn.socket)
    try:
        yield
    except psycopg.Error as error:
        if alarm.disarm():
            raise OperationTimedOut(seconds) from error
        raise
    finally:
        if alarm.disarm():  # cut, perhaps just after the answer came: the connection is unusable
            connection.pgconn.finish()
