"""The raw baseline for ``postgresql://``: psycopg on autocommit connections, no pool, no plans.

The first variant, ``psycopg``, runs exactly the SQL text the store runs (taken from
``chronica_postgres.schema.Statements``): for ``record`` the one ``INSERT ... RETURNING`` whose CTE
moves the chronicum's ``last_seq`` and ``last_actum_at``; for the context window the one lateral
query. So its ratio is what the store, the pool and Chronicarius add on top of the same work.

The second, ``psycopg plain INSERT``, is the issue's literal yardstick: a bare autocommit
``INSERT INTO acta ... RETURNING at`` with a client-side ``seq`` (negative, so it never collides
with the store's), which neither moves the chronicum nor orders concurrent writers; it shows
what the ordering guarantee itself costs.

The third, ``psycopg without NOTIFY``, runs the store's ``record`` statement as a store opened
with ``notify=False`` has it (the same statement less its ``pg_notify``). The first variant's
statement notifies only chronica being followed (``followed_until``), and nobody follows the
benchmark's, so the two do the same work but for reading that column: beside the first, it shows
what the check costs an append. Its reads are the first variant's.

Each variant runs on a connection of its own, as the store runs on its pool's: one call per
variant and round goes to each connection, as one goes to the store's. Sharing one connection
made the floor faster than any connection used once a round (its server process stayed warm
between three calls a round; 25-95 µs a call on a 2-CPU VM), which no store could match.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
from chronica_postgres import Options
from chronica_postgres.plans import text_array
from chronica_postgres.schema import SET_UTC, Statements
from psycopg import sql

from chronica_core import Actum, Chronicum

__all__ = ["RawBaseline"]

_COLUMNS = "chronicum_id, seq, id, kind, actor_kind, actor, content, at"


def _fields(actum: Actum) -> tuple[str, str, str, str, str]:
    """``(id, kind, actor_kind, actor, content)`` as the store writes them."""
    return (actum.id, str(actum.kind), str(actum.actor_kind), actum.actor, actum.content)


class _Connection:
    """One autocommit psycopg connection (opened on first use) and the store's statements."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        self.url = url
        self.schema = Options.parse(options).schema
        self.statements = Statements(self.schema)
        self._connection: psycopg.Connection[tuple[Any, ...]] | None = None

    @property
    def connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        if self._connection is None:
            self._connection = psycopg.connect(self.url, autocommit=True)
            self._connection.execute(SET_UTC)  # as the store's connections
        return self._connection

    def table(self, name: str) -> sql.Identifier:
        return sql.Identifier(self.schema, name)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()


class _OtherVariant:
    """A variant beside the first, on a connection of its own: it creates, reads and closes there."""

    def __init__(self, raw: _Connection) -> None:
        self._raw = raw

    def prepare(self, chronicum_id: str, owner_id: str) -> None:
        """Insert the chronicum's row on its own connection (its writer threads open no other)."""
        _create(self._raw, chronicum_id, owner_id)

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        return _window(self._raw, chronicum_id, n)

    def close(self) -> None:
        """Close its connection."""
        self._raw.close()


class _PlainInsert(_OtherVariant):
    """``INSERT INTO acta ... RETURNING at`` alone."""

    name = "psycopg plain INSERT"

    def __init__(self, raw: _Connection) -> None:
        super().__init__(raw)
        self._sql = (
            sql.SQL(
                "INSERT INTO {} (chronicum_id, seq, id, kind, actor_kind, actor, content, at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, clock_timestamp()) RETURNING at"
            )
            .format(self._raw.table("acta"))
            .as_bytes(None)
        )
        self._seq: dict[str, Iterator[int]] = {}

    def append(self, actum: Actum) -> None:
        seq = next(self._seq.setdefault(actum.chronicum_id, itertools.count(-1, -1)))
        parameters = (actum.chronicum_id, seq, *_fields(actum))
        self._raw.connection.execute(self._sql, parameters).fetchone()


class _WithoutNotify(_OtherVariant):
    """The store's ``record`` statement without ``pg_notify`` (``Statements(schema, notify=False)``)."""

    name = "psycopg without NOTIFY"

    def __init__(self, raw: _Connection) -> None:
        super().__init__(raw)
        self._record = Statements(raw.schema, notify=False).record

    def append(self, actum: Actum) -> None:
        self._raw.connection.execute(self._record, _record_parameters(actum)).fetchall()


def _create(raw: _Connection, chronicum_id: str, owner_id: str) -> None:
    """Insert the chronicum's row on ``raw``'s connection, as ``Store.create`` does."""
    raw.connection.execute(
        raw.statements.create, (chronicum_id, owner_id, datetime.now(UTC), None)
    ).fetchall()


