"""The raw baseline for chronica-sqlalchemy: the bare driver, and SQLAlchemy Core, on the store's tables.

Nothing here imports chronica-sqlalchemy: the tables are read from the database
(``MetaData.reflect``), so the baseline follows the store's storage whatever the store's code.

- ``floor``: the bare DB-API driver on a connection it keeps (``sqlite3``, PyMySQL, or psycopg
  with ``prepare=True``), running the simplest statements that do each job: an append moves the
  chronicum's ``last_seq`` and ``last_actum_at`` and inserts the actum in one transaction (SQLite:
  ``BEGIN IMMEDIATE``, ``UPDATE ... RETURNING``, ``INSERT``, ``COMMIT``; MariaDB/MySQL:
  ``UPDATE``, ``INSERT ... SELECT``, ``COMMIT``; PostgreSQL: one ``INSERT ... SELECT`` from an
  ``UPDATE ... RETURNING`` in autocommit); the window is one ``SELECT`` of the newest 20
  messages by the primary key (on MariaDB/MySQL on a second connection, in autocommit).
  Its asyncio twin: the same through the dialect's asyncio driver (``sqlite3`` on a worker
  thread, as ``asyncio.to_thread`` runs it; asyncmy; psycopg's ``AsyncConnection``).
- ``core``: SQLAlchemy Core doing the same jobs with the same statements built from the reflected
  tables, on an engine of its own (writes in a transaction, reads on a second engine in
  autocommit): what the library the store is named after costs, before the store adds anything.
"""

from __future__ import annotations

import asyncio
import importlib
import sqlite3
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    Engine,
    LargeBinary,
    MetaData,
    Table,
    bindparam,
    case,
    create_engine,
    event,
    insert,
    make_url,
    select,
    text,
    update,
)
from sqlalchemy.engine import URL

from chronica_core import Actum, Chronicum

__all__ = ["ASYNC_COLUMNS", "COLUMNS", "FLOOR", "Loader"]

FLOOR = (
    "the DB-API driver (sqlite3, PyMySQL, psycopg with prepare=True) on a connection it keeps;"
    " the simplest statements a job"
)

_FILL_BATCH = 5_000
_SYNCHRONOUS = "FULL"  # the store's default PRAGMA synchronous
_BUSY_SECONDS = 30.0  # the store's default busy timeout


def _dialect(url: URL) -> str:
    name = url.get_backend_name()
    return "mysql" if name in ("mysql", "mariadb") else name


def _sqlite_settings(options: dict[str, str]) -> list[str]:
    synchronous = options.get("synchronous", _SYNCHRONOUS).upper()
    busy = float(options.get("busy_timeout", _BUSY_SECONDS))
    return [f"PRAGMA synchronous = {synchronous}", f"PRAGMA busy_timeout = {int(busy * 1000)}"]


def _engine(url: str, options: dict[str, str], **arguments: Any) -> Engine:
    """An engine on the store's database (SQLite: the store's ``synchronous`` and busy timeout)."""
    engine = create_engine(url, **arguments)
    if _dialect(engine.url) == "sqlite":
        settings = _sqlite_settings(options)

        @event.listens_for(engine, "connect")
        def _set(connection: Any, _: Any) -> None:
            cursor = connection.cursor()
            for statement in settings:
                cursor.execute(statement)
            cursor.close()

    return engine


class _Tables:
    """The store's ``chronica`` and ``acta`` tables, reflected once per database and schema."""

    _cache: ClassVar[dict[tuple[str, str | None], _Tables]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, engine: Engine, schema: str | None) -> None:
        metadata = MetaData(schema=schema)
        metadata.reflect(engine, only=["chronica", "acta"])
        prefix = f"{schema}." if schema else ""
        self.chronica: Table = metadata.tables[f"{prefix}chronica"]
        self.acta: Table = metadata.tables[f"{prefix}acta"]
        self.content_is_bytes = isinstance(self.acta.c.content.type, LargeBinary)

    @classmethod
    def of(cls, url: str, options: dict[str, str]) -> _Tables:
        """The reflected tables of the store at ``url`` (reflected on first use, then shared)."""
        key = (url, options.get("schema"))
        with cls._lock:
            if key not in cls._cache:
                engine = _engine(url, options)
                try:
                    cls._cache[key] = cls(engine, options.get("schema"))
                finally:
                    engine.dispose()
            return cls._cache[key]

    def content(self, value: str) -> Any:
        """``value`` as the ``content`` column takes it (UTF-8 bytes in a ``bytea``)."""
        return value.encode() if self.content_is_bytes else value

    def name(self, table: Table) -> str:
        """``table``'s name as written in hand-made SQL (schema-qualified when it has one)."""
        return f"{table.schema}.{table.name}" if table.schema else table.name


