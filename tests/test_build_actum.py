"""``build_actum``: the same frozen ``Actum`` as the constructor gives, for stores that build many."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from datetime import UTC, datetime

import pytest

from chronica_core import ActorKind, Actum, ActumKind, Native, Span
from chronica_core.model import build_actum, recorded_at

AT = datetime(2026, 12, 2, 3, 0, 0, 123456, tzinfo=UTC)
FIELDS = (
    "dinner-friday",
    ActumKind.TOOL_RESPONSE,
    ActorKind.AGENT,
    "search",
    '[{"name":"Rumah Teduh"}]',
    "a" * 32,
    AT,
    Native("openai-agents.item", '{"type":"function_call_output"}'),
    "b" * 32,
    Span("c" * 32, "d" * 32),
)


def test_it_builds_an_actum_equal_to_the_constructors() -> None:
    built = build_actum(*FIELDS)
    assert type(built) is Actum
    assert built == Actum(*FIELDS)
    assert hash(built) == hash(Actum(*FIELDS))
    assert tuple(getattr(built, field.name) for field in dataclasses.fields(Actum)) == FIELDS


def test_every_field_of_actum_is_set() -> None:
    """A field added to ``Actum`` and not to the builder would be missing here: reading it raises."""
    built = build_actum(*FIELDS)
    assert [field.name for field in dataclasses.fields(Actum)] == list(Actum.__slots__)
    assert [getattr(built, field.name) for field in dataclasses.fields(Actum)] == list(FIELDS)


def test_a_built_actum_is_frozen() -> None:
    built = build_actum(*FIELDS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.content = "changed"  # type: ignore[misc]
    assert built.content == FIELDS[4]


def test_a_built_actum_copies_pickles_and_replaces_like_any_other() -> None:
    built = build_actum(*FIELDS)
    assert pickle.loads(pickle.dumps(built)) == built
    assert copy.copy(built) == built
    assert copy.deepcopy(built) == built
    replaced = dataclasses.replace(built, content="Rumah Teduh.")
    assert type(replaced) is Actum
    assert replaced.content == "Rumah Teduh."
    assert replaced.id == built.id


def test_an_unrecorded_actum_has_no_at() -> None:
    built = build_actum("dinner-friday", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi", "", None)
    assert built == Actum("dinner-friday", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi")


def test_recorded_at_is_the_actum_with_its_at_replaced() -> None:
    unrecorded = dataclasses.replace(Actum(*FIELDS), at=None)
    recorded = recorded_at(unrecorded, AT)
    assert type(recorded) is Actum
    assert recorded == dataclasses.replace(unrecorded, at=AT) == Actum(*FIELDS)
    assert unrecorded.at is None
