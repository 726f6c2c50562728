"""Fixtures of the topology tests: servers of the tests' own, started and stopped by them."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from postgres_cluster import PostgresPair, binaries, start_pair

if TYPE_CHECKING:
    from galera_cluster import GaleraCluster


@pytest.fixture
def postgres_pair() -> Iterator[PostgresPair]:
    """A PostgreSQL primary with a synchronous standby on free loopback ports, stopped afterwards.

    Skips without PostgreSQL's server binaries, saying so; fails instead with ``CI=true``.
    """
    if binaries() is None:
        reason = "no PostgreSQL server binaries under /usr/lib/postgresql (Debian's postgresql package)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    pair = start_pair()
    yield pair
    pair.stop()


@pytest.fixture(scope="module")
def galera_cluster() -> Iterator[GaleraCluster]:
    """A three-node MariaDB Galera cluster on free loopback ports, stopped afterwards.

    Skips without MariaDB's server, Galera or rsync, saying which package to install; fails
    instead with ``CI=true``.
    """
    from galera_cluster import missing, start_cluster

    reason = missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"missing {reason}")
        pytest.skip(f"missing {reason}")
    cluster = start_cluster()
    yield cluster
    cluster.stop()