def _moment(dialect: str, at: datetime) -> datetime:
    """A moment as the dialect's column keeps it: aware on PostgreSQL, naive UTC elsewhere."""
    return at if dialect == "postgresql" else at.astimezone(UTC).replace(tzinfo=None)


class Loader:
    """Creates chronica and bulk-loads acta with Core ``executemany`` in batches, then ANALYZE.

    Args:
        url: the store's URL (any chronica-sqlalchemy takes).
        options: the store's options (``schema``, ``synchronous``, ``busy_timeout``; the rest
            are ignored).
    """

    fills_store = True

    def __init__(self, url: str, **options: str) -> None:
        self._options = dict(options)
        self._engine = _engine(url, self._options)
        self._dialect = _dialect(self._engine.url)
        self._tables = _Tables.of(url, self._options)

    def _chronicum_row(self, chronicum_id: str, owner_id: str, started_at: datetime) -> dict[str, Any]:
        row = {
            "id": chronicum_id,
            "owner_id": owner_id,
            "started_at": _moment(self._dialect, started_at),
            "last_seq": 0,
        }
        if "last_active" in self._tables.chronica.c:  # the retention index's column, as create sets it
            row["last_active"] = row["started_at"]
        return row

    def prepare(self, chronicum_id: str, owner_id: str) -> None:
        """Insert the chronicum's row."""
        with self._engine.begin() as connection:
            connection.execute(
                insert(self._tables.chronica), self._chronicum_row(chronicum_id, owner_id, datetime.now(UTC))
            )

    def fill_chronica(self, chronica: Sequence[Chronicum]) -> None:
        """Insert many chronica's rows in batches, in one transaction, then ANALYZE."""
        with self._engine.begin() as connection:
            for start in range(0, len(chronica), _FILL_BATCH):
                rows = [
                    self._chronicum_row(chronicum.id, chronicum.owner_id, chronicum.started_at)
                    for chronicum in chronica[start : start + _FILL_BATCH]
                ]
                connection.execute(insert(self._tables.chronica), rows)
        self._analyze(self._tables.chronica)

    def fill(self, chronicum_id: str, acta: Sequence[Actum]) -> None:
        """Insert the history in batches and move the chronicum's counters past it, then ANALYZE."""
        tables = self._tables
        with self._engine.begin() as connection:
            for start in range(0, len(acta), _FILL_BATCH):
                rows = [
                    {
                        "chronicum_id": chronicum_id,
                        "seq": seq,
                        "id": actum.id,
                        "kind": str(actum.kind),
                        "actor_kind": str(actum.actor_kind),
                        "actor": actum.actor,
                        "content": tables.content(actum.content),
                        "at": _moment(self._dialect, actum.at or datetime.now(UTC)),
                    }
                    for seq, actum in enumerate(acta[start : start + _FILL_BATCH], start=start + 1)
                ]
                connection.execute(insert(tables.acta), rows)
            last_at = _moment(self._dialect, acta[-1].at or datetime.now(UTC))
            connection.execute(
                update(tables.chronica)
                .where(tables.chronica.c.id == chronicum_id)
                .values(
                    last_seq=len(acta),
                    last_actum_at=last_at,
                    **({"last_active": last_at} if "last_active" in tables.chronica.c else {}),
                )
            )
        self._analyze(tables.acta)

    def _analyze(self, table: Table) -> None:
        analyze = "ANALYZE TABLE" if self._dialect == "mysql" else "ANALYZE"
        with self._engine.begin() as connection:
            connection.execute(text(f"{analyze} {self._tables.name(table)}"))

    def close(self) -> None:
        """Dispose of its engine."""
        self._engine.dispose()


# --------------------------------------------------------------------------------------------
# The floor: the bare driver, one small class a dialect


