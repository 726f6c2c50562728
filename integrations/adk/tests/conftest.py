"""The stores the session-service tests run on: memory://, a SQLite file and PostgreSQL.

- ``sqlite``: a throw-away file through chronica-sqlalchemy (``CHRONICA_TEST_SQLITE_URL`` names
  another SQLAlchemy SQLite URL, used as it is);
- ``postgres``: ``CHRONICA_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``),
  chronica-postgres in a fresh schema;
- ``postgres-sqlalchemy``: the same server, through chronica-sqlalchemy and psycopg, in a
  fresh schema;

A server that does not answer skips its tests, naming the variable to set; with ``CI=true`` that
fails instead, as in the backends' own environments. Every fresh schema is dropped at the end of
the test session. Each test opens its own asyncio store inside its own event loop (an asyncio
store belongs to one loop) and uses fresh session ids.

No test reaches the network: the model is scripted (``scripted_model``), no API key is set, and
every socket connection to anything but this machine fails the test.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chronica_core import AsyncStore, open_async_store


@dataclass(frozen=True)
class StoreTarget:
    """A store URL and the options to open it with."""

    name: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)

    def open(self) -> AsyncStore:
        """Open an asyncio store on it (close it in the loop that used it)."""
        return open_async_store(self.url, **self.options)


SERVER_VARIABLES = {
    "sqlite": "CHRONICA_TEST_SQLITE_URL",
    "postgres": "CHRONICA_TEST_POSTGRES_URL",
    "postgres-sqlalchemy": "CHRONICA_TEST_POSTGRES_URL",
}

DEFAULT_URLS = {
    "CHRONICA_TEST_POSTGRES_URL": "postgresql://postgres@127.0.0.1:5432/test",
}


def _unreachable(name: str, url: str) -> str | None:
    """Why the server behind ``url`` cannot be used, or ``None`` when it answers."""
    try:
        import psycopg

        plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(plain, connect_timeout=5) as connection:
            connection.execute("SELECT 1")
    except Exception as error:  # noqa: BLE001 - any failure to connect means "not here"
        return f"{type(error).__name__}: {error}"
    return None


def _drop_schema(url: str, schema: str) -> None:
    """Drop the schema a test session created."""
    import psycopg
    from psycopg import sql

    plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def fresh_target(name: str, folder: Path) -> Iterator[StoreTarget]:
    """A fresh store named ``name`` (a key of ``SERVER_VARIABLES``): a SQLite file in ``folder``,
    or a fresh schema on the server, dropped on leaving; an unreachable server skips (fails on CI)."""
    variable = SERVER_VARIABLES[name]
    if name == "sqlite":
        yield StoreTarget(name, os.environ.get(variable) or f"sqlite:///{folder / 'sessions.db'}")
        return
    url = os.environ.get(variable) or DEFAULT_URLS[variable]
    problem = _unreachable(name, url)
    if problem is not None:
        message = f"no server at {url} for {name} ({problem}); start one or set {variable}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    if name == "postgres-sqlalchemy":
        url = url.replace("postgresql://", "postgresql+psycopg://", 1).replace(
            "postgres://", "postgresql+psycopg://", 1
        )
    schema = f"chronica_test_adk_{uuid.uuid4().hex[:12]}"
    try:
        yield StoreTarget(name, url, {"schema": schema})
    finally:
        _drop_schema(url, schema)


@pytest.fixture(scope="session", params=["memory", *SERVER_VARIABLES])
def store_target(request: pytest.FixtureRequest) -> Iterator[StoreTarget]:
    """Where the test's sessions live: ``memory://``, or a database named by its variable."""
    name = str(request.param)
    if name == "memory":
        yield StoreTarget(name, "memory://")
        return
    with fresh_target(name, request.getfixturevalue("tmp_path_factory").mktemp("sqlite")) as target:
        yield target


_LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost"}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any socket connection leaving this machine, and keep API keys away from google-genai."""
    for variable in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(variable, raising=False)
    connect = socket.socket.connect

    def local_only(self: socket.socket, address: Any) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in _LOCAL_HOSTS:
            raise AssertionError(f"a test tried to reach the network: {address!r}")
        connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)
