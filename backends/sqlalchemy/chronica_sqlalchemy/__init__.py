"""Chronica on any SQL database SQLAlchemy 2 speaks (Core only): SQLite, MariaDB/MySQL, PostgreSQL.

Open it by URL through the registry (``open_store("sqlite:///chronica.db")``) or directly from an
engine you already have (``SQLAlchemyStore(engine)``, ``AsyncSQLAlchemyStore(async_engine)``,
``AsyncThreadedSQLAlchemyStore(engine)``).

Importing this package is cheap (the plugin module is loaded by every ``chronica`` command);
SQLAlchemy is imported when one of the names below is first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from chronica_sqlalchemy.plugin import DEFAULT_URL

if TYPE_CHECKING:
    from chronica_sqlalchemy.engines import (
        DEFAULT_BUSY_TIMEOUT_SECONDS,
        DEFAULT_SYNCHRONOUS,
        configure_sqlite,
    )
    from chronica_sqlalchemy.schema import SCHEMA_VERSION, Tables
    from chronica_sqlalchemy.store import (
        AsyncSQLAlchemyStore,
        AsyncThreadedSQLAlchemyStore,
        SQLAlchemyStore,
        open_async_sqlalchemy_store,
    )

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_SECONDS",
    "DEFAULT_SYNCHRONOUS",
    "DEFAULT_URL",
    "SCHEMA_VERSION",
    "AsyncSQLAlchemyStore",
    "AsyncThreadedSQLAlchemyStore",
    "SQLAlchemyStore",
    "Tables",
    "configure_sqlite",
    "open_async_sqlalchemy_store",
]

_HOMES = {
    "DEFAULT_BUSY_TIMEOUT_SECONDS": "engines",
    "DEFAULT_SYNCHRONOUS": "engines",
    "configure_sqlite": "engines",
    "SCHEMA_VERSION": "schema",
    "Tables": "schema",
    "AsyncSQLAlchemyStore": "store",
    "AsyncThreadedSQLAlchemyStore": "store",
    "SQLAlchemyStore": "store",
    "open_async_sqlalchemy_store": "store",
}


def __getattr__(name: str) -> Any:
    """Import the public names on first use, so that loading the plugin does not import SQLAlchemy."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"chronica_sqlalchemy.{home}"), name)
