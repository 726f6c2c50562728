"""Where the databases differ, a module each, as SQLAlchemy lays out its own dialects.

:func:`store_dialect_class` gives the room of a SQLAlchemy dialect name: SQLite, PostgreSQL,
MariaDB/MySQL (both named ``mysql`` here), or the default room for any other database.
"""

from __future__ import annotations

from chronica_sqlalchemy.dialects.default import StoreDialect
from chronica_sqlalchemy.dialects.mysql import MySQLStoreDialect
from chronica_sqlalchemy.dialects.postgresql import PostgreSQLStoreDialect
from chronica_sqlalchemy.dialects.sqlite import SQLiteStoreDialect

__all__ = ["StoreDialect", "store_dialect_class"]

_ROOMS: dict[str, type[StoreDialect]] = {
    "sqlite": SQLiteStoreDialect,
    "postgresql": PostgreSQLStoreDialect,
    "mysql": MySQLStoreDialect,
    "mariadb": MySQLStoreDialect,
}


def store_dialect_class(dialect_name: str) -> type[StoreDialect]:
    """The room for SQLAlchemy's ``dialect_name`` (``"sqlite"``, ``"mariadb"``...), or the default one."""
    return _ROOMS.get(dialect_name, StoreDialect)
