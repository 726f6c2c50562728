"""A MariaDB Galera cluster of three nodes: appends to one chronicum sent through every node at once.

Galera certifies each transaction against those committed through the other nodes meanwhile and
refuses the loser with ``1213 Deadlock found`` (rolled back). No call may fail: each conflict is
tried again (see :mod:`chronica_core.conflicts`); every acknowledged actum is stored once, in its
writer's order, read back through the cluster, and no first write leaves an empty chronicum.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from galera_cluster import GaleraCluster
from one_chronicum import Load, run_async, run_blocking

from chronica_core import new_chronicum_id, open_store

LOAD = Load(rounds=1, writers=12, appends=10, readers=3)
"""Twelve writers, four through each node: 120 appends, as in the run that saw 36 of them fail."""


@pytest.fixture
def database(galera_cluster: GaleraCluster) -> Iterator[str]:
    """A database of the test's own on the cluster (created through one node), migrated, dropped after."""
    name = f"chronica_test_{new_chronicum_id()[:12].lower()}"
    with galera_cluster.nodes[0].connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name}")
        open_store(galera_cluster.nodes[0].url(name)).close()
        try:
            yield name
        finally:
            cursor.execute(f"DROP DATABASE {name}")


def test_appends_through_three_nodes_at_once_all_land_once_in_order(
    galera_cluster: GaleraCluster, database: str
) -> None:
    outcome = run_blocking(galera_cluster.urls(database), LOAD)
    assert outcome.failures == []
    assert outcome.problems == []
    assert outcome.acknowledged == LOAD.rounds * LOAD.writers * LOAD.appends


def test_asyncio_appends_through_three_nodes_at_once_all_land_once_in_order(
    galera_cluster: GaleraCluster, database: str
) -> None:
    outcome = asyncio.run(
        run_async([url.replace("+pymysql", "+asyncmy") for url in galera_cluster.urls(database)], LOAD)
    )
    assert outcome.failures == []
    assert outcome.problems == []
    assert outcome.acknowledged == LOAD.rounds * LOAD.writers * LOAD.appends
