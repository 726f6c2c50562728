"""One clock per store: ``started_at``, ``last_actum_at`` and every ``at`` from the same clock.

For a backend's own tests where a server's clock could differ from the application host's (a
store that took ``at`` from the server would start a chronicum after its first actum when the
host's clock runs ahead). :func:`check_one_clock` sets the host's clock (``chronica_core.clock.now``)
an hour ahead, writes through the store, and checks that no chronicum starts after its first actum.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    Chronicarius,
    clock,
    new_chronicum_id,
)

__all__ = ["AHEAD", "check_one_clock", "check_one_clock_async"]

AHEAD = timedelta(hours=1)
"""How far ahead of the real time the host's clock is set."""


def _ahead() -> datetime:
    return datetime.now(UTC) + AHEAD


def _said(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content)


def check_one_clock(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the host's clock an hour ahead, write through the blocking ``store`` and check its times.

    A first write, a batch, a keyed write and a fork's first write: each chronicum starts no
    later than its first actum, ``at`` is the host's clock (about an hour ahead), ``at`` never
    decreases, and ``last_actum_at`` is the newest ``at``. Raises ``AssertionError`` otherwise.
    """
    monkeypatch.setattr(clock, "now", _ahead)
    chronicarius = Chronicarius(store)
    chronicum_id = new_chronicum_id()
    first = chronicarius.record_actum("ardian", _said(chronicum_id, "first"))
    batch = chronicarius.record_acta("ardian", [_said(chronicum_id, "second"), _said(chronicum_id, "third")])
    keyed = chronicarius.record_actum("ardian", _said(chronicum_id, "keyed"), idempotency_key="k")
    started = chronicarius.get_chronicum("ardian", chronicum_id)
    assert first.at is not None and started.started_at <= first.at, (started.started_at, first.at)
    assert first.at - datetime.now(UTC) > AHEAD - timedelta(minutes=5), (
        f"at {first.at} is not the host's clock"
    )
    ats = [actum.at for actum in (first, *batch, keyed) if actum.at is not None]
    assert len(ats) == 4 and ats == sorted(ats) and started.last_actum_at == keyed.at, (
        ats,
        started.last_actum_at,
    )
    fork = chronicarius.fork_chronicum("ardian", chronicum_id)
    own = chronicarius.record_actum("ardian", _said(fork.id, "in the fork"))
    assert own.at is not None and fork.started_at <= own.at, (fork.started_at, own.at)


def check_one_clock_async(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`check_one_clock`'s first write through the asyncio ``store`` in a loop of its own; closes it."""
    monkeypatch.setattr(clock, "now", _ahead)
    chronicum_id = new_chronicum_id()

    async def first_and_started() -> tuple[Actum, datetime]:
        try:
            chronicarius = AsyncChronicarius(store)
            first = await chronicarius.record_actum("ardian", _said(chronicum_id, "first"))
            return first, (await chronicarius.get_chronicum("ardian", chronicum_id)).started_at
        finally:
            await store.close()

    first, started_at = asyncio.run(first_and_started())
    assert first.at is not None and started_at <= first.at, (started_at, first.at)
