"""PostgreSQL at SERIALIZABLE: many writers and readers on one chronicum, on both PostgreSQL backends.

The store's connections run at ``default_transaction_isolation = serializable`` (set through the
URL's ``options``, for the test's own connections only), where PostgreSQL refuses concurrent
appends to one chronicum with ``could not serialize access`` (SQLSTATE 40001). No call may fail:
each conflict is tried again (see :mod:`chronica_core.conflicts`); every acknowledged actum is
stored once, in its writer's order, and no first write leaves an empty chronicum.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import psycopg
import pytest
from one_chronicum import Load, run_async, run_blocking

from chronica_core import new_chronicum_id, open_store

SERVER = os.environ.get("CHRONICA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
SERIALIZABLE = "options=-c%20default_transaction_isolation%3Dserializable"
SCHEMES = {"chronica-postgres": "postgresql", "chronica-sqlalchemy": "postgresql+psycopg"}


@pytest.fixture
def database() -> Iterator[str]:
    """A database of the test's own on the test server, dropped afterwards: its name."""
    name = f"chronica_test_serializable_{new_chronicum_id()[:12].lower()}"
    try:
        admin = psycopg.connect(SERVER, autocommit=True, connect_timeout=5)
    except psycopg.Error as error:
        message = f"no PostgreSQL server at {SERVER} ({error}); set CHRONICA_TEST_POSTGRES_URL"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with admin:
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
        try:
            yield name
        finally:
            admin.execute(
                psycopg.sql.SQL("DROP DATABASE {} WITH (FORCE)").format(psycopg.sql.Identifier(name))
            )


def _url(backend: str, database: str) -> str:
    server = psycopg.conninfo.conninfo_to_dict(SERVER)
    host, port, user = (
        server.get("host", "127.0.0.1"),
        server.get("port", "5432"),
        server.get("user", "postgres"),
    )
    return f"{SCHEMES[backend]}://{user}@{host}:{port}/{database}?{SERIALIZABLE}"


@pytest.mark.parametrize("backend", SCHEMES)
def test_at_serializable_concurrent_appends_to_one_chronicum_all_land_once_in_order(
    database: str, backend: str
) -> None:
    outcome = run_blocking([_url(backend, database)], Load(rounds=3, writers=8, appends=15, readers=2))
    assert outcome.failures == []
    assert outcome.problems == []
    assert outcome.acknowledged == 3 * 8 * 15


@pytest.mark.parametrize("backend", SCHEMES)
def test_at_serializable_concurrent_asyncio_appends_to_one_chronicum_all_land_once_in_order(
    database: str, backend: str
) -> None:
    url = _url(backend, database)
    open_store(
        url
    ).close()  # migrated first: tasks racing to migrate a fresh database is not this test's matter
    outcome = asyncio.run(run_async([url], Load(rounds=3, writers=8, appends=15, readers=2)))
    assert outcome.failures == []
    assert outcome.problems == []
    assert outcome.acknowledged == 3 * 8 * 15


def test_the_test_connections_run_at_serializable(database: str) -> None:
    with psycopg.connect(_url("chronica-postgres", database)) as connection:
        assert connection.execute("SHOW default_transaction_isolation").fetchone() == ("serializable",)
