"""The server restarted under open stores: calls fail with StoreError or succeed, then work again.

This restarts the server once (every session on it is cut off), holding an flock on
``CHRONICA_PG_RESTART_LOCK`` (default ``chronica-pg-restart.lock`` in ``tempfile.gettempdir()``)
meanwhile so that others on this machine who restart it take turns. It never restarts a server it
does not own: conftest.py deselects it (saying why in the header and the summary) unless the test
URL's host is local and an online ``pg_ctlcluster`` cluster, which this user may control, serves
its port. Deselect it yourself with ``-m 'not restart'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import subprocess
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest
from chronica_postgres import AsyncPostgresStore, PostgresStore

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, StoreError, new_actum_id

Result = TypeVar("Result")


@contextlib.contextmanager
def _restart_lock() -> Iterator[None]:
    default = Path(tempfile.gettempdir(), "chronica-pg-restart.lock")
    path = Path(os.environ.get("CHRONICA_PG_RESTART_LOCK") or default)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _restart_server(cluster: tuple[str, str], url: str) -> None:
    """Restart ``cluster`` (its version and name) and wait until ``url`` answers again."""
    version, name = cluster
    with _restart_lock():
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        _wait_until_ready(url)


def _wait_until_ready(url: str) -> None:
    last_error: Exception | None = None
    for _ in range(120):
        try:
            with psycopg.connect(url, connect_timeout=2) as connection:
                connection.execute("SELECT 1")
            return
        except psycopg.OperationalError as error:
            last_error = error
            with contextlib.suppress(subprocess.TimeoutExpired):
                subprocess.run(["pg_isready", "-q", "-t", "1"], timeout=3, check=False)
    raise AssertionError(f"the server did not come back: {last_error}")


def _actum(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", content, id=new_actum_id())


def _store_error_or_result(call: Callable[[], Result]) -> Result | StoreError:
    try:
        return call()
    except StoreError as error:
        return error


async def _async_store_error_or_result(call: Callable[[], Awaitable[Result]]) -> Result | StoreError:
    try:
        return await call()
    except StoreError as error:
        return error


@pytest.mark.restart
def test_stores_work_again_after_a_server_restart(
    cluster: tuple[str, str], postgres_url: str, schema: str
) -> None:
    chronicum_id = f"pg-restart-{uuid.uuid4().hex}"
    async_chronicum_id = f"pg-restart-async-{uuid.uuid4().hex}"
    with (
        PostgresStore(postgres_url, schema=schema, min_size=2, max_size=4) as store,
        asyncio.Runner() as runner,
    ):
        async_store = AsyncPostgresStore(postgres_url, schema=schema, min_size=2, max_size=4)
        try:
            store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
            store.record(_actum(chronicum_id, "before the restart"))
            runner.run(async_store.create(Chronicum(async_chronicum_id, "ardian", datetime.now(UTC))))
            runner.run(async_store.record(_actum(async_chronicum_id, "before the restart")))

            _restart_server(cluster, postgres_url)

            # The first calls meet connections the restart killed: StoreError or success.
            first = _store_error_or_result(lambda: store.record(_actum(chronicum_id, "first try")))
            async_first = runner.run(
                _async_store_error_or_result(
                    lambda: async_store.record(_actum(async_chronicum_id, "first try"))
                )
            )
            for outcome in (first, async_first):
                assert isinstance(outcome, Actum | StoreError), outcome
                if isinstance(outcome, StoreError):
                    assert outcome.where == "postgres: record actum"
                    assert isinstance(outcome.__cause__, psycopg.OperationalError)

            # Then the same stores, never reopened, work again.
            store.record(_actum(chronicum_id, "after the restart"))
            runner.run(async_store.record(_actum(async_chronicum_id, "after the restart")))
            contents = [actum.content for actum in store.acta(chronicum_id, ActaQuery())]
            async_contents = [
                actum.content for actum in runner.run(async_store.acta(async_chronicum_id, ActaQuery()))
            ]
        finally:
            runner.run(async_store.close())
    for outcome, seen in ((first, contents), (async_first, async_contents)):
        expected = ["before the restart", "first try", "after the restart"]
        if isinstance(outcome, StoreError):  # it failed before or while the server had it
            expected.remove("first try")
        assert seen == expected
