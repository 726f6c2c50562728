"""The ``operation_timeout`` option: how each driver is kept from waiting on a server forever.

=====================  ===================================================================
driver                 what bounds an operation
=====================  ===================================================================
PyMySQL (MariaDB)      its ``read_timeout`` and ``write_timeout``: each wait for the server
                       to answer, or to take what is sent, is bounded; and its
                       ``connect_timeout``
asyncmy (MariaDB)      its ``read_timeout``: each wait for the server's answer is bounded;
                       and its ``connect_timeout``
psycopg (PostgreSQL)   no client-side deadline exists (the server's ``statement_timeout``
                       does not help a server that stopped answering); an alarm
                       (:func:`chronica_core.timeouts.cut_after`) shuts the connection's
                       socket down once the operation, from taking its connection to
                       giving it back, has lasted ``operation_timeout``; a new
                       connection is bounded by libpq's ``connect_timeout`` (whole
                       seconds, at least 2)
SQLite                 not offered: there is no server; ``busy_timeout`` bounds the wait
                       for the write lock
=====================  ===================================================================

Either way the driver's wait ends with a lost connection, which SQLAlchemy drops from the pool;
the error becomes :class:`OperationTimedOut` (reported as ``StoreError("sqlalchemy: <operation>",
"OperationTimedOut: timed out: ...")``). Every operation is one transaction, so a timed-out write
is either committed whole or not at all, but which one is unknown when the cut came after the
statement was sent; retrying it with its idempotency key is safe.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import URL, ExceptionContext
from sqlalchemy.exc import OperationalError

from chronica_core.errors import InvalidOption
from chronica_core.timeouts import Alarm, cut_after, timed_out

__all__ = ["OperationTimedOut", "bound_operations", "check_driver", "connect_arguments"]

_BACKEND = "sqlalchemy"
_ALARM = "chronica operation alarm"
_SERVER_LOST = (2006, 2013)  # MySQL client errors: server gone away, lost connection during query
_CANNOT_CONNECT = 2003
_MYSQL_TIMEOUT_WORDS = ("timed out", "read timeout")


class OperationTimedOut(Exception):
    """An operation got no answer within ``operation_timeout``; its connection was dropped."""

    def __init__(self, seconds: float, *, sent: bool = True) -> None:
        super().__init__(timed_out(seconds, sent=sent))


def check_driver(url: URL, seconds: float | None) -> None:
    """Raise ``InvalidOption`` for ``operation_timeout`` where it cannot be honoured.

    That is SQLite, and a driver other than PyMySQL, asyncmy or psycopg.
    """
    if seconds is None:
        return
    dialect, driver = url.get_backend_name(), url.get_driver_name()
    if dialect == "sqlite":
        raise InvalidOption(
            _BACKEND,
            "operation_timeout",
            "not supported on SQLite (busy_timeout bounds the wait for the lock)",
        )
    if driver not in ("pymysql", "asyncmy", "psycopg", "psycopg_async"):
        raise InvalidOption(
            _BACKEND,
            "operation_timeout",
            f"not supported with the {driver} driver (use pymysql, asyncmy or psycopg)",
        )


def connect_arguments(url: URL, seconds: float | None) -> dict[str, Any]:
    """The driver's own timeouts for ``connect_args`` (none when ``seconds`` is ``None``).

    A timeout the URL's query already sets is left to it.
    """
    if seconds is None:
        return {}
    driver = url.get_driver_name()
    arguments: dict[str, Any] = {}
    if driver == "pymysql":
        arguments = {"connect_timeout": seconds, "read_timeout": seconds, "write_timeout": seconds}
    elif driver == "asyncmy":
        arguments = {"connect_timeout": seconds, "read_timeout": seconds}
    elif driver in ("psycopg", "psycopg_async"):
        arguments = {"connect_timeout": max(2, math.ceil(seconds))}  # libpq: whole seconds, 2 at least
    return {name: value for name, value in arguments.items() if name not in url.query}


def bound_operations(engine: Engine, seconds: float | None) -> None:
    """Bound every operation on ``engine`` (a blocking engine or an ``AsyncEngine.sync_engine``).

    On psycopg an alarm is armed when a connection is taken from the pool and disarmed when it
    is given back; on every driver a timeout error becomes :class:`OperationTimedOut`, and drops
    only that connection (not the whole pool, as a lost connection otherwise would).
    """
    if seconds is None:
        return
    if engine.dialect.driver in ("psycopg", "psycopg_async"):

        def arm(dbapi_connection: Any, record: Any, proxy: Any) -> None:
            record.info[_ALARM] = cut_after(seconds, proxy.driver_connection.pgconn.socket)

        def disarm(dbapi_connection: Any, record: Any) -> None:
            alarm: Alarm | None = record.info.pop(_ALARM, None)
            if alarm is not None and alarm.disarm() and record.driver_connection is not None:
                record.driver_connection.pgconn.finish()  # cut just after the answer: unusable

        event.listen(engine, "checkout", arm)
        event.listen(engine, "checkin", disarm)

    def translate(context: ExceptionContext) -> BaseException | None:
        timeout = _timeout(context)
        if timeout is None:
            return None
        context.is_disconnect = True
        context.invalidate_pool_on_disconnect = False
        return OperationalError(
            context.statement, context.parameters, OperationTimedOut(seconds, sent=timeout == "answer")
        )

    event.listen(engine, "handle_error", translate)


def _timeout(context: ExceptionContext) -> str | None:
    """Which bound the error of ``context`` is: ``"answer"``, ``"connect"``, or ``None`` (none)."""
    connection = context.connection
    if connection is not None and not connection.invalidated:
        alarm: Alarm | None = connection.connection.info.get(_ALARM)
        if alarm is not None and alarm.fired:
            return "answer"
    error = context.original_exception
    if type(error).__name__ == "ConnectionTimeout":  # psycopg's, for libpq's connect_timeout
        return "connect"
    arguments: tuple[object, ...] = getattr(error, "args", ())
    if len(arguments) != 2 or not any(word in str(arguments[1]) for word in _MYSQL_TIMEOUT_WORDS):
        return None
    if arguments[0] in _SERVER_LOST:
        return "answer"
    return "connect" if arguments[0] == _CANNOT_CONNECT else None
