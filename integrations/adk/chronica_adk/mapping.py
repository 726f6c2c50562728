"""How an ADK event becomes an actum, and how chronica-adk keeps state next to the events.

**Events.** Every event is one actum whose content is the event's JSON
(``Event.model_dump_json(exclude_none=True)``), so ``Event.model_validate_json`` gives back an
equal event: author, invocation id, event id, timestamp, content parts (text, inline data,
function calls and responses, thoughts), actions (state and artifact deltas, transfers,
escalations) and every other field. Its kind and actor follow one rule, so that other agents
reading the chronicum with kind filters see the events filed as they expect:

| event | actum kind |
| --- | --- |
| a part calls a function or runs code (``function_call``, ``executable_code``) | ``tool_request`` |
| else, a part answers one (``function_response``, ``code_execution_result``) | ``tool_response`` |
| else, every part is a thought (``thought=True``) | ``thought`` |
| else, it has content parts | ``message`` |
| no content parts (only actions: a state change, a transfer, an escalation) | ``thought`` |

The actor kind is ``human`` for the author ``"user"`` (the actor is then ADK's user id) and
``agent`` for every other author (the actor is the author, the agent's name).

**State.** ADK's state lives in *snapshots*: acta of kind ``tool_response`` by actor kind
``system`` and actor :data:`STATE_ACTOR`, whose content is ``{"chronica_adk": SCOPE, "state":
{...}, ...}``. A session's chronicum holds its session-scoped state after every event (written in
the same atomic batch as the event); the user's and the app's chronica hold the ``user:`` and
``app:`` state (keys without their prefix). The newest snapshot is read with a context window of
one actum (``last_n=1``), never by reading the events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from google.adk.events import Event
from google.genai import types
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from chronica_core import ActorKind, Actum, ActumKind, InvalidActum

__all__ = [
    "EVENT_ACTOR_KINDS",
    "STATE_ACTOR",
    "Snapshot",
    "event_actum",
    "event_kind",
    "event_of_actum",
    "snapshot_actum",
    "snapshot_of_actum",
]

STATE_ACTOR = "chronica-adk:state"
"""The actor of every state snapshot (actor kind ``system``, kind ``tool_response``)."""

USER_AUTHOR = "user"
"""ADK's author of the person's events."""

EVENT_ACTOR_KINDS = (ActorKind.HUMAN, ActorKind.AGENT)
"""The actor kinds of events: a window of these never holds a snapshot."""

SESSION_SCOPE = "session"
USER_SCOPE = "user"
APP_SCOPE = "app"


def event_kind(event: Event) -> ActumKind:
    """Return the actum kind of ``event`` by the rule in this module's docstring."""
    parts = event.content.parts if event.content is not None and event.content.parts else []
    if any(part.function_call is not None or part.executable_code is not None for part in parts):
        return ActumKind.TOOL_REQUEST
    if any(part.function_response is not None or part.code_execution_result is not None for part in parts):
        return ActumKind.TOOL_RESPONSE
    if parts and all(part.thought for part in parts):
        return ActumKind.THOUGHT
    return ActumKind.MESSAGE if parts else ActumKind.THOUGHT


def event_json(event: Event) -> str:
    """Return the JSON an event is stored as (``None`` fields left out).

    State-delta values JSON cannot hold are written as ADK writes them (its own serializer: a
    callable becomes its ``repr``, with ADK's warning).

    Raises:
        InvalidActum: (``field="content"``) pydantic cannot write the event as JSON at all, e.g.
            text holding a lone surrogate, which UTF-8 cannot encode.
    """
    try:
        return event.model_dump_json(exclude_none=True)
    except PydanticSerializationError as error:
        raise InvalidActum("content", f"the event cannot be written as JSON: {error}") from error


def event_actum(chronicum_id: str, event: Event, user_id: str, content: str | None = None) -> Actum:
    """Return the actum recording ``event`` in ``chronicum_id``; ``user_id`` writes the person's events.

    Args:
        chronicum_id: the session's chronicum.
        event: the event.
        user_id: ADK's user id, the actor of the person's (author ``"user"``) events.
        content: the event's JSON when the caller has it already (:func:`event_json`).

    Raises:
        InvalidActum: (``field="content"``) the event cannot be written as JSON.
    """
    human = event.author == USER_AUTHOR
    return Actum(
        chronicum_id,
        event_kind(event),
        ActorKind.HUMAN if human else ActorKind.AGENT,
        user_id if human else event.author,
        event_json(event) if content is None else content,
    )


def event_of_actum(actum: Actum) -> Event | None:
    """Return the event an actum records, or ``None`` for an actum no ADK reader can take.

    An actum written by this package gives back its event. A ``message`` that another agent
    wrote through Chronica directly (its content is not an event's JSON) becomes a text event:
    author ``"user"`` for a human actor, else the actor; role ``user`` or ``model``; the actum's
    id and ``at`` as the event's id and timestamp; no invocation id. Any other actum (a thought
    or a tool call of another framework, a snapshot) gives ``None``.
    """
    if actum.actor_kind not in EVENT_ACTOR_KINDS:
        return None
    try:
        return Event.model_validate_json(actum.content)
    except ValidationError:
        pass
    if actum.kind != ActumKind.MESSAGE:
        return None
    human = actum.actor_kind == ActorKind.HUMAN
    return Event(
        id=actum.id,
        invocation_id="",
        author=USER_AUTHOR if human else actum.actor,
        content=types.Content(role="user" if human else "model", parts=[types.Part(text=actum.content)]),
        timestamp=actum.at.timestamp() if actum.at is not None else 0.0,
    )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A state snapshot as read back.

    Attributes:
        id: the snapshot actum's id: the storage revision marker of a session.
        at: when the store wrote it (timezone-aware UTC): the session's last update time.
        state: the state, keys as ADK has them in that scope (``user:`` and ``app:`` ones
            without their prefix).
        event_id: the id of the event whose batch wrote it (``None`` for a creation or a
            user's or app's snapshot).
        write: the random nonce its writer put in, which tells a writer whether its own write
            landed or another one that used the same idempotency key.
    """

    id: str
    at: datetime
    state: dict[str, Any]
    event_id: str | None
    write: str


def snapshot_actum(
    chronicum_id: str, scope: str, state: dict[str, Any], write: str, event_id: str | None = None
) -> Actum:
    """Return the snapshot actum of ``state`` (JSON-ready values) in ``scope``."""
    content: dict[str, Any] = {"chronica_adk": scope, "state": state, "write": write}
    if event_id is not None:
        content["event"] = event_id
    return Actum(
        chronicum_id,
        ActumKind.TOOL_RESPONSE,
        ActorKind.SYSTEM,
        STATE_ACTOR,
        json.dumps(content, ensure_ascii=False),
    )


def snapshot_of_actum(actum: Actum, scope: str) -> Snapshot | None:
    """Return the snapshot ``actum`` holds for ``scope``, or ``None`` when it holds none."""
    if actum.actor != STATE_ACTOR or actum.actor_kind != ActorKind.SYSTEM or actum.at is None:
        return None
    try:
        content = json.loads(actum.content)
    except ValueError:
        return None
    if not isinstance(content, dict) or content.get("chronica_adk") != scope:
        return None
    state, write, event_id = content.get("state"), content.get("write"), content.get("event")
    if not isinstance(state, dict) or not isinstance(write, str):
        return None
    return Snapshot(actum.id, actum.at, state, event_id if isinstance(event_id, str) else None, write)
