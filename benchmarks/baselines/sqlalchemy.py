"""The raw baselines for the SQLAlchemy backend: SQLAlchemy Core, and the bare DB-API driver.

Two columns, both doing exactly the statements the store runs, on the tables the store created:

- ``core``: SQLAlchemy Core executing the store's own statement objects (taken from
  ``chronica_sqlalchemy.plans.Plans``) on an engine configured as the store's (same pool, WAL,
  ``synchronous``, ``BEGIN IMMEDIATE`` for writes on SQLite, ``READ COMMITTED`` on MariaDB).
  ``record``: connect, move the chronicum's counter and ``last_actum_at`` (``UPDATE ... RETURNING``
  on SQLite, ``UPDATE ... LAST_INSERT_ID(...)`` on MariaDB/MySQL), ``INSERT`` the actum
  (``INSERT ... SELECT`` from the chronicum's row on MariaDB/MySQL), ``COMMIT``; on PostgreSQL
  the store's one statement (the ``UPDATE ... RETURNING`` in the ``WITH`` of the ``INSERT``) on a
  connection in autocommit. Context window: the one outer-joined ``SELECT`` (in autocommit on
  PostgreSQL; on MariaDB/MySQL the ``UNION ALL`` on a read engine in autocommit, as the store's,
  with no ``ROLLBACK`` after it). Its ratio is what the plans, the row conversion and
  ``Chronicarius`` add: the issue's target (≤ 1.2×). Its asyncio twin runs the same functions on
  an ``AsyncEngine`` with the dialect's asyncio driver (aiosqlite on SQLite, asyncmy, psycopg's
  async API).
- the DB-API driver itself (``sqlite3``, ``pymysql`` or ``psycopg``, the last in autocommit): the
  same SQL, hand-written, on one connection (on MariaDB/MySQL two, as the store's two pools: the
  writes' with autocommit off, the reads' with it on), with rows left as the driver returns them.
  It shows what SQLAlchemy costs.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from chronica_sqlalchemy.dialects.default import actum_row
from chronica_sqlalchemy.engines import (
    AUTOCOMMIT,
    EngineOptions,
    create_async_read_engine,
    create_async_store_engine,
    create_read_engine,
    create_store_engine,
    sync_url,
)
from chronica_sqlalchemy.plans import Plans
from chronica_sqlalchemy.schema import Tables, is_mysql
from sqlalchemy import Connection, Engine, update
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

from chronica_core import ActaQuery, Actum, ActumKind, Chronicum

__all__ = ["RawBaseline"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FILL_BATCH = 5_000
_ACTA_COLUMNS = "chronicum_id, seq, id, kind, actor_kind, actor, content, at, idempotency_key"


def _chronicum_row(chronicum_id: str, owner_id: str, started_at: datetime) -> dict[str, Any]:
    """A chronicum's row as ``Store.create`` inserts it."""
    return {
        "id": chronicum_id,
        "owner_id": owner_id,
        "started_at": started_at,
        "last_actum_at": None,
        "last_seq": 0,
    }


class _Core:
    """SQLAlchemy Core running the store's statement objects on a store-configured engine."""

    name = "core"

    def __init__(self, url: str, options: dict[str, str]) -> None:
        parsed = EngineOptions(options)
        self.engine: Engine = create_store_engine(url, parsed)
        self.read_engine = create_read_engine(url, parsed)  # MariaDB/MySQL: reads in autocommit
        self.plans = Plans(Tables.build(parsed.schema), self.engine.dialect, parsed.schema)

    def append(self, actum: Actum) -> None:
        _append(self.engine, self.plans, actum)

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        return _last_messages(self.read_engine or self.engine, self.plans, chronicum_id, n)

    def close(self) -> None:
        self.engine.dispose()
        if self.read_engine is not None:
            self.read_engine.dispose()


def _begin_writing(connection: Connection) -> None:
    """SQLite: begin with ``BEGIN IMMEDIATE``, as the store's writes do."""
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _append(engine: Engine, plans: Plans, actum: Actum) -> None:
    """The statements of the store's dialect room for one append, each run on the Connection."""
    with engine.connect() as connection:
        if plans.autocommit:  # PostgreSQL: one statement, its own transaction
            connection.execution_options(isolation_level=AUTOCOMMIT)
        else:
            _begin_writing(connection)
        statements = plans.rules.append([actum], None, datetime.now(UTC), [1])
        outcome = None
        try:
            while True:
                outcome = connection.execute(*statements.send(outcome).args)
        except StopIteration:
            pass
        connection.commit()


