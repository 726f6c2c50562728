"""The raw baseline for ``postgresql://`` (chronica-postgres): psycopg on connections it keeps.

- ``floor``: psycopg with ``prepare=True`` on an autocommit connection it keeps, running the
  simplest statement that does each job: for an append one ``INSERT ... SELECT`` whose CTE moves
  the chronicum's ``last_seq`` and ``last_actum_at`` (so appends stay ordered, as the store's),
  for the window a ``SELECT`` of the newest 20 messages by the primary key, its kind and limit
  written in. Prepared from the first call, it is planned once.
- ``psycopg``: the store's own statements (``chronica_postgres.schema.Statements``: the append
  that may notify a follower, the window joined to the chronicum's row, kinds as a ``text[]``
  parameter) on psycopg as it comes (prepared after five runs, ``plan_cache_mode`` left ``auto``,
  so a window can be planned again on every call). Kept to show how far the store's SQL and the
  driver's defaults sit above the floor.

Each column runs on a connection of its own, as the store runs on its pool's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
from chronica_postgres import Options
from chronica_postgres.plans import record_parameters, text_array
from chronica_postgres.schema import Statements
from psycopg import sql

from chronica_core import Actum, Chronicum

__all__ = ["ASYNC_COLUMNS", "COLUMNS", "FLOOR", "Loader"]

FLOOR = "psycopg, prepare=True, on an autocommit connection it keeps; the simplest statement a job"

_SET_UTC = "SET TIME ZONE 'UTC'"  # as the store's connections: moments arrive with no conversion


def _schema(options: dict[str, str]) -> str:
    return Options.parse(options).schema


def _connect(url: str) -> psycopg.Connection[tuple[Any, ...]]:
    connection = psycopg.connect(url, autocommit=True)
    connection.execute(_SET_UTC)
    return connection


def _floor_statements(schema: str) -> tuple[bytes, bytes]:
    """The floor's append and last-20 window, composed for ``schema``."""
    chronica, acta = sql.Identifier(schema, "chronica"), sql.Identifier(schema, "acta")
    append = sql.SQL(
        "WITH chronicum AS (UPDATE {chronica} SET last_seq = last_seq + 1,"
        " last_actum_at = greatest(clock_timestamp(), last_actum_at) WHERE id = %s"
        " RETURNING id, last_seq, last_actum_at)"
        " INSERT INTO {acta} (chronicum_id, seq, id, kind, actor_kind, actor, content, at)"
        " SELECT id, last_seq, %s, %s, %s, %s, %s, last_actum_at FROM chronicum RETURNING seq, at"
    ).format(chronica=chronica, acta=acta)
    window = sql.SQL(
        "SELECT seq, id, kind, actor_kind, actor, content, content_bytes, at FROM {acta}"
        " WHERE chronicum_id = %s AND kind = 'message' ORDER BY seq DESC LIMIT 20"
    ).format(acta=acta)
    return append.as_bytes(None), window.as_bytes(None)


def _fields(actum: Actum) -> tuple[str, str, str, str, str]:
    """``(id, kind, actor_kind, actor, content)`` as the store writes them."""
    return (actum.id, str(actum.kind), str(actum.actor_kind), actum.actor, actum.content)


