"""One asyncio store, many event loops: its pools' connections counted on the server.

The scenario is :func:`chronica_conformance.loop_scenario.run_loop_scenario` (a fresh
interpreter under ``-X dev``, whose stderr must stay empty). The store's URL carries an
``application_name`` of the test's own, by which ``pg_stat_activity`` counts its connections.
"""

from __future__ import annotations

import uuid
from urllib.parse import quote

import psycopg
from chronica_conformance.loop_scenario import run_loop_scenario

COUNTER = """
import psycopg

def connections() -> int:
    admin_url, name = ARGUMENTS
    with psycopg.connect(admin_url) as admin:
        return admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()[0]
"""


def test_each_loop_has_its_own_pool_closed_with_the_loop_and_at_close(postgres_url: str, schema: str) -> None:
    name = f"chronica-loops-{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{separator}application_name={quote(name)}&schema={quote(schema)}"
    counts = run_loop_scenario(url, COUNTER, postgres_url, name)
    assert counts.store_type == "AsyncPostgresStore"
    assert all(count >= 1 for count in counts.during), counts  # each loop's own pool
    assert counts.after == [0, 0, 0], counts  # closed when its loop closed
    assert all(count >= 2 for count in counts.both), counts  # two pools at once
    assert counts.after_threads == 0, counts
    assert counts.other_loop_open >= 1, counts
    assert counts.after_close == 0, counts  # the other loop's pool closed, in that loop
    assert counts.closed_error == "postgres: async store: the store is closed"
    with psycopg.connect(postgres_url) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()
    assert row == (0,)
