"""PostgreSQL behind a pooler (PgBouncer, hosted poolers) on psycopg: see :mod:`chronica_core.poolers`.

- ``prepared_statements`` (``auto``, ``true``, ``false``): :func:`watch_prepared_statements` sets
  psycopg's ``prepare_threshold`` to ``None`` on each new connection of the store's engines when
  it is ``false``, or, with ``auto``, when the engine's first connection found a pooler.
- ``listen`` (a SQLAlchemy or libpq URL): kept per engine (:func:`keep_listen_url`); the follow
  watcher listens there, as it is (:func:`listen_url`). Without it the watcher asks whether a
  pooler answers on its own connection (:func:`pooler_found`) and, if one does, reads the
  followed chronica's positions instead of listening.
"""

from __future__ import annotations

import weakref
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine

from chronica_core.errors import InvalidOption
from chronica_core.poolers import BACKEND_PID_SQL, LISTEN, PREPARED_STATEMENTS, pooler_between

__all__ = [
    "check_pooler_options",
    "keep_listen_url",
    "listen_url",
    "pooler_found",
    "prepares",
    "watch_prepared_statements",
]

_BACKEND = "sqlalchemy"
_PSYCOPG = ("psycopg", "psycopg_async")
_LISTEN_URLS: weakref.WeakKeyDictionary[Engine, str] = weakref.WeakKeyDictionary()
_PREPARES = "chronica_prepares"  # in a connection record's info: False when it prepares nothing


def check_pooler_options(url: URL, prepared_statements: bool | None, listen: str | None) -> None:
    """Raise ``InvalidOption`` for a pooler option ``url`` cannot take, or a ``listen`` that is no URL.

    ``prepared_statements`` and ``listen`` are for PostgreSQL on psycopg only. The error does not
    quote the ``listen`` URL (it may hold a password).
    """
    if url.get_backend_name() != "postgresql" or url.get_driver_name() not in _PSYCOPG:
        for name, value in ((PREPARED_STATEMENTS, prepared_statements), (LISTEN, listen)):
            if value is not None:
                raise InvalidOption(_BACKEND, name, "only for PostgreSQL on psycopg (postgresql+psycopg://)")
    if listen is not None:
        try:
            make_url(listen)
        except (ArgumentError, ValueError):
            raise InvalidOption(_BACKEND, LISTEN, "not a URL SQLAlchemy can read") from None


def pooler_found(dbapi_connection: Any) -> bool:
    """Whether a pooler answers on a psycopg DBAPI connection (blocking, or SQLAlchemy's asyncio adapter).

    One round trip; the transaction it may begin is ended. Raises what the driver raises.
    """
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(BACKEND_PID_SQL)
        row = cursor.fetchone()
    finally:
        cursor.close()
    if not dbapi_connection.autocommit:
        dbapi_connection.rollback()
    driver = getattr(dbapi_connection, "driver_connection", dbapi_connection)
    return pooler_between(driver.info.backend_pid, None if row is None else row[0])


def watch_prepared_statements(engine: Engine, prepared_statements: bool | None) -> None:
    """Turn psycopg's preparing off on ``engine``'s new connections when asked (see the module).

    ``engine`` is blocking or an ``AsyncEngine.sync_engine``; a driver other than psycopg is left
    alone (:func:`check_pooler_options` refused the option for it). Call it before any other
    ``connect`` listener that asks :func:`prepares`.
    """
    if prepared_statements is True or engine.dialect.driver not in _PSYCOPG:
        return
    found: list[bool] = []  # the first connection's answer, for every later one

    def connect(dbapi_connection: Any, connection_record: Any) -> None:
        if prepared_statements is None and not found:
            found.append(pooler_found(dbapi_connection))
        if prepared_statements is False or found[0]:
            getattr(dbapi_connection, "driver_connection", dbapi_connection).prepare_threshold = None
            connection_record.info[_PREPARES] = False

    event.listen(engine, "connect", connect)


def prepares(connection_record: Any) -> bool:
    """Whether the connection of SQLAlchemy's ``connection_record`` prepares statements (``None``: yes)."""
    return connection_record is None or connection_record.info.get(_PREPARES, True) is not False


def keep_listen_url(engine: Engine | AsyncEngine, listen: str | None) -> None:
    """Remember ``listen`` as the URL ``engine``'s store listens on (nothing when ``None``)."""
    if listen is not None:
        _LISTEN_URLS[engine.sync_engine if isinstance(engine, AsyncEngine) else engine] = listen


def listen_url(engine: Engine | AsyncEngine) -> str | None:
    """The ``listen`` URL of ``engine``'s store, ``None`` when it has none."""
    return _LISTEN_URLS.get(engine.sync_engine if isinstance(engine, AsyncEngine) else engine)
