"""Connections of the stores' own pools, which keep one cursor per statement (blocking and asyncio).

psycopg's ``Connection.execute`` (and ``AsyncConnection.execute``) builds a new cursor for every
call, with its own copy of the adapters and a new transformer that looks up again how to send each
parameter and read each column, on every call. A kept cursor run again on the same statement
reuses all of that (psycopg keeps a cursor's transformer while its query stays the same object).
Each cursor is used by one operation at a time, as its connection is; it goes when the connection
goes. A pool given by the caller has connections of psycopg's own classes: a statement runs on a
new cursor there, as ``execute`` makes it.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import TupleRow

from chronica_postgres.plans import Rows, Statement

__all__ = [
    "KEPT_CURSORS_MOST",
    "PooledAsyncConnection",
    "PooledConnection",
    "run_statement",
    "run_statement_async",
]

KEPT_CURSORS_MOST = 256
"""How many cursors a connection keeps at most: one per statement, and a window's statement is
composed per shape of reads (see :mod:`chronica_postgres.history_sql`), so their number has no
bound of its own."""


def _keeps(statement: Statement) -> bool:
    """Whether ``statement`` runs on a kept cursor: one with parameters, not bulky."""
    return statement.params is not None and not statement.bulky


class PooledConnection(psycopg.Connection[TupleRow]):
    """A connection of a pool the blocking store opened: it keeps one cursor per statement."""

    def __init__(self, *arguments: Any, **keywords: Any) -> None:
        super().__init__(*arguments, **keywords)
        self.kept_cursors: dict[bytes, psycopg.Cursor[TupleRow]] = {}

    def run(self, statement: Statement) -> Rows:
        """Run ``statement`` (one with parameters, not bulky) on its kept cursor; return its rows.

        The result is freed once read (a context window's may be large); what the cursor still
        holds until its next run is the statement's parameters, which are small (not ``bulky``).
        Raises what psycopg raises.
        """
        sql = statement.sql
        cursor = self.kept_cursors.get(sql)
        if cursor is None:
            if len(self.kept_cursors) >= KEPT_CURSORS_MOST:  # windows of many shapes: start afresh
                for kept in self.kept_cursors.values():
                    kept.close()
                self.kept_cursors.clear()
            cursor = self.kept_cursors[sql] = self.cursor()
        rows = cursor.execute(sql, statement.params, binary=True).fetchall()
        result = cursor.pgresult
        if result is not None:
            result.clear()
        return rows


class PooledAsyncConnection(psycopg.AsyncConnection[TupleRow]):
    """A connection of a pool the asyncio store opened: it keeps one cursor per statement.

    The asyncio twin of :class:`PooledConnection`; a loop's pool holds these, so a cursor never
    leaves its loop.
    """

    def __init__(self, *arguments: Any, **keywords: Any) -> None:
        super().__init__(*arguments, **keywords)
        self.kept_cursors: dict[bytes, psycopg.AsyncCursor[TupleRow]] = {}

    async def run(self, statement: Statement) -> Rows:
        """See :meth:`PooledConnection.run`, awaited. Raises what psycopg raises."""
        sql = statement.sql
        cursor = self.kept_cursors.get(sql)
        if cursor is None:
            if len(self.kept_cursors) >= KEPT_CURSORS_MOST:
                for kept in self.kept_cursors.values():
                    await kept.close()
                self.kept_cursors.clear()
            cursor = self.kept_cursors[sql] = self.cursor()
        await cursor.execute(sql, statement.params, binary=True)
        rows = await cursor.fetchall()
        result = cursor.pgresult
        if result is not None:
            result.clear()
        return rows


def run_statement(connection: psycopg.Connection[Any], statement: Statement) -> Rows:
    """Run ``statement`` on a borrowed ``connection`` in autocommit; return its rows.

    On a connection of the store's own pool a statement with parameters runs on the cursor the
    connection keeps for it, unless it is ``bulky``; anything else on a new cursor. Raises what
    psycopg raises.
    """
    if type(connection) is PooledConnection and _keeps(statement):
        return connection.run(statement)
    if not connection.autocommit:  # a pool given by the caller
        connection.autocommit = True
    return connection.execute(statement.sql, statement.params, binary=statement.binary).fetchall()


async def run_statement_async(connection: psycopg.AsyncConnection[Any], statement: Statement) -> Rows:
    """:func:`run_statement` on an asyncio connection. Raises what psycopg raises."""
    if type(connection) is PooledAsyncConnection and _keeps(statement):
        return await connection.run(statement)
    if not connection.autocommit:  # a pool given by the caller
        await connection.set_autocommit(True)
    cursor = await connection.execute(statement.sql, statement.params, binary=statement.binary)
    return await cursor.fetchall()
