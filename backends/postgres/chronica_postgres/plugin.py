"""Registers ``postgresql://`` and ``postgres://`` through the ``chronica`` entry-point group.

Light on purpose: psycopg is imported only when a store is opened, so a missing driver is reported
as ``BackendUnavailable`` (saying ``pip install chronica-postgres``) instead of hiding the backend.
"""

from __future__ import annotations

from typing import Any

from chronica_core import AsyncStore, Backend, Store, hookimpl
from chronica_core.capabilities import BATCH, ERASURE, FOLLOW, LISTING

__all__ = ["chronica_backends", "open_async_store", "open_store"]


def open_store(url: str, **options: Any) -> Store:
    """Open a :class:`chronica_postgres.PostgresStore` (migrating it unless ``auto_migrate=False``)."""
    from chronica_postgres.store import PostgresStore

    return PostgresStore(url, **options)


def open_async_store(url: str, **options: Any) -> AsyncStore:
    """Return a :class:`chronica_postgres.AsyncPostgresStore`; it connects on first use."""
    from chronica_postgres.store import AsyncPostgresStore

    return AsyncPostgresStore(url, **options)


@hookimpl
def chronica_backends() -> list[Backend]:
    """Declare the PostgreSQL backend: idempotent, with every capability, needs a server."""
    return [
        Backend(
            name="postgres",
            schemes=("postgresql", "postgres"),
            idempotent=True,
            capabilities=(BATCH, LISTING, ERASURE, FOLLOW),
            open=open_store,
            open_async=open_async_store,
            install="chronica-postgres",
            needs_server=True,
        )
    ]
