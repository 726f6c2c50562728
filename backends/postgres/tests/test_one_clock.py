"""One clock per store: ``started_at``, ``last_actum_at`` and every ``at`` come from the host's clock.

The application host's clock is set an hour ahead of the server's (``chronica_core.clock.now``
monkeypatched): a chronicum must still never start after its first actum.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from chronica_postgres import AsyncPostgresStore, PostgresStore

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    Chronicarius,
    clock,
    new_chronicum_id,
)

AHEAD = timedelta(hours=1)


def _ahead() -> datetime:
    return datetime.now(UTC) + AHEAD


def _said(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content)


def test_a_chronicum_never_starts_after_its_first_actum(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clock, "now", _ahead)
    chronicarius = Chronicarius(store)
    chronicum_id = new_chronicum_id()
    first = chronicarius.record_actum("ardian", _said(chronicum_id, "first"))
    batch = chronicarius.record_acta("ardian", [_said(chronicum_id, "second"), _said(chronicum_id, "third")])
    keyed = chronicarius.record_actum("ardian", _said(chronicum_id, "keyed"), idempotency_key="k")
    started = chronicarius.get_chronicum("ardian", chronicum_id)
    assert first.at is not None and started.started_at <= first.at, (started.started_at, first.at)
    assert first.at - datetime.now(UTC) > AHEAD - timedelta(minutes=5), "at is not the host's clock"
    ats = [actum.at for actum in (first, *batch, keyed)]
    assert ats == sorted(ats) and started.last_actum_at == keyed.at
    fork = chronicarius.fork_chronicum("ardian", chronicum_id)
    own = chronicarius.record_actum("ardian", _said(fork.id, "in the fork"))
    assert own.at is not None and fork.started_at <= own.at, (fork.started_at, own.at)


def test_the_asyncio_store_takes_the_same_clock(
    async_store: AsyncPostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clock, "now", _ahead)
    chronicum_id = new_chronicum_id()

    async def first_and_started() -> tuple[Actum, datetime]:
        try:
            chronicarius = AsyncChronicarius(async_store)
            first = await chronicarius.record_actum("ardian", _said(chronicum_id, "first"))
            return first, (await chronicarius.get_chronicum("ardian", chronicum_id)).started_at
        finally:
            await async_store.close()

    first, started_at = asyncio.run(first_and_started())
    assert first.at is not None and started_at <= first.at, (started_at, first.at)
