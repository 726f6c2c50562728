"""Registers ``postgresql://`` and ``postgres://`` through the ``chronica`` entry-point group.

Light on purpose: psycopg is imported only when a store is opened, so a missing driver is reported
as ``BackendUnavailable`` instead of hiding the backend. So is a psycopg that finds no libpq
(chronica-postgres depends on plain ``psycopg``; its ``binary`` extra brings a libpq of its own):
the message says to install ``chronica-postgres[binary]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from chronica_core import AsyncStore, Backend, BackendUnavailable, Store, hookimpl
from chronica_core.capabilities import BATCH, ERASURE, FOLLOW, HISTORY, LISTING, NATIVE, RETENTION
from chronica_core.install import install_command

__all__ = ["INSTALL", "chronica_backends", "libpq_hint", "open_async_store", "open_store"]

INSTALL = "chronica-postgres[binary]"
"""What to install for a working driver: psycopg with its own libpq (the ``binary`` extra)."""


@contextmanager
def libpq_hint() -> Iterator[None]:
    """Around the import of :mod:`chronica_postgres.store` (which imports psycopg and psycopg_pool).

    Raises:
        BackendUnavailable: psycopg is installed but cannot load a libpq (no ``binary`` or ``c``
            extra and no system libpq); the message names what to install. A module that is not
            installed at all (``ModuleNotFoundError``) passes through: the registry turns it into
            ``BackendUnavailable`` naming :data:`INSTALL`.
    """
    try:
        yield
    except ModuleNotFoundError:
        raise
    except ImportError as error:  # psycopg: "no pq wrapper available", then the attempts it made
        first_line = (str(error).splitlines() or [type(error).__name__])[0]
        raise BackendUnavailable(
            f"backend 'postgres' cannot load psycopg ({first_line}): psycopg needs libpq; "
            f"{install_command(INSTALL)} brings one"
        ) from error


def open_store(url: str, **options: Any) -> Store:
    """Open a :class:`chronica_postgres.PostgresStore` (migrating it unless ``auto_migrate=False``)."""
    with libpq_hint():
        from chronica_postgres.store import PostgresStore

    return PostgresStore(url, **options)


def open_async_store(url: str, **options: Any) -> AsyncStore:
    """Return a :class:`chronica_postgres.AsyncPostgresStore`; it connects on first use."""
    with libpq_hint():
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
            capabilities=(BATCH, LISTING, ERASURE, FOLLOW, NATIVE, HISTORY, RETENTION),
            open=open_store,
            open_async=open_async_store,
            install=INSTALL,
            needs_server=True,
            follows="LISTEN/NOTIFY",
        )
    ]
