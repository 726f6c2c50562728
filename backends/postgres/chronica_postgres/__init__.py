"""Chronica's PostgreSQL backend (psycopg 3, psycopg_pool): ``open_store("postgresql://...")``.

The names below are imported lazily, so that importing the plugin never needs psycopg. A bad
option raises the core's ``chronica_core.InvalidOption`` (backend ``"postgres"``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chronica_postgres.plans import Options
    from chronica_postgres.schema import LATEST_VERSION
    from chronica_postgres.store import AsyncPostgresStore, PostgresStore, migrate

__all__ = ["LATEST_VERSION", "AsyncPostgresStore", "Options", "PostgresStore", "migrate"]

_HOMES = {
    "Options": "chronica_postgres.plans",
    "LATEST_VERSION": "chronica_postgres.schema",
    "AsyncPostgresStore": "chronica_postgres.store",
    "PostgresStore": "chronica_postgres.store",
    "migrate": "chronica_postgres.store",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'chronica_postgres' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
