"""Registers the SQLAlchemy backend through the ``chronica`` entry-point group, like any plugin.

Two entries under one name, so ``chronica backends`` shows what needs a server and what does not:
SQLite (embedded; the conformance suite runs it with no server) and the server dialects. Drivers
are imported only when a store is opened, so a missing one is reported as ``BackendUnavailable``.
"""

from __future__ import annotations

from typing import Any

from chronica_core.hookspecs import Backend, hookimpl
from chronica_core.store import AsyncStore, Store

__all__ = ["DEFAULT_URL", "chronica_backends"]

DEFAULT_URL = "sqlite:///chronica.db"
"""The embedded default store: a SQLite file ``chronica.db`` in the current directory."""

_INSTALL = "chronica-sqlalchemy"


def _open(url: str, **options: Any) -> Store:
    from chronica_sqlalchemy.store import SQLAlchemyStore

    return SQLAlchemyStore.open(url, **options)


def _open_async(url: str, **options: Any) -> AsyncStore:
    from chronica_sqlalchemy.store import open_async_sqlalchemy_store

    return open_async_sqlalchemy_store(url, **options)


@hookimpl
def chronica_backends() -> list[Backend]:
    """Declare ``sqlite``/``sqlite+*`` (no server) and ``mysql``, ``mariadb``, ``postgresql+*`` (servers)."""
    return [
        Backend(
            name="sqlalchemy",
            schemes=("sqlite", "sqlite+*"),
            idempotent=True,
            open=_open,
            open_async=_open_async,
            install=_INSTALL,
            needs_server=False,
            example_url="sqlite://",
        ),
        Backend(
            name="sqlalchemy",
            schemes=("mysql", "mysql+*", "mariadb", "mariadb+*", "postgresql+*"),
            idempotent=True,
            open=_open,
            open_async=_open_async,
            install=f"{_INSTALL}[all]",
            needs_server=True,
        ),
    ]