class Loader:
    """Creates chronica with a plain ``INSERT`` and fills them by ``COPY`` (one connection).

    Args:
        url: the store's URL.
        options: the store's options; ``schema`` picks the tables, the rest are ignored.
    """

    fills_store = True

    def __init__(self, url: str, **options: str) -> None:
        self._schema = _schema(options)
        self._connection = _connect(url)
        chronica = sql.Identifier(self._schema, "chronica")
        self._create = (
            sql.SQL("INSERT INTO {} (id, owner_id, started_at) VALUES (%s, %s, %s)")
            .format(chronica)
            .as_bytes(None)
        )

    def _table(self, name: str) -> sql.Identifier:
        return sql.Identifier(self._schema, name)

    def prepare(self, chronicum_id: str, owner_id: str) -> None:
        """Insert the chronicum's row."""
        self._connection.execute(self._create, (chronicum_id, owner_id, datetime.now(UTC)))

    def fill_chronica(self, chronica: Sequence[Chronicum]) -> None:
        """Insert many chronica's rows (pipelined by ``executemany``), then ANALYZE."""
        with self._connection.transaction(), self._connection.cursor() as cursor:
            cursor.executemany(
                self._create,
                [(chronicum.id, chronicum.owner_id, chronicum.started_at) for chronicum in chronica],
            )
        self._connection.execute(sql.SQL("ANALYZE {}").format(self._table("chronica")))

    def fill(self, chronicum_id: str, acta: Sequence[Actum]) -> None:
        """COPY the history into ``acta``, move the chronicum's counters past it, then ANALYZE."""
        columns = "chronicum_id, seq, id, kind, actor_kind, actor, content, at"
        with self._connection.transaction():
            copy_sql = sql.SQL("COPY {} (" + columns + ") FROM STDIN").format(self._table("acta"))
            with self._connection.cursor().copy(copy_sql) as copy:
                for seq, actum in enumerate(acta, start=1):
                    copy.write_row((chronicum_id, seq, *_fields(actum), actum.at))
            self._connection.execute(
                sql.SQL("UPDATE {} SET last_seq = %s, last_actum_at = %s WHERE id = %s").format(
                    self._table("chronica")
                ),
                (len(acta), acta[-1].at, chronicum_id),
            )
        self._connection.execute(sql.SQL("ANALYZE {}").format(self._table("acta")))

    def close(self) -> None:
        """Close its connection."""
        self._connection.close()


class _Kept:
    """One autocommit connection, opened on first use and kept until :meth:`close`."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._connection: psycopg.Connection[tuple[Any, ...]] | None = None

    def _connected(self) -> psycopg.Connection[tuple[Any, ...]]:
        if self._connection is None:
            self._connection = _connect(self._url)
        return self._connection

    def close(self) -> None:
        """Close its connection."""
        if self._connection is not None:
            self._connection.close()


class Floor(_Kept):
    """The floor: prepared statements on a connection kept from the first call."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        super().__init__(url)
        self._append, self._window = _floor_statements(_schema(options))

    def append(self, actum: Actum) -> None:
        """One prepared ``INSERT ... SELECT`` from the moved chronicum row."""
        parameters = (actum.chronicum_id, *_fields(actum))
        self._connected().execute(self._append, parameters, prepare=True).fetchone()

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """One prepared ``SELECT`` of the newest 20 messages (``n`` is always 20 here), oldest first."""
        rows = self._connected().execute(self._window, (chronicum_id,), prepare=True).fetchall()
        rows.reverse()
        return rows


class StoreStatements(_Kept):
    """The store's own statements on psycopg as it comes (prepared after five runs, plans left auto)."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        super().__init__(url)
        statements = Statements(_schema(options))
        self._record = statements.record
        self._window = statements.window(kinds=True, actor_kinds=False, limited=True)
        self._kinds = text_array(["message"])  # the parameter as the store sends it

    def append(self, actum: Actum) -> None:
        """The store's ``record`` statement, with the store's parameters (no key)."""
        self._connected().execute(self._record, record_parameters(actum, None)).fetchall()

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """The store's window statement; its rows (the chronicum's own id in the first column)."""
        parameters = (chronicum_id, self._kinds, n, chronicum_id)
        return self._connected().execute(self._window, parameters).fetchall()


class AsyncFloor:
    """The floor on psycopg's ``AsyncConnection``: the same prepared statements."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        self._url = url
        self._append, self._window = _floor_statements(_schema(options))
        self._connection: psycopg.AsyncConnection[tuple[Any, ...]] | None = None

    async def _connected(self) -> psycopg.AsyncConnection[tuple[Any, ...]]:
        if self._connection is None:
            self._connection = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
            await self._connection.execute(_SET_UTC)
        return self._connection

    async def append(self, actum: Actum) -> None:
        """As :meth:`Floor.append`, awaited."""
        connection = await self._connected()
        cursor = await connection.execute(self._append, (actum.chronicum_id, *_fields(actum)), prepare=True)
        await cursor.fetchone()

    async def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """As :meth:`Floor.last_messages`, awaited."""
        connection = await self._connected()
        cursor = await connection.execute(self._window, (chronicum_id,), prepare=True)
        rows = await cursor.fetchall()
        rows.reverse()
        return rows

    async def close(self) -> None:
        """Close its connection."""
        if self._connection is not None:
            await self._connection.close()


COLUMNS: dict[str, type[Any]] = {"floor": Floor, "psycopg": StoreStatements}
ASYNC_COLUMNS: dict[str, type[Any]] = {"floor": AsyncFloor}
