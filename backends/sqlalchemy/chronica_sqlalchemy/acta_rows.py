"""The columns every read of an actum or a chronicum selects, and what a row of them makes.

Every read of acta (a window, a keyed write read back, a history window, ``locate``) selects
:func:`actum_columns` after its own leading columns, and turns the rest of each row into an
actum with :func:`actum_of`: the native form, ``answers`` and the summary's span come back
as they were written, ``None`` or ``""`` where the row has ``NULL``. A chronicum likewise:
:func:`chronicum_columns` and :func:`chronicum_of` (a fork with its ``forked_from``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from sqlalchemy import Table

from chronica_core.model import ActorKind, Actum, ActumKind, Chronicum, ForkPoint, Native, Span, build_actum

__all__ = [
    "ACTOR_KINDS",
    "ACTUM_COLUMNS",
    "KINDS",
    "actum_columns",
    "actum_of",
    "actum_values",
    "chronicum_columns",
    "chronicum_of",
]

KINDS: Final = {kind.value: kind for kind in ActumKind}
ACTOR_KINDS: Final = {actor_kind.value: actor_kind for actor_kind in ActorKind}

ACTUM_COLUMNS: Final = (
    "id",
    "kind",
    "actor_kind",
    "actor",
    "content",
    "at",
    "native_format",
    "native_data",
    "answers",
    "summary_first_id",
    "summary_last_id",
)
"""The ``acta`` columns of an actum as a read selects them, in this order."""


def actum_columns(acta: Table) -> tuple[Any, ...]:
    """The columns :data:`ACTUM_COLUMNS` of ``acta``."""
    return tuple(acta.c[name] for name in ACTUM_COLUMNS)


def actum_of(chronicum_id: str, row: Sequence[Any]) -> Actum:
    """The actum of ``chronicum_id`` whose :data:`ACTUM_COLUMNS` are ``row`` (in that order)."""
    actum_id, kind, actor_kind, actor, content, at, native_format, native_data, answers, first, last = row
    if native_format is None and answers is None and first is None:  # a plain actum
        return build_actum(chronicum_id, KINDS[kind], ACTOR_KINDS[actor_kind], actor, content, actum_id, at)
    return build_actum(
        chronicum_id,
        KINDS[kind],
        ACTOR_KINDS[actor_kind],
        actor,
        content,
        actum_id,
        at,
        None if native_format is None else Native(native_format, native_data),
        answers or "",
        None if first is None else Span(first, last),
    )


def actum_values(actum: Actum) -> dict[str, Any]:
    """The values of ``actum``'s native form, ``answers`` and summary span, ``None`` for those it lacks."""
    native, span = actum.native, actum.summarizes
    return {
        "native_format": None if native is None else native.format,
        "native_data": None if native is None else native.data,
        "answers": actum.answers or None,
        "summary_first_id": None if span is None else span.first,
        "summary_last_id": None if span is None else span.last,
    }


def chronicum_columns(chronica: Table) -> tuple[Any, ...]:
    """A chronicum's columns as a read selects them: id, owner, start, last actum's ``at``, fork point."""
    c = chronica.c
    return (c.id, c.owner_id, c.started_at, c.last_actum_at, c.forked_from_id, c.forked_from_actum)


def chronicum_of(row: Sequence[Any]) -> Chronicum:
    """The chronicum whose :func:`chronicum_columns` are ``row`` (more columns may follow)."""
    forked = None if row[4] is None else ForkPoint(row[4], row[5] or "")
    return Chronicum(id=row[0], owner_id=row[1], started_at=row[2], last_actum_at=row[3], forked_from=forked)
