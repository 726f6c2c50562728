"""How an actum is kept in a MongoDB document, and read back from one.

The fields every actum has (``chronicum_id``, ``id``, ``kind``, ``actor_kind``, ``actor``,
``content``, ``at``) are always there. The optional ones are written only when the actum has
them, so a document written before they existed reads back as an actum without them:

- ``native``: ``{"format": ..., "data": ...}``, the framework's own form (``Actum.native``);
- ``answers``: the id of the tool request a tool response answers (``Actum.answers``);
- ``summarizes``: ``{"first": ..., "last": ...}``, the ids of the range a summary stands for
  (``Actum.summarizes``); the positions of that range are in ``covers`` (see
  :mod:`chronica_mongodb.history`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from chronica_core.model import ActorKind, Actum, ActumKind, Native, Span, build_actum
from chronica_core.rows import check_row

__all__ = ["ACTUM_FIELDS", "actum_document", "actum_of"]

ACTUM_FIELDS: Final = {
    "_id": 0,
    "chronicum_id": 1,
    "id": 1,
    "kind": 1,
    "actor_kind": 1,
    "actor": 1,
    "content": 1,
    "at": 1,
    "native": 1,
    "answers": 1,
    "summarizes": 1,
}
"""The projection of the fields an :class:`~chronica_core.Actum` is read from."""


def actum_document(actum: Actum, at: datetime) -> dict[str, Any]:
    """The fields of ``actum`` as stored, ``at`` as given (without ``seq``, ``position`` or a key)."""
    document: dict[str, Any] = {
        "chronicum_id": actum.chronicum_id,
        "id": actum.id,
        "kind": str(actum.kind),
        "actor_kind": str(actum.actor_kind),
        "actor": actum.actor,
        "content": actum.content,
        "at": at,
    }
    if actum.native is not None:
        document["native"] = actum.native.to_dict()
    if actum.answers:
        document["answers"] = actum.answers
    if actum.summarizes is not None:
        document["summarizes"] = actum.summarizes.to_dict()
    return document


def actum_of(chronicum_id: str, document: Mapping[str, Any], where: str) -> Actum:
    """The actum ``document`` holds, after checking it is one of ``chronicum_id``.

    Raises ``StoreError("mongodb: <where>: ...")`` when the document is another chronicum's.
    """
    check_row(f"mongodb: {where}", "chronicum id", chronicum_id, document.get("chronicum_id"))
    native = document.get("native")
    summarizes = document.get("summarizes")
    return build_actum(
        document["chronicum_id"],
        ActumKind(document["kind"]),
        ActorKind(document["actor_kind"]),
        document["actor"],
        document["content"],
        document["id"],
        document["at"],
        None if native is None else Native(native["format"], native["data"]),
        document.get("answers", ""),
        None if summarizes is None else Span(summarizes["first"], summarizes["last"]),
    )
