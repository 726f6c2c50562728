"""Fixtures of the topology tests: servers of the tests' own, started and stopped by them."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from postgres_cluster import PostgresPair, binaries, start_pair


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
