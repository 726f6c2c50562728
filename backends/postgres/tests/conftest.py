"""Fixtures for the PostgreSQL backend's tests: a real server, one fresh schema per test session.

``CHRONICA_TEST_POSTGRES_URL`` names the server (default ``postgresql://postgres@127.0.0.1:5432/test``).
Without a reachable server the tests skip, saying what to set; with ``CI=true`` they fail instead.

The test marked ``restart`` restarts the server, so it is collected only when asked for with
``CHRONICA_TEST_RESTART_POSTGRES=1`` (``.ci/run`` runs it so, on its own) and that server is surely this
machine's own: the URL's host is local (``127.0.0.1``, ``localhost``, ``::1`` or a socket
directory) and a ``pg_ctlcluster`` cluster that this user may control is online on its port.
Otherwise it is deselected, and the header and the summary say why.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from chronica_postgres import AsyncPostgresStore, PostgresStore
from chronica_postgres.faults import PsycopgFaults
from postgres_restart_guard import Cluster, restartable_cluster

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
TEST_POOL_SIZE = 10
"""``max_size`` of the tests' stores: the server's 100 connections are shared (other test runs,
other machines' work), and the default of 40 would let one concurrency test take 40 of them; a
smaller pool only makes its threads wait. The default itself is tested on its own."""
RESTART_OPT_IN = "CHRONICA_TEST_RESTART_POSTGRES"
"""The variable that, set to ``1``, lets the ``restart`` test restart the (local) server."""
TESTS = Path(__file__).parent
RESTART_DESELECTED = pytest.StashKey[str]()


def configured_url() -> str:
    """``CHRONICA_TEST_POSTGRES_URL``, else :data:`DEFAULT_URL`."""
    return os.environ.get("CHRONICA_TEST_POSTGRES_URL", DEFAULT_URL)


@functools.cache
def _restart_cluster() -> Cluster | str:
    if os.environ.get(RESTART_OPT_IN) != "1":
        return f"restarting the server is opt-in: set {RESTART_OPT_IN}=1 to run it"
    return restartable_cluster(configured_url())


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "restart: restarts the shared PostgreSQL server once (deselect with -m 'not restart'); "
        f"deselected unless {RESTART_OPT_IN}=1 and the server is a local pg_ctlcluster cluster",
    )


def pytest_report_header(config: pytest.Config) -> str:
    found = _restart_cluster()
    if isinstance(found, str):
        return f"chronica-postgres: the restart test is deselected: {found}"
    return f"chronica-postgres: the restart test restarts cluster {found[0]}/{found[1]}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``restart`` tests of this folder unless the server is a local cluster."""
    ours = [item for item in items if TESTS in item.path.parents and item.get_closest_marker("restart")]
    found = _restart_cluster() if ours else None
    if isinstance(found, str):
        config.hook.pytest_deselected(items=ours)
        items[:] = [item for item in items if all(item is not our for our in ours)]
        config.stash[RESTART_DESELECTED] = found


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    reason = config.stash.get(RESTART_DESELECTED, None)
    if reason is not None:
        terminalreporter.write_line(f"chronica-postgres: the restart test was deselected: {reason}")


def new_schema_name(label: str = "session") -> str:
    return f"chronica_test_{label}_{uuid.uuid4().hex[:12]}"


def drop_schema(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psycopg.sql.Identifier(schema))
        )


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    """The local cluster serving the test URL (the ``restart`` test runs only when there is one)."""
    found = _restart_cluster()
    if isinstance(found, str):  # deselected in pytest_collection_modifyitems; reached only if forced
        raise AssertionError(f"the restart test was not deselected although {found}")
    return found


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The server's URL; skips (fails with CI=true) when nothing answers there."""
    url = configured_url()
    try:
        with psycopg.connect(url, connect_timeout=5) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        message = (
            f"no PostgreSQL server at {url} ({error}); start one or set CHRONICA_TEST_POSTGRES_URL "
            "to a reachable server's URL"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return url


@pytest.fixture(scope="session")
def schema(postgres_url: str) -> Iterator[str]:
    """A fresh schema for this test session, migrated, dropped at the end."""
    name = new_schema_name()
    PostgresStore(postgres_url, schema=name).close()
    try:
        yield name
    finally:
        drop_schema(postgres_url, name)


@pytest.fixture
def fresh_schema(postgres_url: str) -> Iterator[str]:
    """A schema name nobody has created yet; dropped after the test."""
    name = new_schema_name("fresh")
    try:
        yield name
    finally:
        drop_schema(postgres_url, name)


@pytest.fixture(scope="session")
def shared_store(postgres_url: str, schema: str) -> Iterator[PostgresStore]:
    """One blocking store for the session (every test uses fresh chronicum ids)."""
    with PostgresStore(postgres_url, schema=schema, max_size=TEST_POOL_SIZE) as store:
        yield store


@pytest.fixture
def store(shared_store: PostgresStore) -> PostgresStore:
    return shared_store


@pytest.fixture
def async_store(postgres_url: str, schema: str) -> AsyncPostgresStore:
    """A fresh asyncio store, constructed without a loop; the test's loop opens and closes it."""
    return AsyncPostgresStore(postgres_url, schema=schema, max_size=TEST_POOL_SIZE)


@pytest.fixture
def admin(postgres_url: str, schema: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A separate autocommit connection, its search_path on the session schema."""
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(psycopg.sql.SQL("SET search_path TO {}").format(psycopg.sql.Identifier(schema)))
        yield connection


@pytest.fixture
def make_store(postgres_url: str) -> Iterator[Callable[..., PostgresStore]]:
    """Open extra blocking stores (closed after the test)."""
    opened: list[PostgresStore] = []

    def make(**options: Any) -> PostgresStore:
        opened.append(PostgresStore(postgres_url, **{"max_size": TEST_POOL_SIZE, **options}))
        return opened[-1]

    yield make
    for opened_store in opened:
        opened_store.close()


@pytest.fixture
def chronica_driver_faults() -> PsycopgFaults:
    """Driver failures for the conformance suite's driver-failure group."""
    return PsycopgFaults()