def _window_query(raw: _Connection, chronicum_id: str, n: int) -> tuple[bytes, tuple[Any, ...]]:
    statement = raw.statements.window(kinds=True, actor_kinds=False, limited=True)
    kinds = text_array(["message"])  # the parameter as the store sends it: one text[] literal
    return statement, (chronicum_id, kinds, n, chronicum_id)


def _window(raw: _Connection, chronicum_id: str, n: int) -> list[Any]:
    return raw.connection.execute(*_window_query(raw, chronicum_id, n)).fetchall()


def _record_parameters(actum: Actum) -> tuple[Any, ...]:
    """The parameters of the store's ``record`` statement for ``actum``."""
    return (actum.chronicum_id, *_fields(actum), None, None)  # no NUL, no key


class _AsyncPsycopg:
    """psycopg's ``AsyncConnection`` (autocommit, opened on first use) running the same statements."""

    def __init__(self, raw: _Connection) -> None:
        self._raw = raw
        self._connection: psycopg.AsyncConnection[tuple[Any, ...]] | None = None

    async def _connected(self) -> psycopg.AsyncConnection[tuple[Any, ...]]:
        if self._connection is None:
            self._connection = await psycopg.AsyncConnection.connect(self._raw.url, autocommit=True)
            await self._connection.execute(SET_UTC)
        return self._connection

    async def append(self, actum: Actum) -> None:
        connection = await self._connected()
        cursor = await connection.execute(self._raw.statements.record, _record_parameters(actum))
        await cursor.fetchall()

    async def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        connection = await self._connected()
        cursor = await connection.execute(*_window_query(self._raw, chronicum_id, n))
        return await cursor.fetchall()

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()


class RawBaseline:
    """psycopg doing the store's SQL, each variant on its own connection (one instance per writer thread).

    Args:
        url: the store's URL.
        options: the store's options; ``schema`` picks the tables, the rest are ignored.
    """

    name = "psycopg"
    thread_safe = False
    fills_store = True

    def __init__(self, url: str, **options: str) -> None:
        self._raw = _Connection(url, options)
        self.variants: dict[str, Any] = {
            self.name: self,
            _PlainInsert.name: _PlainInsert(_Connection(url, options)),
            _WithoutNotify.name: _WithoutNotify(_Connection(url, options)),
        }
        self.async_variants: dict[str, Any] = {self.name: _AsyncPsycopg(self._raw)}

    def prepare(self, chronicum_id: str, owner_id: str) -> None:
        """Insert the chronicum's row, as ``Store.create`` does."""
        _create(self._raw, chronicum_id, owner_id)

    def fill_chronica(self, chronica: Sequence[Chronicum]) -> None:
        """Insert many chronica with the store's own create statement (pipelined), then ANALYZE."""
        connection = self._raw.connection
        with connection.transaction(), connection.cursor() as cursor:
            cursor.executemany(
                self._raw.statements.create,
                [(chronicum.id, chronicum.owner_id, chronicum.started_at, None) for chronicum in chronica],
            )
        connection.execute(sql.SQL("ANALYZE {}").format(self._raw.table("chronica")))

    def fill(self, chronicum_id: str, acta: Sequence[Actum]) -> None:
        """COPY the history into ``acta``, move the chronicum's counters, then ANALYZE."""
        connection = self._raw.connection
        with connection.transaction():
            copy_sql = sql.SQL("COPY {} (" + _COLUMNS + ") FROM STDIN").format(self._raw.table("acta"))
            with connection.cursor().copy(copy_sql) as copy:
                for seq, actum in enumerate(acta, start=1):
                    copy.write_row((chronicum_id, seq, *_fields(actum), actum.at))
            connection.execute(
                sql.SQL("UPDATE {} SET last_seq = %s, last_actum_at = %s WHERE id = %s").format(
                    self._raw.table("chronica")
                ),
                (len(acta), acta[-1].at, chronicum_id),
            )
        connection.execute(sql.SQL("ANALYZE {}").format(self._raw.table("acta")))

    def append(self, actum: Actum) -> None:
        """The store's ``record`` statement, with the same parameters."""
        self._raw.connection.execute(self._raw.statements.record, _record_parameters(actum)).fetchall()

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """The store's context-window query for the last ``n`` messages; raw rows."""
        return _window(self._raw, chronicum_id, n)

    def close(self) -> None:
        """Close its connection and those of the other variants."""
        self._raw.close()
        for variant in self.variants.values():
            if variant is not self:
                variant.close()
