"""Chronica on any SQL database SQLAlchemy 2 speaks (Core only): SQLite, MariaDB/MySQL, PostgreSQL.

Open it by URL through the registry (``open_store("sqlite:///chronica.db")``) or directly from an
engine you already have (``SQLAlchemyStore(engine)``, ``AsyncSQLAlchemyStore(async_engine)``).
"""

from chronica_sqlalchemy.engines import DEFAULT_BUSY_TIMEOUT_SECONDS, DEFAULT_SYNCHRONOUS, configure_sqlite
from chronica_sqlalchemy.plugin import DEFAULT_URL
from chronica_sqlalchemy.schema import SCHEMA_VERSION, Tables
from chronica_sqlalchemy.store import AsyncSQLAlchemyStore, SQLAlchemyStore

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_SECONDS",
    "DEFAULT_SYNCHRONOUS",
    "DEFAULT_URL",
    "SCHEMA_VERSION",
    "AsyncSQLAlchemyStore",
    "SQLAlchemyStore",
    "Tables",
    "configure_sqlite",
]
