"""Registers the SQLAlchemy backend through the ``chronica`` entry-point group, like any plugin.

Two entries under one name, so ``chronica backends`` shows what needs a server and what does not:
SQLite (embedded; the conformance suite runs it with no server) and the server dialects. Drivers
are imported only when a store is opened, so a missing one is reported as ``BackendUnavailable``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from chronica_core.errors import BackendUnavailable
from chronica_core.hookspecs import Backend, hookimpl
from chronica_core.install import install_command
from chronica_core.store import AsyncStore, Store

__all__ = ["DEFAULT_URL", "chronica_backends"]

DEFAULT_URL = "sqlite:///chronica.db"
"""The embedded default store: a SQLite file ``chronica.db`` in the current directory."""

_INSTALL = "chronica-sqlalchemy"

_CAPABILITIES = ("batch", "listing", "erasure", "follow", "native", "history", "retention")
"""Every store of this backend (blocking and asyncio), on every dialect, has them all (see
:mod:`chronica_core.capabilities`)."""

_EXTRAS: dict[str, str] = {
    "sqlalchemy": "",
    "greenlet": "",
    "aiosqlite": "[aiosqlite]",
    "pymysql": "[mysql]",
    "asyncmy": "[mysql]",
    "psycopg": "[postgresql]",
}
"""Modules that chronica-sqlalchemy (``""``) or one of its extras installs, by top-level module."""

Opened = TypeVar("Opened", Store, AsyncStore)


def _with_driver_hint(opener: Callable[[], Opened]) -> Opened:
    """Run ``opener``; a missing driver is ``BackendUnavailable`` naming the smallest extra that has it.

    One that no extra of ours provides (the URL chose it, ``mysql+mysqldb://``) is named as such.
    """
    try:
        return opener()
    except ModuleNotFoundError as error:
        if error.name is None:
            raise
        module = error.name.partition(".")[0]
        if module in _EXTRAS:
            raise BackendUnavailable(
                f"backend 'sqlalchemy' needs {error.name!r}, which is not installed: "
                f"{install_command(_INSTALL + _EXTRAS[module])}"
            ) from error
        raise BackendUnavailable(
            f"backend 'sqlalchemy' needs {error.name!r}, the driver the URL names, which is not "
            "installed; no extra of chronica-sqlalchemy provides it: install the package that does"
        ) from error


def _open(url: str, **options: Any) -> Store:
    from chronica_sqlalchemy.store import SQLAlchemyStore

    return _with_driver_hint(lambda: SQLAlchemyStore.open(url, **options))


def _open_async(url: str, **options: Any) -> AsyncStore:
    from chronica_sqlalchemy.store import open_async_sqlalchemy_store

    return _with_driver_hint(lambda: open_async_sqlalchemy_store(url, **options))


@hookimpl
def chronica_backends() -> list[Backend]:
    """Declare ``sqlite``/``sqlite+*`` (no server) and ``mysql``, ``mariadb``, ``postgresql+*`` (servers)."""
    return [
        Backend(
            name="sqlalchemy",
            schemes=("sqlite", "sqlite+*"),
            idempotent=True,
            capabilities=_CAPABILITIES,
            open=_open,
            open_async=_open_async,
            install=_INSTALL,
            needs_server=False,
            example_url="sqlite://",
            follows="a watcher thread asks PRAGMA data_version every 20 ms",
        ),
        Backend(
            name="sqlalchemy",
            schemes=("mysql", "mysql+*", "mariadb", "mariadb+*", "postgresql+*"),
            idempotent=True,
            capabilities=_CAPABILITIES,
            open=_open,
            open_async=_open_async,
            install=f"{_INSTALL}[all]",
            needs_server=True,
            follows="PostgreSQL on psycopg: LISTEN/NOTIFY; MariaDB/MySQL: newest positions every 50 ms",
        ),
    ]
