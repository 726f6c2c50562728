"""Pooled connections the server may have closed while idle: checked before use when in doubt.

A server (PostgreSQL's ``idle_session_timeout``), a proxy or a firewall may close a connection
that sits idle in the pool. SQLAlchemy's ``pool_pre_ping`` would find it, at one round trip on
every checkout; MariaDB/MySQL engines use it (see :mod:`.engines`). On the other servers
:func:`watch_idle_connections` pings only when in doubt, with three pool events: ``connect`` reads
the server's idle timeout (:data:`chronica_core.idle.SERVER_IDLE_TIMEOUT_SQL`), ``checkin`` notes
when the connection went idle, and ``checkout`` pings it (the dialect's ``do_ping``) when it sat
idle longer than :func:`chronica_core.idle.idle_limit`, or when psycopg's socket shows that the
server spoke or closed it (:func:`chronica_core.idle.socket_readable`, no round trip). A dead one
is replaced: the event raises ``DisconnectionError`` and the pool connects anew.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

from chronica_core.idle import DEFAULT_CHECK_IDLE_AFTER, SERVER_IDLE_TIMEOUT_SQL, idle_limit, socket_readable

__all__ = ["watch_idle_connections"]

_IDLE = "chronica_idle"
"""Key in a pooled connection's ``info``: ``(idle since, in monotonic seconds, or None while it never
went idle; idle limit in seconds; the engine's dialect)``."""


def watch_idle_connections(engine: Engine, check_idle_after: float = DEFAULT_CHECK_IDLE_AFTER) -> None:
    """Have ``engine``'s pool ping a connection that sat idle longer than its limit before lending it.

    Args:
        engine: a blocking engine, or an ``AsyncEngine.sync_engine``. Nothing is added on SQLite
            (no server), on MariaDB/MySQL (see the module), nor to an engine that has the events.
        check_idle_after: seconds a pooled connection may sit idle and still be lent unchecked.
    """
    dialect = engine.dialect
    if dialect.name in ("sqlite", "mysql", "mariadb") or event.contains(
        engine, "checkout", _ping_if_in_doubt
    ):
        return
    query = SERVER_IDLE_TIMEOUT_SQL.get(dialect.name)

    def connect(dbapi_connection: Any, record: Any) -> None:
        server_timeout = _server_idle_timeout(dbapi_connection, query) if query else None
        record.info[_IDLE] = (None, idle_limit(check_idle_after, server_timeout), dialect)

    event.listen(engine, "connect", connect)
    event.listen(engine, "checkin", _note_idle)
    event.listen(engine, "checkout", _ping_if_in_doubt)


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


def _ping_if_in_doubt(dbapi_connection: Any, record: Any, proxy: Any) -> None:
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


def _server_spoke(driver: str, connection: Any) -> bool:
    """Whether psycopg's idle socket has something to read or is closed (other drivers: unknown)."""
    if driver not in ("psycopg", "psycopg_async"):
        return False
    try:
        fileno = connection.pgconn.socket
    except Exception:  # noqa: BLE001 - psycopg raises when the connection is closed
        return True
    return socket_readable(fileno)