class _Statements:
    """The floor's hand-written statements for one dialect, on the reflected tables' names."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        self.url = make_url(url)
        self.dialect = _dialect(self.url)
        self.options = options
        self.tables = _Tables.of(url, options)
        chronica, acta = self.tables.name(self.tables.chronica), self.tables.name(self.tables.acta)
        mark = "?" if self.dialect == "sqlite" else "%s"
        marks = ", ".join([mark] * 5)
        columns = "chronicum_id, seq, id, kind, actor_kind, actor, content, at"
        self.window = (
            f"SELECT seq, id, kind, actor_kind, actor, content, at FROM {acta}"
            f" WHERE chronicum_id = {mark} AND kind = 'message' ORDER BY seq DESC LIMIT 20"
        )
        if self.dialect == "sqlite":
            self.advance = (
                f"UPDATE {chronica} SET last_seq = last_seq + 1,"
                " last_actum_at = max(coalesce(last_actum_at, ?), ?) WHERE id = ?"
                " RETURNING last_seq, last_actum_at"
            )
            self.insert = f"INSERT INTO {acta} ({columns}) VALUES (?, ?, {marks}, ?)"
        elif self.dialect == "mysql":
            self.advance = (
                f"UPDATE {chronica} SET last_seq = last_seq + 1,"
                f" last_actum_at = GREATEST(COALESCE(last_actum_at, %s), %s) WHERE id = %s"
            )
            self.insert = (
                f"INSERT INTO {acta} ({columns}) SELECT id, last_seq, {marks}, last_actum_at"
                f" FROM {chronica} WHERE id = %s"
            )
        else:
            self.insert = (
                f"WITH chronicum AS (UPDATE {chronica} SET last_seq = last_seq + 1,"
                f" last_actum_at = greatest(clock_timestamp(), last_actum_at) WHERE id = %s"
                f" RETURNING id, last_seq, last_actum_at)"
                f" INSERT INTO {acta} ({columns}) SELECT id, last_seq, {marks}, last_actum_at"
                f" FROM chronicum RETURNING seq, at"
            )

    def fields(self, actum: Actum) -> tuple[Any, ...]:
        """``(id, kind, actor_kind, actor, content)`` as the columns take them."""
        content = self.tables.content(actum.content)
        return (actum.id, str(actum.kind), str(actum.actor_kind), actum.actor, content)

    def sqlite_connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.url.database or ":memory:", isolation_level=None, check_same_thread=False
        )
        for statement in _sqlite_settings(self.options):
            connection.execute(statement)
        return connection

    def mysql_arguments(self, *, autocommit: bool) -> dict[str, Any]:
        return {
            "host": self.url.host or "localhost",
            "port": self.url.port or 3306,
            "user": self.url.username or "root",
            "password": self.url.password or "",
            "db": self.url.database,
            "charset": "utf8mb4",
            "autocommit": autocommit,
        }

    def libpq_url(self) -> str:
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)


class _SQLiteFloor:
    def __init__(self, statements: _Statements) -> None:
        self._statements = statements
        self._connection: sqlite3.Connection | None = None

    def _connected(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection = self._statements.sqlite_connect()
        return self._connection

    def append(self, actum: Actum) -> None:
        statements, connection = self._statements, self._connected()
        now = datetime.now(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
        connection.execute("BEGIN IMMEDIATE")
        try:
            seq, at = connection.execute(statements.advance, (now, now, actum.chronicum_id)).fetchone()
            connection.execute(statements.insert, (actum.chronicum_id, seq, *statements.fields(actum), at))
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        rows = self._connected().execute(self._statements.window, (chronicum_id,)).fetchall()
        rows.reverse()
        return rows

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()


class _MySQLFloor:
    """PyMySQL: appends on a connection with autocommit off, reads on one with it on."""

    def __init__(self, statements: _Statements) -> None:
        self._statements = statements
        self._writes: Any = None
        self._reads: Any = None

    @staticmethod
    def _connect(statements: _Statements, *, autocommit: bool) -> Any:
        pymysql = importlib.import_module("pymysql")  # installed with the mysql extra only
        return pymysql.connect(**statements.mysql_arguments(autocommit=autocommit))

    def append(self, actum: Actum) -> None:
        statements = self._statements
        if self._writes is None:
            self._writes = self._connect(statements, autocommit=False)
        now = datetime.now(UTC).replace(tzinfo=None)
        with self._writes.cursor() as cursor:
            cursor.execute(statements.advance, (now, now, actum.chronicum_id))
            cursor.execute(statements.insert, (*statements.fields(actum), actum.chronicum_id))
        self._writes.commit()

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        if self._reads is None:
            self._reads = self._connect(self._statements, autocommit=True)
        with self._reads.cursor() as cursor:
            cursor.execute(self._statements.window, (chronicum_id,))
            rows = list(cursor.fetchall())
        rows.reverse()
        return rows

    def close(self) -> None:
        for connection in (self._writes, self._reads):
            if connection is not None:
                connection.close()


class _PostgresFloor:
    """psycopg with ``prepare=True`` in autocommit."""

    def __init__(self, statements: _Statements) -> None:
        self._statements = statements
        self._connection: Any = None

    def _connected(self) -> Any:
        if self._connection is None:
            import psycopg

            self._connection = psycopg.connect(self._statements.libpq_url(), autocommit=True)
            self._connection.execute("SET TIME ZONE 'UTC'")
        return self._connection

    def append(self, actum: Actum) -> None:
        statements = self._statements
        parameters = (actum.chronicum_id, *statements.fields(actum))
        self._connected().execute(statements.insert, parameters, prepare=True).fetchone()

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        rows: list[Any] = (
            self._connected().execute(self._statements.window, (chronicum_id,), prepare=True).fetchall()
        )
        rows.reverse()
        return rows

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()


_FLOORS: dict[str, type[Any]] = {"sqlite": _SQLiteFloor, "mysql": _MySQLFloor, "postgresql": _PostgresFloor}


class Floor:
    """The bare driver of the store's dialect (see the module's docstring)."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        statements = _Statements(url, options)
        self._floor = _FLOORS[statements.dialect](statements)

    def append(self, actum: Actum) -> None:
        """Move the chronicum's counter and insert the actum, in one transaction."""
        self._floor.append(actum)

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """The newest 20 messages, oldest first (``n`` is always 20 here)."""
        rows: list[Any] = self._floor.last_messages(chronicum_id, n)
        return rows

    def close(self) -> None:
        """Close its connection(s)."""
        self._floor.close()


