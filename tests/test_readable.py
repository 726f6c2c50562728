"""How integrations show other writers' acta: chronica_core.readable."""

from __future__ import annotations

import pytest

from chronica_core import ActorKind, Actum, ActumKind, Native
from chronica_core.readable import ForeignActa, attributed, is_native, shown


def actum(kind: ActumKind, actor_kind: ActorKind, actor: str, content: str) -> Actum:
    return Actum("dinner", kind, actor_kind, actor, content)


def test_a_person_s_message_is_its_content_and_anyone_else_s_says_who() -> None:
    assert attributed(actum(ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "Five people.")) == "Five people."
    assert (
        attributed(actum(ActumKind.MESSAGE, ActorKind.AGENT, "concierge", "Booked."))
        == "concierge said: Booked."
    )
    assert attributed(actum(ActumKind.THOUGHT, ActorKind.AGENT, "search", "Kemang first.")) == (
        "search thought: Kemang first."
    )
    assert attributed(actum(ActumKind.TOOL_REQUEST, ActorKind.AGENT, "search", "find(4)")) == (
        "search called a tool: find(4)"
    )
    assert attributed(actum(ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, "search", "2 places")) == (
        "search got a tool's answer: 2 places"
    )


@pytest.mark.parametrize(
    ("kind", "default", "with_thoughts", "with_tools"),
    [
        (ActumKind.MESSAGE, True, True, True),
        (ActumKind.THOUGHT, False, True, False),
        (ActumKind.TOOL_REQUEST, False, False, True),
        (ActumKind.TOOL_RESPONSE, False, False, True),
    ],
)
def test_messages_are_always_shown_thoughts_and_tools_on_request(
    kind: ActumKind, default: bool, with_thoughts: bool, with_tools: bool
) -> None:
    other = actum(kind, ActorKind.AGENT, "concierge", "x")
    assert shown(other, ForeignActa()) is default
    assert shown(other, ForeignActa(thoughts=True)) is with_thoughts
    assert shown(other, ForeignActa(tool_exchanges=True)) is with_tools


def test_an_integration_knows_its_own_acta_by_their_native_format() -> None:
    own = Actum("d", ActumKind.MESSAGE, ActorKind.AGENT, "a", "hi", native=Native("openai-agents.item", "{}"))
    assert is_native(own, "openai-agents.item")
    assert not is_native(own, "pydantic-ai.message")
    assert not is_native(actum(ActumKind.MESSAGE, ActorKind.AGENT, "a", "hi"), "openai-agents.item")
