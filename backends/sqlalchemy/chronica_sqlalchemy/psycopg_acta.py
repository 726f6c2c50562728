"""Acta and chronica from psycopg's own rows, for the statements psycopg runs itself.

On ``postgresql+psycopg://`` (blocking and asyncio) a context-window read and a ``get`` run on
psycopg's connection (see :mod:`chronica_sqlalchemy.driver_statements`), asking for binary rows;
the plan turns those rows into acta and chronica itself: content arrives as text (or as the
``bytea``'s UTF-8 bytes, see :func:`window_acta`), moments as aware ``datetime`` values in the
session's time zone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Dialect

from chronica_core.model import ActorKind, Actum, ActumKind, Chronicum, build_actum

__all__ = ["chronicum_of", "runs_on_psycopg", "utc", "window_acta"]

_KINDS = {kind.value: kind for kind in ActumKind}
_ACTOR_KINDS = {actor_kind.value: actor_kind for actor_kind in ActorKind}


def runs_on_psycopg(dialect: Dialect) -> bool:
    """Whether ``dialect`` is PostgreSQL on psycopg 3 (blocking or asyncio): the driver these calls know."""
    return dialect.name == "postgresql" and dialect.driver == "psycopg"


def utc(moment: datetime) -> datetime:
    """``moment`` (aware, in the session's time zone) in UTC, as ``UTCDateTime`` reads it."""
    return moment if moment.tzinfo is UTC else moment.astimezone(UTC)


def window_acta(rows: list[Any]) -> list[Actum]:
    """The acta of a context window's rows ``(chronicum id, seq, id, kind, actor kind, actor, content, at)``.

    A row without ``seq`` stands for the chronicum itself, not an actum. Content arrives as text,
    or as the ``bytea``'s UTF-8 bytes from a cursor that does not read it as text (see
    :func:`chronica_sqlalchemy.driver_statements.psycopg_call`); all rows of one read come from
    one cursor, so the first tells. Each actum is built with
    :func:`chronica_core.model.build_actum` (the same ``Actum``, in half the constructor's time;
    every argument by position).
    """
    kinds, actor_kinds = _KINDS, _ACTOR_KINDS
    encoded = bool(rows) and type(rows[0][6]) is bytes
    return [
        build_actum(
            chronicum_id,
            kinds[kind],
            actor_kinds[actor_kind],
            actor,
            content.decode("utf-8") if encoded else content,
            actum_id,
            at if at.tzinfo is UTC else at.astimezone(UTC),
        )
        for chronicum_id, seq, actum_id, kind, actor_kind, actor, content, at in rows
        if seq is not None
    ]


def chronicum_of(row: Any) -> Chronicum:
    """The chronicum of a row ``(id, owner id, started at, last actum at)``."""
    last = row[3]
    return Chronicum(
        id=row[0], owner_id=row[1], started_at=utc(row[2]), last_actum_at=None if last is None else utc(last)
    )
