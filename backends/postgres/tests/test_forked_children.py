"""A store used before ``os.fork()``: what chronica-postgres does in the child beyond the conformance case."""

from __future__ import annotations

import psycopg
from chronica_conformance.process_contract import in_forked_children
from chronica_postgres import PostgresStore
from psycopg_pool import ConnectionPool

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, new_chronicum_id


def _said(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content)


def _backends(postgres_url: str, application_name: str) -> int:
    with psycopg.connect(postgres_url) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (application_name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_pool_of_the_caller_s_is_refused_in_the_child(postgres_url: str, schema: str) -> None:
    """The store cannot replace a pool it was given: the child's first operation says so at once."""
    with ConnectionPool(postgres_url, min_size=1, max_size=2) as pool:
        store = PostgresStore(pool=pool, schema=schema)
        chronicarius = Chronicarius(store)
        chronicum_id = new_chronicum_id()
        chronicarius.record_actum("ardian", _said(chronicum_id, "parent"))
        [(how, what)] = in_forked_children(lambda _: chronicarius.get_acta("ardian", chronicum_id), 1)
        assert how == "refused" and "per process" in str(what), (how, what)
        chronicarius.record_actum("ardian", _said(chronicum_id, "parent again"))
        assert [a.content for a in chronicarius.get_acta("ardian", chronicum_id)] == [
            "parent",
            "parent again",
        ]


def test_a_child_that_only_closes_leaves_the_parent_s_connection_open(postgres_url: str, schema: str) -> None:
    """Closing the inherited store in the child (an exit handler, say) closes nothing of the parent's."""
    name = f"chronica-fork-{new_chronicum_id()[:8]}"
    with PostgresStore(f"{postgres_url}?application_name={name}", schema=schema, max_size=1) as store:
        chronicarius = Chronicarius(store)
        chronicum_id = new_chronicum_id()
        chronicarius.record_actum("ardian", _said(chronicum_id, "parent"))
        assert _backends(postgres_url, name) == 1
        [(how, what)] = in_forked_children(lambda _: store.close(), 1)
        assert how == "returned", what
        assert _backends(postgres_url, name) == 1
        assert [a.content for a in chronicarius.get_acta("ardian", chronicum_id)] == ["parent"]
