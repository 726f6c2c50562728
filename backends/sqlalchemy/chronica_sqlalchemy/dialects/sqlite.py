"""SQLite: a window joined along the primary key, the length limit, and one file a database.

Appends take the default room's two statements (``UPDATE ... RETURNING``, then the insert) in a
``BEGIN IMMEDIATE`` transaction (see :func:`chronica_sqlalchemy.engines.configure_sqlite`), which
also serialises migrations; the writers of one file in this process take turns first
(:mod:`chronica_sqlalchemy.sqlite_writers`).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any, ClassVar

from sqlalchemy import ColumnElement, Connection, Executable, Integer, and_, bindparam, column, select, table
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from chronica_core.plans import Plan
from chronica_sqlalchemy.dialects.default import StoreDialect
from chronica_sqlalchemy.sqlite_writers import database_file
from chronica_sqlalchemy.steps import Step, call

__all__ = ["ROW_RESERVE", "SQLiteStoreDialect"]

ROW_RESERVE = 8 * 1024
"""Bytes of SQLite's length limit (which bounds a whole row too) kept for the row's other columns."""

_MAX_LENGTH = 2**31 - 1  # the largest SQLITE_MAX_LENGTH SQLite can be built with


def length_limit(connection: Connection) -> int:
    """``SQLITE_LIMIT_LENGTH`` of the connection's ``sqlite3`` connection.

    aiosqlite keeps its ``sqlite3`` connection on a thread of its own: there the limit of the same
    library is read on a fresh in-memory connection (the same unless an app lowered it).
    """
    driver_connection = connection.connection.driver_connection
    if isinstance(driver_connection, sqlite3.Connection):
        return driver_connection.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    probe = sqlite3.connect(":memory:")
    try:
        return probe.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    finally:
        probe.close()


class SQLiteStoreDialect(StoreDialect):
    """SQLite's own ways (see the module)."""

    name: ClassVar[str] = "sqlite"
    ceiling: ClassVar[int | None] = _MAX_LENGTH - ROW_RESERVE
    most_parameters: ClassVar[int] = 32766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999
    elsewhere: ClassVar[str] = "Use another database file"

    @classmethod
    def schema_name_problem(cls, name: str) -> str | None:
        """Every name: one file is one database."""
        return "not supported on SQLite"

    @classmethod
    def connect_problem(cls, url: URL) -> str | None:
        """The file's path, and that its folder does not exist when so."""
        path = database_file(url)
        if path is None:
            return None
        folder = os.path.dirname(path)
        return f"the file {path}" + ("" if os.path.isdir(folder) else f": its folder {folder} does not exist")

    def window(self, filters: list[ColumnElement[bool]], limited: bool) -> Executable:
        """The chronicum's row, its matching acta outer-joined to it directly, the filters in the join.

        SQLite then reads them along the primary key, with no derived table to build and sort:
        newest first when ``limited`` (:meth:`in_order` turns them round), else oldest first.
        """
        chronica, acta = self.tables.chronica, self.tables.acta
        joined = and_(acta.c.chronicum_id == chronica.c.id, *filters)
        statement = (
            select(chronica.c.id, acta.c.seq, *self.actum_columns(), chronica.c.shaped)
            .select_from(chronica.outerjoin(acta, joined))
            .where(chronica.c.id == bindparam("chronicum_id"), chronica.c.owner_digest.is_(None))
        )
        if limited:
            return statement.order_by(acta.c.seq.desc()).limit(bindparam("last_n", type_=Integer()))
        return statement.order_by(acta.c.seq)

    def in_order(self, rows: list[Any], limited: bool) -> list[Any]:
        """Limited windows are read newest first: oldest first again."""
        return rows[::-1] if limited else rows

    def catalog(self, names: tuple[str, ...]) -> Executable | None:
        """``sqlite_master``'s tables and views of those names."""
        master = table("sqlite_master", column("name"), column("type"))
        return select(master.c.name).where(master.c.type.in_(("table", "view")), master.c.name.in_(names))

    def content_limit(self, write: bool) -> Plan[Step, int | None]:
        """The connection's ``SQLITE_LIMIT_LENGTH`` less :data:`ROW_RESERVE`."""
        length: int = yield call(length_limit, write=write)
        return length - ROW_RESERVE

    def too_large(self, error: DBAPIError) -> bool:
        """``SQLITE_TOOBIG``."""
        return getattr(error.orig, "sqlite_errorcode", None) == sqlite3.SQLITE_TOOBIG
