"""How integrations show other writers' acta: chronica_core.readable."""

from __future__ import annotations

import pytest

from chronica_core import ActorKind, Actum, ActumKind, Native
from chronica_core.readable import (
    ForeignActa,
    another_agents,
    answering_in_batch,
    attributed,
    is_native,
    readable,
    shown,
)


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


OLD_FORMS = [
    # an Agents SDK item: a message, a call, its output, a reasoning summary
    ('{"role":"user","content":"A table for four?"}', "A table for four?"),
    (
        '{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Rumah Teduh."}]}',
        "Rumah Teduh.",
    ),
    (
        '{"type":"function_call","call_id":"c1","name":"find","arguments":"{\\"party\\": 4}"}',
        'find({"party": 4})',
    ),
    ('{"type":"function_call_output","call_id":"c1","output":"2 places"}', "2 places"),
    ('{"type":"reasoning","summary":[{"type":"summary_text","text":"Kemang first."}]}', "Kemang first."),
    # an ADK event: text parts, a function call, a function response
    (
        '{"author":"booking","content":{"role":"model","parts":[{"text":"Booked."},{"text":"For four."}]}}',
        "Booked.\nFor four.",
    ),
    (
        '{"author":"booking","content":{"parts":[{"function_call":{"name":"book","args":{"party":4}}}]}}',
        'book({"party": 4})',
    ),
    (
        '{"author":"booking","content":{"parts":[{"function_response":{"name":"book","response":{"ok":true}}}]}}',
        '{"ok": true}',
    ),
    # a pydantic-ai message: a prompt, a tool call, a tool's return
    ('{"kind":"request","parts":[{"part_kind":"user-prompt","content":"Five people."}]}', "Five people."),
    (
        '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"find","args":{"area":"Kemang"}}]}',
        'find({"area": "Kemang"})',
    ),
    (
        '{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"find","content":"2 places"}]}',
        "2 places",
    ),
    # not such JSON: as it is
    ("Plain words.", "Plain words."),
    ('{"unrelated": 1}', '{"unrelated": 1}'),
    ("{not json", "{not json"),
]


@pytest.mark.parametrize(("content", "text"), OLD_FORMS)
def test_the_text_inside_a_framework_s_json_written_without_a_native_form(content: str, text: str) -> None:
    assert readable(actum(ActumKind.MESSAGE, ActorKind.AGENT, "booking", content)) == text


def test_content_beside_a_native_form_is_readable_already() -> None:
    written = Actum(
        "dinner",
        ActumKind.MESSAGE,
        ActorKind.AGENT,
        "booking",
        '{"content":"as is"}',
        native=Native("x", "{}"),
    )
    assert readable(written) == '{"content":"as is"}'
    old = actum(ActumKind.MESSAGE, ActorKind.AGENT, "booking", '{"role":"assistant","content":"Booked."}')
    assert attributed(old) == "booking said: Booked."


@pytest.mark.parametrize("kind", [ActumKind.THOUGHT, ActumKind.TOOL_REQUEST, ActumKind.TOOL_RESPONSE])
def test_a_system_s_thoughts_and_tool_acta_are_bookkeeping_never_shown(kind: ActumKind) -> None:
    """Integrations keep their records as such acta (a pop's tombstone, a saved conversation, state)."""
    tombstone = actum(kind, ActorKind.SYSTEM, "chronica-openai-agents:pop", '{"popped": "a1", "pop": "n"}')
    assert shown(tombstone, ForeignActa(thoughts=True, tool_exchanges=True)) is False
    note = actum(ActumKind.MESSAGE, ActorKind.SYSTEM, "system", "The restaurant closes at 22:00.")
    assert shown(note, ForeignActa()) is True  # a system's message is a message


def test_a_batch_s_responses_name_the_requests_they_answer() -> None:
    batch = [
        actum(ActumKind.MESSAGE, ActorKind.AGENT, "concierge", "Looking."),
        actum(ActumKind.TOOL_REQUEST, ActorKind.AGENT, "concierge", "search(kemang)"),
        actum(ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "concierge", "3 tables"),
    ]
    linked = answering_in_batch(batch, {2: 1})
    assert [(each.id, each.answers) for each in linked] == [
        (batch[0].id, batch[0].answers),
        ("call-1", batch[1].answers),
        (batch[2].id, "call-1"),
    ]
    assert [each.content for each in linked] == ["Looking.", "search(kemang)", "3 tables"]
    assert answering_in_batch(batch, {}) == batch


def test_another_agent_is_one_of_actor_kind_agent_with_another_actor() -> None:
    booking = actum(ActumKind.MESSAGE, ActorKind.AGENT, "booking", "Booked.")
    assert another_agents(booking, "concierge") is True
    assert another_agents(booking, "booking") is False
    assert another_agents(booking, None) is False
    person = actum(ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "Five.")
    assert another_agents(person, "concierge") is False
    system = actum(ActumKind.MESSAGE, ActorKind.SYSTEM, "system", "Closed.")
    assert another_agents(system, "concierge") is False
