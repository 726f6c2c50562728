"""Following on chronica-sqlalchemy: SQLite's watcher reads no acta while followers are idle, and a
follower here sees what another process records (``chronica record``) into the same file.

The loops that wait for the follower to reach its wait are guards with a deadline, not timing
assertions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chronica_sqlalchemy import SQLAlchemyStore
from sqlalchemy import event

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius

CHRONICA = str(Path(sys.executable).with_name("chronica"))
GUARD_SECONDS = 30.0

pytestmark = pytest.mark.dialects("sqlite")


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {GUARD_SECONDS} s for {what}")
        time.sleep(0.01)


def _waiting(store: SQLAlchemyStore, chronicum_id: str) -> bool:
    watcher = store._watcher
    return watcher is not None and bool(watcher._wakers.get(chronicum_id))


def _follow_in_thread(
    store: SQLAlchemyStore, after: str, chronicum_id: str, count: int
) -> tuple[threading.Thread, list[str]]:
    got: list[str] = []
    follower = Chronicarius(store).follow("ardian", chronicum_id, after=after, timeout=GUARD_SECONDS)

    def follow() -> None:
        for actum in follower:
            got.append(actum.content)
            if len(got) == count:
                return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    return thread, got


def test_an_idle_follower_reads_no_acta_only_data_version(dialect: str, tmp_path: Path) -> None:
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'idle.db'}") as store:
        chronicum_id = f"idle-{uuid.uuid4().hex}"
        first = Chronicarius(store).record_actum(
            "ardian", Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hello")
        )
        statements: list[str] = []

        def seen(connection: Any, cursor: Any, statement: str, *rest: Any) -> None:
            statements.append(statement)

        thread, got = _follow_in_thread(store, first.id, chronicum_id, 1)
        _until(lambda: _waiting(store, chronicum_id), "the follower waiting")
        event.listen(store.engine, "before_cursor_execute", seen)
        probed = lambda: statements.count("PRAGMA data_version") >= 5  # noqa: E731
        # The watcher's first probe wakes the follower, which reads once more (on a loaded
        # machine maybe after five probes): of ten idle stretches of five probes, one at least
        # reads no acta. A watcher that woke the follower at every probe would read in all ten.
        stretches: list[list[str]] = []
        for _ in range(10):
            statements.clear()
            _until(probed, "the watcher probing")
            stretches.append([statement for statement in statements if "acta" in statement])
            if not stretches[-1]:
                break
        event.remove(store.engine, "before_cursor_execute", seen)
        assert stretches[-1] == [], stretches
        writer = Chronicarius(store)
        writer.record_actum(
            "ardian", Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", "news")
        )
        thread.join(GUARD_SECONDS)
        assert got == ["news"]


def test_a_follower_sees_what_another_process_records(dialect: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    with SQLAlchemyStore.open(url) as store:
        chronicum_id = f"shared-{uuid.uuid4().hex}"
        first = Chronicarius(store).record_actum(
            "ardian", Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hello")
        )
        thread, got = _follow_in_thread(store, first.id, chronicum_id, 3)
        _until(lambda: _waiting(store, chronicum_id), "the follower waiting")
        environment = {key: value for key, value in os.environ.items() if key != "CHRONICA_STORE"}
        for content in ("one", "two", "three"):
            command = [CHRONICA, "record", chronicum_id, "--owner", "ardian", "--kind", "message"]
            command += ["--actor-kind", "agent", "--actor", "booking", "--content", content, "--store", url]
            result = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, result.stderr
        thread.join(GUARD_SECONDS)
        assert got == ["one", "two", "three"]


def test_a_follower_on_in_memory_sqlite_gets_what_the_same_store_records(dialect: str) -> None:
    """In-memory SQLite has one connection, shared by turns: no watcher may hold it for good."""
    with SQLAlchemyStore.open("sqlite://") as store:
        chronicum_id = f"memory-{uuid.uuid4().hex}"
        chronicarius = Chronicarius(store)
        first = chronicarius.record_actum(
            "ardian", Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hello")
        )
        thread, got = _follow_in_thread(store, first.id, chronicum_id, 1)
        _until(lambda: _waiting(store, chronicum_id), "the follower waiting")
        chronicarius.record_actum(
            "ardian", Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", "news")
        )
        thread.join(GUARD_SECONDS)
        assert got == ["news"]
        assert store._watcher is not None and not store._watcher.running
