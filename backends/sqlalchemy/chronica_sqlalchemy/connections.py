"""Pooled connections the server may have closed while idle: checked before use, only when idle long.

A server (MariaDB/MySQL's ``wait_timeout``, PostgreSQL's ``idle_session_timeout``), a proxy or a
firewall may close a connection that sits idle in the engine's pool. :func:`watch_idle_connections`
adds three pool events to an engine: ``connect`` reads the server's idle timeout for the new
connection (:data:`chronica_core.idle.SERVER_IDLE_TIMEOUT_SQL`), ``checkin`` notes when it goes
idle, and ``checkout`` pings it (the dialect's ``do_ping``: one round trip) only when it sat idle
longer than :func:`chronica_core.idle.idle_limit` (the ``check_idle_after`` option, or half the
server's timeout when shorter). A dead one is replaced: the event raises SQLAlchemy's
``DisconnectionError``, and the pool opens a new connection in its place. A busy pool is never
pinged (SQLAlchemy's ``pool_pre_ping`` would ping at every checkout). SQLite has no server and is
left alone.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

from chronica_core.idle import DEFAULT_CHECK_IDLE_AFTER, SERVER_IDLE_TIMEOUT_SQL, idle_limit
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
    """Ping a connection idle longer than its limit; raise ``DisconnectionError`` if it is dead."""
    known = record.info.get(_IDLE)
    if known is None or known[0] is None or time.monotonic() - known[0] < known[1]:
        return
    dialect = known[2]
    try:
        dialect.do_ping(dbapi_connection)
    except Exception as error:
        raise DisconnectionError(f"a connection idle for over {known[1]:g} s is gone: {error}") from error