def _last_messages(engine: Engine, plans: Plans, chronicum_id: str, n: int) -> list[Any]:
    query = ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=n)
    statement, parameters = plans.window_for(chronicum_id, query)
    with engine.connect() as connection:
        if plans.autocommit:
            connection.execution_options(isolation_level=AUTOCOMMIT)
        return [row for row in connection.execute(statement, parameters).all() if row[1] is not None]


class _AsyncCore:
    """Core on an ``AsyncEngine`` with the dialect's asyncio driver (aiosqlite, asyncmy, psycopg).

    The same functions as the Core variant, run through SQLAlchemy's greenlet bridge on the
    ``AsyncEngine``'s ``sync_engine``: what ``AsyncConnection`` does. Created on first use, inside
    the harness's event loop.
    """

    def __init__(self, url: str, options: dict[str, str], plans: Plans) -> None:
        self._url, self._options, self._plans = url, options, plans
        self._engine: AsyncEngine | None = None
        self._read_engine: AsyncEngine | None = None  # MariaDB/MySQL: reads in autocommit

    def _sync_engine(self) -> Engine:
        if self._engine is None:
            options = EngineOptions(self._options)
            self._engine = create_async_store_engine(self._url, options)
            self._read_engine = create_async_read_engine(self._url, options)
        return self._engine.sync_engine

    def _sync_read_engine(self) -> Engine:
        engine = self._sync_engine()
        return engine if self._read_engine is None else self._read_engine.sync_engine

    async def append(self, actum: Actum) -> None:
        await greenlet_spawn(_append, self._sync_engine(), self._plans, actum)

    async def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        rows: list[Any] = await greenlet_spawn(
            _last_messages, self._sync_read_engine(), self._plans, chronicum_id, n
        )
        return rows

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
        if self._read_engine is not None:
            await self._read_engine.dispose()