class AsyncFloor:
    """The floor through the dialect's asyncio driver (see the module's docstring)."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        self._statements = _Statements(url, options)
        self._sqlite = _SQLiteFloor(self._statements) if self._statements.dialect == "sqlite" else None
        self._writes: Any = None
        self._reads: Any = None

    async def _mysql(self, *, autocommit: bool) -> Any:
        import asyncmy

        arguments = self._statements.mysql_arguments(autocommit=autocommit)
        arguments["database"] = arguments.pop("db")
        return await asyncmy.connect(**arguments)

    async def _postgres(self) -> Any:
        import psycopg

        connection = await psycopg.AsyncConnection.connect(self._statements.libpq_url(), autocommit=True)
        await connection.execute("SET TIME ZONE 'UTC'")
        return connection

    async def append(self, actum: Actum) -> None:
        """As :meth:`Floor.append`, awaited."""
        statements = self._statements
        if self._sqlite is not None:
            await asyncio.to_thread(self._sqlite.append, actum)
        elif statements.dialect == "mysql":
            if self._writes is None:
                self._writes = await self._mysql(autocommit=False)
            now = datetime.now(UTC).replace(tzinfo=None)
            async with self._writes.cursor() as cursor:
                await cursor.execute(statements.advance, (now, now, actum.chronicum_id))
                await cursor.execute(statements.insert, (*statements.fields(actum), actum.chronicum_id))
            await self._writes.commit()
        else:
            if self._writes is None:
                self._writes = await self._postgres()
            parameters = (actum.chronicum_id, *statements.fields(actum))
            cursor = await self._writes.execute(statements.insert, parameters, prepare=True)
            await cursor.fetchone()

    async def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """As :meth:`Floor.last_messages`, awaited."""
        statements = self._statements
        if self._sqlite is not None:
            rows: list[Any] = await asyncio.to_thread(self._sqlite.last_messages, chronicum_id, n)
            return rows
        if statements.dialect == "mysql":
            if self._reads is None:
                self._reads = await self._mysql(autocommit=True)
            async with self._reads.cursor() as cursor:
                await cursor.execute(statements.window, (chronicum_id,))
                rows = list(await cursor.fetchall())
        else:
            if self._writes is None:
                self._writes = await self._postgres()
            cursor = await self._writes.execute(statements.window, (chronicum_id,), prepare=True)
            rows = await cursor.fetchall()
        rows.reverse()
        return rows

    async def close(self) -> None:
        """Close its connection(s)."""
        if self._sqlite is not None:
            self._sqlite.close()
        for connection in (self._writes, self._reads):
            if connection is None:
                continue
            if self._statements.dialect == "mysql":
                await connection.ensure_closed()
            else:
                await connection.close()


# --------------------------------------------------------------------------------------------
# SQLAlchemy Core


class Core:
    """SQLAlchemy Core on an engine of its own: the floor's jobs as Core statements, built once."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        self._url, self._options = url, options
        self._tables = _Tables.of(url, options)
        self._dialect = _dialect(make_url(url))
        self._writes: Engine | None = None
        self._reads: Engine | None = None
        chronica, acta = self._tables.chronica, self._tables.acta
        self._window = (
            select(
                acta.c.seq, acta.c.id, acta.c.kind, acta.c.actor_kind, acta.c.actor, acta.c.content, acta.c.at
            )
            .where(acta.c.chronicum_id == bindparam("chronicum_id"), acta.c.kind == "message")
            .order_by(acta.c.seq.desc())
            .limit(20)
        )
        now = bindparam("now", type_=chronica.c.last_actum_at.type)
        moved = (
            update(chronica)
            .where(chronica.c.id == bindparam("chronicum_id"))
            .values(
                last_seq=chronica.c.last_seq + 1,
                last_actum_at=case((chronica.c.last_actum_at > now, chronica.c.last_actum_at), else_=now),
            )
        )
        fields = ["id", "kind", "actor_kind", "actor", "content"]
        given = [bindparam(f"actum_{name}", type_=acta.c[name].type) for name in fields]
        names = ["chronicum_id", "seq", *fields, "at"]
        self._advance: Any = moved
        self._insert: Any = insert(acta)
        if self._dialect == "postgresql":  # one statement, in autocommit
            chronicum = moved.returning(chronica.c.id, chronica.c.last_seq, chronica.c.last_actum_at).cte()
            source = select(chronicum.c.id, chronicum.c.last_seq, *given, chronicum.c.last_actum_at)
            self._insert = insert(acta).from_select(names, source)
        elif self._dialect == "sqlite":
            self._advance = moved.returning(chronica.c.last_seq, chronica.c.last_actum_at)
        else:
            source = select(chronica.c.id, chronica.c.last_seq, *given, chronica.c.last_actum_at).where(
                chronica.c.id == bindparam("chronicum_id")
            )
            self._insert = insert(acta).from_select(names, source)

    def append(self, actum: Actum) -> None:
        """Move the counter and insert the actum in one transaction (PostgreSQL: one statement)."""
        if self._writes is None:
            autocommit = {"isolation_level": "AUTOCOMMIT"} if self._dialect == "postgresql" else {}
            self._writes = _engine(self._url, self._options, pool_size=1, max_overflow=0, **autocommit)
        now = _moment(self._dialect, datetime.now(UTC))
        content = self._tables.content(actum.content)
        fields = {
            "actum_id": actum.id,
            "actum_kind": str(actum.kind),
            "actum_actor_kind": str(actum.actor_kind),
            "actum_actor": actum.actor,
            "actum_content": content,
        }
        moving = {"chronicum_id": actum.chronicum_id, "now": now}
        with self._writes.begin() as connection:
            if self._dialect == "postgresql":
                connection.execute(self._insert, {**moving, **fields})
            elif self._dialect == "sqlite":
                seq, at = connection.execute(self._advance, moving).one()
                row = {"chronicum_id": actum.chronicum_id, "seq": seq, "at": at}
                row.update((name.removeprefix("actum_"), value) for name, value in fields.items())
                connection.execute(self._insert, row)
            else:
                connection.execute(self._advance, moving)
                connection.execute(self._insert, {"chronicum_id": actum.chronicum_id, **fields})

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """The newest 20 messages, oldest first, on the read engine (autocommit)."""
        if self._reads is None:
            self._reads = _engine(
                self._url, self._options, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0
            )
        with self._reads.connect() as connection:
            rows = list(connection.execute(self._window, {"chronicum_id": chronicum_id}).all())
        rows.reverse()
        return rows

    def close(self) -> None:
        """Dispose of its engines."""
        for engine in (self._writes, self._reads):
            if engine is not None:
                engine.dispose()


COLUMNS: dict[str, type[Any]] = {"floor": Floor, "core": Core}
ASYNC_COLUMNS: dict[str, type[Any]] = {"floor": AsyncFloor}
