"""The acta every harness writes: the dinner story, cycled, under one owner."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

from chronica_core import Actum, ActumKind, new_actum_id
from chronica_core.story import DINNER_STORY

__all__ = ["LAST_N", "OWNER", "fresh_id", "history", "messages_in", "story_actum"]

OWNER = "bench-owner"
"""The owner of every chronicum the harness writes."""

LAST_N = 20
"""How many messages the measured context window holds."""


def story_actum(chronicum_id: str, index: int, *, with_id: bool = False, at: datetime | None = None) -> Actum:
    """Return row ``index`` (cycled) of the dinner story as an actum of ``chronicum_id``.

    With ``with_id`` it gets a fresh id (what Chronicarius hands the store); ``at`` is kept as given.
    """
    row = DINNER_STORY[index % len(DINNER_STORY)]
    actum_id = new_actum_id() if with_id else ""
    return Actum(chronicum_id, row.kind, row.actor_kind, row.actor, row.content, id=actum_id, at=at)


def history(chronicum_id: str, size: int) -> list[Actum]:
    """Return ``size`` acta for a fill: the dinner story cycled, ids set, ``at`` one microsecond apart."""
    start = datetime.now(UTC) - timedelta(microseconds=size)
    return [
        story_actum(chronicum_id, index, with_id=True, at=start + timedelta(microseconds=index))
        for index in range(size)
    ]


def messages_in(size: int) -> int:
    """How many of the first ``size`` story acta are messages."""
    per_cycle = sum(1 for row in DINNER_STORY if row.kind is ActumKind.MESSAGE)
    full, rest = divmod(size, len(DINNER_STORY))
    return full * per_cycle + sum(1 for row in DINNER_STORY[:rest] if row.kind is ActumKind.MESSAGE)


def fresh_id(label: str) -> str:
    """Return a chronicum id no other run uses, e.g. ``bench-100000-3f9a1c2e``."""
    return f"bench-{label}-{secrets.token_hex(4)}"