class _DBAPI:
    """The bare driver: the store's SQL by hand, one connection per thread (sqlite3, pymysql or psycopg)."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        parsed_options = EngineOptions(options)
        parsed = sync_url(url)
        dialect = parsed.get_backend_name()
        schema = f"{parsed_options.schema}." if parsed_options.schema else ""
        chronica, acta = f"{schema}chronica", f"{schema}acta"
        self.mysql = dialect in ("mysql", "mariadb")
        self.name = {"sqlite": "sqlite3", "postgresql": "psycopg"}.get(dialect, "pymysql")
        self._url, self._options = parsed, parsed_options
        self._local = threading.local()
        self._opened: list[Any] = []
        self._opened_lock = threading.Lock()
        mark = "?" if dialect == "sqlite" else "%s"
        self.sqlite = dialect == "sqlite"
        self.postgresql = dialect == "postgresql"
        if self.mysql:
            epoch = "'1970-01-01 00:00:00'"
            stored = f"TIMESTAMPDIFF(MICROSECOND, {epoch}, last_actum_at)"
            self.advance = (
                f"UPDATE {chronica} SET last_seq = last_seq + 1, last_actum_at = TIMESTAMPADD(MICROSECOND, "
                f"LAST_INSERT_ID(GREATEST({mark}, COALESCE({stored}, 0))), {epoch}) "
                f"WHERE {chronica}.id = {mark}"
            )
            self.insert = (
                f"INSERT INTO {acta} ({_ACTA_COLUMNS}) SELECT {chronica}.id, {chronica}.last_seq, "
                f"{mark}, {mark}, {mark}, {mark}, {mark}, {chronica}.last_actum_at, {mark} FROM {chronica} "
                f"WHERE {chronica}.id = {mark}"
            )
        else:
            self.advance = (
                f"UPDATE {chronica} SET last_seq = last_seq + 1, "
                f"last_actum_at = CASE WHEN last_actum_at > {mark} THEN last_actum_at ELSE {mark} END "
                f"WHERE {chronica}.id = {mark} "
                "RETURNING id, last_seq, last_actum_at"
            )
            values = ", ".join([mark] * 9)
            self.insert = f"INSERT INTO {acta} ({_ACTA_COLUMNS}) VALUES ({values}) RETURNING chronicum_id, id"
        # PostgreSQL: the store's one statement, on a connection in autocommit
        self.record = (
            f"WITH moved AS ({self.advance}) INSERT INTO {acta} ({_ACTA_COLUMNS}) "
            f"SELECT moved.id, moved.last_seq, {mark}, {mark}, {mark}, {mark}, {mark}, moved.last_actum_at, "
            f"{mark} FROM moved RETURNING chronicum_id, id, at"
        )
        recent = (
            f"SELECT chronicum_id, seq, id, kind, actor_kind, actor, content, at FROM {acta} "
            f"WHERE chronicum_id = {mark} AND kind IN ({mark}, {mark}, {mark}, {mark}) "
            f"ORDER BY seq DESC LIMIT {mark}"
        )
        if self.mysql:
            self.window = (
                f"({recent}) UNION ALL SELECT id, NULL, NULL, NULL, NULL, NULL, NULL, NULL "
                f"FROM {chronica} WHERE id = {mark}"
            )
        else:
            self.window = (
                f"SELECT {chronica}.id, recent.seq, recent.id, recent.kind, recent.actor_kind, recent.actor, "
                f"recent.content, recent.at FROM {chronica} LEFT OUTER JOIN ({recent}) AS recent "
                f"ON 1 = 1 WHERE {chronica}.id = {mark} ORDER BY recent.seq"
            )

    @property
    def connection(self) -> Any:
        """This thread's own connection, opened on first use (so one instance serves many threads)."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self._connect()
            with self._opened_lock:
                self._opened.append(connection)
        return connection

    @property
    def read_connection(self) -> Any:
        """MariaDB/MySQL: this thread's connection in autocommit for reads (as the store's read
        pool); elsewhere :attr:`connection`."""
        if not self.mysql:
            return self.connection
        connection = getattr(self._local, "read_connection", None)
        if connection is None:
            connection = self._local.read_connection = self._connect(autocommit=True)
            with self._opened_lock:
                self._opened.append(connection)
        return connection

    def _connect(self, *, autocommit: bool = False) -> Any:
        parsed, options = self._url, self._options
        if self.name == "sqlite3":
            import sqlite3

            connection: Any = sqlite3.connect(
                parsed.database or ":memory:", isolation_level=None, check_same_thread=False
            )
            for pragma in (
                f"PRAGMA busy_timeout = {int(options.busy_timeout * 1000)}",
                f"PRAGMA synchronous = {options.synchronous}",
                "PRAGMA foreign_keys = ON",
            ):
                connection.execute(pragma)
            return connection
        if self.mysql:
            pymysql = importlib.import_module("pymysql")
            connection = pymysql.connect(
                host=parsed.host or "localhost",
                port=parsed.port or 3306,
                user=parsed.username or "root",
                password=parsed.password or "",
                database=parsed.database,
                charset="utf8mb4",
                autocommit=autocommit,
            )
            if not autocommit:
                with connection.cursor() as cursor:
                    cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            return connection
        import psycopg

        return psycopg.connect(
            parsed.set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True
        )

    def _moment(self, at: datetime) -> Any:
        if self.sqlite:
            return at.replace(tzinfo=None).isoformat(" ")
        return at.replace(tzinfo=None) if self.mysql else at

    def append(self, actum: Actum) -> None:
        now = datetime.now(UTC)
        cursor = self.connection.cursor()
        try:
            if self.sqlite:
                cursor.execute("BEGIN IMMEDIATE")
            content: Any = actum.content if self.sqlite or self.mysql else actum.content.encode()
            if self.postgresql:
                values = (actum.id, actum.kind.value, actum.actor_kind.value, actum.actor, content, None)
                cursor.execute(self.record, (now, now, actum.chronicum_id, *values))
                cursor.fetchone()
                return
            if self.mysql:
                cursor.execute(
                    self.advance, ((now - _EPOCH) // timedelta(microseconds=1), actum.chronicum_id)
                )
                fields = (actum.id, actum.kind.value, actum.actor_kind.value, actum.actor, content, None)
                cursor.execute(self.insert, (*fields, actum.chronicum_id))
            else:
                at = self._moment(now)
                cursor.execute(self.advance, (at, at, actum.chronicum_id))
                _, seq, stored_at = cursor.fetchone()
                row = (actum.chronicum_id, seq, actum.id, actum.kind.value, actum.actor_kind.value)
                cursor.execute(self.insert, (*row, actum.actor, content, stored_at, None))
                cursor.fetchone()
            if self.sqlite:
                cursor.execute("COMMIT")
            else:
                self.connection.commit()
        finally:
            cursor.close()

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        cursor = self.read_connection.cursor()  # MariaDB/MySQL: in autocommit, nothing to end
        try:
            kinds = (ActumKind.MESSAGE.value,) * 4  # the store's fixed four slots, padded
            cursor.execute(self.window, (chronicum_id, *kinds, n, chronicum_id))
            rows = [row for row in cursor.fetchall() if row[1] is not None]  # not the chronicum's row
        finally:
            cursor.close()
        return rows

    def close(self) -> None:
        with self._opened_lock:
            for connection in self._opened:
                connection.close()
            self._opened.clear()


class RawBaseline:
    """SQLAlchemy Core and the DB-API driver doing the store's statements (thread-safe).

    Args:
        url: the store's URL (any the SQLAlchemy backend takes).
        options: the store's options (``schema``, ``synchronous``, ``busy_timeout``, ...).
    """

    name = "core"
    thread_safe = (
        True  # Core shares one engine (a pool like the store's); the driver has a connection a thread
    )
    fills_store = True

    def __init__(self, url: str, **options: str) -> None:
        self._core = _Core(url, dict(options))
        self._driver = _DBAPI(url, dict(options))
        self.variants: dict[str, Any] = {self._core.name: self._core, self._driver.name: self._driver}
        self.async_variants: dict[str, Any] = {
            self._core.name: _AsyncCore(url, dict(options), self._core.plans)
        }

    def prepare(self, chronicum_id: str, owner_id: str) -> None:
        """Insert the chronicum's row, as ``Store.create`` does."""
        with self._core.engine.connect() as connection:
            _begin_writing(connection)
            connection.execute(
                self._core.plans.tables.chronica.insert(),
                _chronicum_row(chronicum_id, owner_id, datetime.now(UTC)),
            )
            connection.commit()

    def fill_chronica(self, chronica: Sequence[Chronicum]) -> None:
        """Insert many chronica's rows in batches (executemany), in one transaction, then ANALYZE."""
        table = self._core.plans.tables.chronica
        with self._core.engine.connect() as connection:
            _begin_writing(connection)
            for start in range(0, len(chronica), _FILL_BATCH):
                rows = [
                    _chronicum_row(chronicum.id, chronicum.owner_id, chronicum.started_at)
                    for chronicum in chronica[start : start + _FILL_BATCH]
                ]
                connection.execute(table.insert(), rows)
            connection.commit()
            analyze = "ANALYZE TABLE" if is_mysql(self._core.engine.dialect) else "ANALYZE"
            connection.exec_driver_sql(f"{analyze} {table.fullname}")
            connection.commit()

    def fill(self, chronicum_id: str, acta: Sequence[Actum]) -> None:
        """Insert the history in batches (executemany) and move the chronicum's counter past it."""
        tables = self._core.plans.tables
        with self._core.engine.connect() as connection:
            _begin_writing(connection)  # one transaction on SQLite too
            for start in range(0, len(acta), _FILL_BATCH):
                batch = acta[start : start + _FILL_BATCH]
                rows = [
                    actum_row(actum, seq, actum.at or datetime.now(UTC))
                    for seq, actum in enumerate(batch, start=start + 1)
                ]
                connection.execute(tables.acta.insert(), rows)
            connection.execute(
                update(tables.chronica)
                .where(tables.chronica.c.id == chronicum_id)
                .values(last_seq=len(acta), last_actum_at=acta[-1].at)
            )
            connection.commit()
            if is_mysql(self._core.engine.dialect):
                connection.exec_driver_sql(f"ANALYZE TABLE {tables.acta.fullname}")
            else:
                connection.exec_driver_sql(f"ANALYZE {tables.acta.fullname}")
            connection.commit()

    def append(self, actum: Actum) -> None:
        """The Core variant's ``append`` (the first column)."""
        self._core.append(actum)

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """The Core variant's context window (the first column)."""
        return self._core.last_messages(chronicum_id, n)

    def close(self) -> None:
        """Close both variants."""
        self._driver.close()
        self._core.close()
