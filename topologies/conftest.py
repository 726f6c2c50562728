"""Fixtures of the topology tests: servers of the tests' own, started and stopped by them."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from pgbouncer import binary as pgbouncer_binary
from pgbouncer import start_bouncer
from postgres_cluster import PostgresPair, binaries, start_pair

if TYPE_CHECKING:
    from galera_cluster import GaleraCluster


@pytest.fixture
def postgres_pair() -> Iterator[PostgresPair]:
    """A PostgreSQL primary with a synchronous standby on free loopback ports, stopped afterwards.

    Skips without PostgreSQL's server binaries, saying so; fails instead with ``CI=true``.
    """
    if binaries() is None:
        _missing("no PostgreSQL server binaries under /usr/lib/postgresql (Debian's postgresql package)")
    pair = start_pair()
    yield pair
    pair.stop()


PGBOUNCER_PORT = "CHRONICA_TEST_PGBOUNCER_PORT"
"""The port of a PgBouncer already running in transaction mode (``topologies/through_pgbouncer.py``
sets it for the run it starts); without it the tests start their own."""


@pytest.fixture(scope="session")
def pgbouncer_port() -> Iterator[int]:
    """The port of PgBouncer in transaction mode before the machine's PostgreSQL, on loopback.

    The one :data:`PGBOUNCER_PORT` names, else one started here and stopped afterwards. Skips
    without Debian's ``pgbouncer``, saying so; fails instead with ``CI=true``.
    """
    given = os.environ.get(PGBOUNCER_PORT)
    if given:
        yield int(given)
        return
    if pgbouncer_binary() is None:
        _missing("pgbouncer is not installed (Debian's pgbouncer package)")
    started = start_bouncer()
    yield started.port
    started.stop()


def _missing(reason: str) -> NoReturn:
    """Skip the test for want of a server binary, saying ``reason``; fail instead with ``CI=true``."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def galera_cluster() -> Iterator[GaleraCluster]:
    """A three-node MariaDB Galera cluster on free loopback ports, stopped afterwards.

    Skips without MariaDB's server, Galera or rsync, saying which package to install; fails
    instead with ``CI=true``.
    """
    from galera_cluster import missing, start_cluster

    reason = missing()
    if reason is not None:
        _missing(f"missing {reason}")
    cluster = start_cluster()
    yield cluster
    cluster.stop()
