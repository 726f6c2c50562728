"""Pooled connections the server may have closed while idle: checked before use when in doubt.

A server (MariaDB/MySQL's ``wait_timeout``, PostgreSQL's ``idle_session_timeout``), a proxy or a
firewall may close a connection that sits idle in the engine's pool. :func:`watch_idle_connections`
adds three pool events to an engine: ``connect`` reads the server's idle timeout for the new
connection (:data:`chronica_core.idle.SERVER_IDLE_TIMEOUT_SQL`), ``checkin`` notes when it goes
idle, and ``checkout`` pings it (the dialect's ``do_ping``: one round trip) only when it sat idle
longer than :func:`chronica_core.idle.idle_limit` (the ``check_idle_after`` option, or half the
server's timeout when shorter), or when its idle socket shows that the server spoke or closed it
(:func:`chronica_core.idle.socket_readable`, no round trip: PostgreSQL sends its reason before it
closes a connection, a closed socket reads as end of file) on the drivers whose socket it knows
(psycopg, PyMySQL, asyncmy). A dead one is replaced: the event raises SQLAlchemy's
``DisconnectionError``, and the pool opens a new connection in its place. A busy pool is never
pinged (SQLAlchemy's ``pool_pre_ping`` would ping at every checkout). SQLite has no server and is
left alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

from chronica_core.idle import DEFAULT_CHECK_IDLE_AFTER, SERVER_IDLE_TIMEOUT_SQL, idle_limit, socket_readable
from chronica_sqlalchemy.schema import is_mysql

__all__ = ["watch_idle_connections"]

_IDLE = "chronica_idle"
"""Key in a pooled connection's ``info`` (emptied when it is replaced): ``(idle since, in monotonic
seconds, or None while it never went idle; idle limit in seconds; the engine's dialect)``."""


def watch_idle_connections(engine: Engine, check_idle_after: float = DEFAULT_CHECK_IDLE_AFTER) -> None:
    """Have ``engine``'s pool ping a connection that sat idle longer than its limit before lending it.

    Args:
        engine: a blocking engine, or an ``AsyncEngine.sync_engine``. Nothing is added on SQLite,
            nor to an engine that has the events already (the first ``check_idle_after`` stays).
        check_idle_after: seconds a pooled connection may sit idle and still be lent unchecked.
    """
    if engine.dialect.name == "sqlite" or event.contains(engine, "checkout", _ping_if_idle_too_long):
        return
    dialect = engine.dialect
    query = SERVER_IDLE_TIMEOUT_SQL.get("mysql" if is_mysql(dialect) else dialect.name)

    def connect(dbapi_connection: Any, record: Any) -> None:
        server_timeout = _server_idle_timeout(dbapi_connection, query) if query else None
        record.info[_IDLE] = (None, idle_limit(check_idle_after, server_timeout), dialect)

    event.listen(engine, "connect", connect)
    event.listen(engine, "checkin", _note_idle)
    event.listen(engine, "checkout", _ping_if_idle_too_long)


def _server_idle_timeout(dbapi_connection: Any, query: str) -> float | None:
    """The server's idle timeout for this connection, in seconds (``None``: none, or unreadable)."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(query)
        row = cursor.fetchone()
    except Exception:  # noqa: BLE001 - a server without the setting: rely on the option alone
        row = None
    finally:
        cursor.close()
    dbapi_connection.rollback()  # leave no transaction open behind the pool's back
    return None if row is None or row[0] is None else float(row[0])


def _note_idle(dbapi_connection: Any, record: Any) -> None:
    """A connection goes back to the pool: idle from now on."""
    known = record.info.get(_IDLE)
    if known is not None:
        record.info[_IDLE] = (time.monotonic(), *known[1:])


def _ping_if_idle_too_long(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Ping a connection idle too long or closed by the server; raise ``DisconnectionError`` if dead."""
    known = record.info.get(_IDLE)
    if known is None or known[0] is None:
        return
    dialect = known[2]
    idle_for = time.monotonic() - known[0]
    if idle_for < known[1] and not _server_spoke(dialect.driver, record.driver_connection):
        return
    try:
        dialect.do_ping(dbapi_connection)
    except Exception as error:
        raise DisconnectionError(f"a connection idle for {idle_for:.3g} s is gone: {error}") from error


def _psycopg_spoke(connection: Any) -> bool:
    """For psycopg (blocking or asyncio): its libpq connection's socket."""
    try:
        fileno = connection.pgconn.socket
    except Exception:  # noqa: BLE001 - psycopg raises when the connection is closed
        return True
    return socket_readable(fileno)


def _pymysql_spoke(connection: Any) -> bool:
    """For PyMySQL: its socket (``None`` once closed)."""
    return socket_readable(connection._sock)


def _asyncmy_spoke(connection: Any) -> bool:
    """For asyncmy: what the event loop already read into its protocol, else the transport's socket."""
    protocol = connection._proto
    transport = connection._transport
    if protocol is None or transport is None or protocol.eof or protocol.length > protocol.pos:
        return True
    return socket_readable(transport.get_extra_info("socket"))


_SPOKE: dict[str, Callable[[Any], bool]] = {
    "psycopg": _psycopg_spoke,
    "psycopg_async": _psycopg_spoke,
    "pymysql": _pymysql_spoke,
    "asyncmy": _asyncmy_spoke,
}
"""Per SQLAlchemy driver name, whether an idle driver connection has something to read or is
closed. Other drivers rely on the idle time alone."""


def _server_spoke(driver: str, connection: Any) -> bool:
    """Whether the server sent something on the idle ``connection`` or closed it (no round trip)."""
    spoke = _SPOKE.get(driver)
    return spoke is not None and spoke(connection)
