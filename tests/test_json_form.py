"""The public JSON form: ``from_dict`` refuses a wrong form naming the field (core only, no store)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from chronica_core import ActorKind, Actum, ActumKind, Chronicum, InvalidActum, InvalidChronicum

ACTUM = Actum(
    "dinner-friday",
    ActumKind.MESSAGE,
    ActorKind.HUMAN,
    "ardian",
    "Rumah Teduh?\x00 \U0001f37d",
    "0" * 32,
    datetime(2026, 11, 30, 20, 45, 43, 123456, tzinfo=UTC),
)
CHRONICUM = Chronicum("dinner-friday", "ardian", datetime(2026, 11, 30, 20, 0, tzinfo=UTC), ACTUM.at)


def test_the_forms_are_stable_and_round_trip() -> None:
    assert ACTUM.to_dict() == {
        "id": "0" * 32,
        "chronicum_id": "dinner-friday",
        "kind": "message",
        "actor_kind": "human",
        "actor": "ardian",
        "content": "Rumah Teduh?\x00 \U0001f37d",
        "at": "2026-11-30T20:45:43.123456Z",
    }
    assert CHRONICUM.to_dict() == {
        "id": "dinner-friday",
        "owner_id": "ardian",
        "started_at": "2026-11-30T20:00:00Z",
        "last_actum_at": "2026-11-30T20:45:43.123456Z",
    }
    assert Actum.from_dict(json.loads(json.dumps(ACTUM.to_dict()))) == ACTUM
    assert Chronicum.from_dict(json.loads(json.dumps(CHRONICUM.to_dict()))) == CHRONICUM
    unrecorded = Actum("c", ActumKind.TOOL_REQUEST, ActorKind.AGENT, "booking")
    assert Actum.from_dict(unrecorded.to_dict()) == unrecorded


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"chronicum_id": None}, "chronicum_id"),
        ({"chronicum_id": 5}, "chronicum_id"),
        ({"kind": "memo"}, "kind"),
        ({"kind": None}, "kind"),
        ({"actor_kind": "robot"}, "actor_kind"),
        ({"actor": ["ardian"]}, "actor"),
        ({"content": b"bytes"}, "content"),
        ({"id": 7}, "id"),
        ({"at": "yesterday"}, "at"),
        ({"at": "2026-11-30T20:45:43"}, "at"),
        ({"at": 1764535543}, "at"),
    ],
)
def test_actum_from_dict_names_the_field(change: dict[str, Any], field: str) -> None:
    form = ACTUM.to_dict() | change
    if None in change.values():
        form = {key: value for key, value in form.items() if key not in change}
    with pytest.raises(InvalidActum) as refused:
        Actum.from_dict(form)
    assert refused.value.field == field


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"id": None}, "id"),
        ({"owner_id": 1}, "owner_id"),
        ({"started_at": None}, "started_at"),
        ({"started_at": "2026-11-30"}, "started_at"),
        ({"last_actum_at": "soon"}, "last_actum_at"),
    ],
)
def test_chronicum_from_dict_names_the_field(change: dict[str, Any], field: str) -> None:
    form = CHRONICUM.to_dict() | change
    if None in change.values():
        form = {key: value for key, value in form.items() if key not in change}
    with pytest.raises(InvalidChronicum) as refused:
        Chronicum.from_dict(form)
    assert refused.value.field == field


@pytest.mark.parametrize("form", [None, [], "actum", 5])
def test_from_dict_of_something_not_a_mapping(form: Any) -> None:
    with pytest.raises(InvalidActum) as refused_actum:
        Actum.from_dict(form)
    assert refused_actum.value.field == "actum"
    with pytest.raises(InvalidChronicum) as refused_chronicum:
        Chronicum.from_dict(form)
    assert refused_chronicum.value.field == "chronicum"


def test_an_actum_to_dict_has_stable_names_and_utc_z_times() -> None:
    at = datetime(2026, 11, 30, 22, 15, 0, 5, tzinfo=timezone(timedelta(hours=1)))
    actum = Actum("c", ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, "clock", "é\x00", "ab" * 16, at)
    assert actum.to_dict() == {
        "id": "ab" * 16,
        "chronicum_id": "c",
        "kind": "tool_response",
        "actor_kind": "system",
        "actor": "clock",
        "content": "é\x00",
        "at": "2026-11-30T21:15:00.000005Z",
    }
    assert Actum.from_dict(json.loads(json.dumps(actum.to_dict()))) == actum
    assert Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi").to_dict()["at"] is None


def test_from_dict_ignores_unknown_keys_and_defaults_the_optional_ones() -> None:
    actum = Actum.from_dict(
        {"chronicum_id": "c", "kind": "thought", "actor_kind": "agent", "actor": "a", "x": 1}
    )
    assert actum == Actum("c", ActumKind.THOUGHT, ActorKind.AGENT, "a")
    assert Actum.from_dict({**actum.to_dict(), "at": "2026-11-30T21:00:00+01:00"}).at == datetime(
        2026, 11, 30, 20, tzinfo=UTC
    )


def test_from_dict_reads_null_as_left_out_where_a_field_may_be() -> None:
    form = {"chronicum_id": "c", "kind": "tool_request", "actor_kind": "agent", "actor": "a"}
    assert Actum.from_dict({**form, "id": None, "content": None, "at": None}) == Actum.from_dict(form)
