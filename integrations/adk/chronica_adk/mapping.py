"""How an ADK event becomes an actum and back, how other writers' acta read, and ADK's state.

**Events.** Every event is one actum. Its ``content`` is the event's **readable text**
(:func:`event_text`: its text parts, a function call's name and arguments, a function
response's result, code and its output; an event with only actions says what they do) and its
``native`` form (format :data:`NATIVE_FORMAT`) is the event's JSON
(``Event.model_dump_json(exclude_none=True)``), so ``Event.model_validate_json`` gives back an
equal event. On a store without the ``native`` capability the content is the event's JSON, as
in earlier releases. Kind and actor follow one rule, so that other agents reading the chronicum
with kind filters see the events filed as they expect:

| event | actum kind |
| --- | --- |
| a part calls a function or runs code (``function_call``, ``executable_code``) | ``tool_request`` |
| else, a part answers one (``function_response``, ``code_execution_result``) | ``tool_response`` |
| else, every part is a thought (``thought=True``) | ``thought`` |
| else, it has content parts | ``message`` |
| no content parts (only actions: a state change, a transfer, an escalation) | ``thought`` |

The actor kind is ``human`` for the author ``"user"`` (the actor is then ADK's user id) and
``agent`` for every other author (the actor is the author, the agent's name).

**Other writers' acta** (a person through the CLI, a plain agent, another framework) become
events of ADK's author ``"user"``, role ``user``: a person's message with its text, anyone
else's with attributed text (``"concierge said: ..."``, :func:`chronica_core.readable.attributed`).
ADK routes a turn by the authors of earlier events and takes an author that is neither
``"user"`` nor an agent of the running tree for an unknown agent; presented as the user's
context, as ADK itself presents other agents' turns to a model, they route like the person's
messages. Other writers' thoughts and tool exchanges are left out unless :class:`ForeignActa`
asks for them. Events written by earlier releases (the event's JSON as content) read back as
they were.

**State.** ADK's state lives in *snapshots*: acta of kind ``message`` by actor kind ``system``
and actor :data:`STATE_ACTOR`, whose content is ``{"chronica_adk": SCOPE, "state": {...}, ...}``,
each in a chronicum of state only (:mod:`chronica_adk.ids`): a session's, a user's, an app's.
The newest snapshot is read with a context window of one actum (``last_n=1``). Earlier releases
wrote a session's snapshots into its events' chronicum (kind ``tool_response``); those are read
still, and never shown as events.
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
from chronica_core.model import Native
from chronica_core.readable import ForeignActa, attributed, is_native, shown

__all__ = [
    "NATIVE_FORMAT",
    "STATE_ACTOR",
    "Snapshot",
    "event_actum",
    "event_kind",
    "event_of_actum",
    "event_text",
    "own_event",
    "snapshot_actum",
    "snapshot_of_actum",
]

NATIVE_FORMAT = "google-adk.event"
"""The format of this package's native form: the event's JSON."""

STATE_ACTOR = "chronica-adk:state"
"""The actor of every state snapshot (actor kind ``system``)."""

USER_AUTHOR = "user"
"""ADK's author of the person's events."""

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


def _part_text(part: types.Part) -> str:
    """The readable text of one part (``""`` for a part with nothing to read)."""
    if part.text is not None:
        return part.text
    if part.function_call is not None:
        arguments = json.dumps(part.function_call.args or {}, ensure_ascii=False, sort_keys=True)
        return f"{part.function_call.name}({arguments})"
    if part.function_response is not None:
        return json.dumps(part.function_response.response or {}, ensure_ascii=False, default=str)
    if part.executable_code is not None:
        return part.executable_code.code or ""
    if part.code_execution_result is not None:
        return part.code_execution_result.output or ""
    data = part.inline_data or part.file_data
    if data is not None:
        return f"[{data.mime_type or 'file'}]"
    return ""


def _actions_text(event: Event) -> str:
    """What an event's actions do, for an event without content parts."""
    actions = event.actions
    said: list[str] = []
    if actions.transfer_to_agent:
        said.append(f"transfer to {actions.transfer_to_agent}")
    if actions.escalate:
        said.append("escalate")
    if actions.state_delta:
        said.append("state: " + ", ".join(sorted(actions.state_delta)))
    if actions.artifact_delta:
        said.append("artifacts: " + ", ".join(sorted(actions.artifact_delta)))
    return "; ".join(said)


def event_text(event: Event) -> str:
    """Return the readable text of ``event``: what a person or another framework reads of it.

    The parts' texts, one a line: text as it is, a function call as ``name({json arguments})``,
    a function response as its result's JSON, code and code output as they are, data as
    ``[mime/type]``. An event without content parts says what its actions do
    (``transfer to booking``, ``escalate``, ``state: key, ...``), else ``[event]``. Never empty.
    """
    parts = event.content.parts if event.content is not None and event.content.parts else []
    text = "\n".join(piece for piece in map(_part_text, parts) if piece)
    text = text or _actions_text(event) or "[event]"
    if not text.isascii():  # a lone surrogate, which UTF-8 cannot encode, is written as its escape
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def event_actum(
    chronicum_id: str, event: Event, user_id: str, data: str | None = None, *, native: bool = True
) -> Actum:
    """Return the actum recording ``event`` in ``chronicum_id``; ``user_id`` writes the person's events.

    Args:
        chronicum_id: the session's chronicum.
        event: the event.
        user_id: ADK's user id, the actor of the person's (author ``"user"``) events.
        data: the event's JSON when the caller has it already (:func:`event_json`).
        native: keep the JSON as the native form and readable text as content; ``False`` (a
            store without the ``native`` capability): the content is the JSON.

    Raises:
        InvalidActum: (``field="content"``) the event cannot be written as JSON.
    """
    human = event.author == USER_AUTHOR
    data = event_json(event) if data is None else data
    kind, actor_kind = event_kind(event), ActorKind.HUMAN if human else ActorKind.AGENT
    actor = user_id if human else event.author
    if not native:
        return Actum(chronicum_id, kind, actor_kind, actor, data)
    return Actum(chronicum_id, kind, actor_kind, actor, event_text(event), native=Native(NATIVE_FORMAT, data))


def _old_event(actum: Actum) -> Event | None:
    """The event an actum written without a native form holds as its content, if it holds one."""
    if actum.native is not None or actum.actor_kind is ActorKind.SYSTEM or not actum.content.startswith("{"):
        return None
    try:
        return Event.model_validate_json(actum.content)
    except ValidationError:
        return None


def own_event(actum: Actum) -> Event | None:
    """Return the event ``actum`` records when this package wrote it (a state snapshot: ``None``).

    From its native form, or from the content of one written before there was a native form;
    ``None`` for anyone else's actum.
    """
    if actum.native is not None and is_native(actum, NATIVE_FORMAT):
        return Event.model_validate_json(actum.native.data)
    return _old_event(actum)


def event_of_actum(actum: Actum, foreign: ForeignActa | None = None) -> Event | None:
    """Return the event ADK reads for ``actum``, or ``None`` when it is left out.

    This package's own acta give back their event exactly (from ``native``, or from the content
    of one written before there was a native form). Anyone else's are mapped from their readable
    content (the module's docstring): author ``"user"``, role ``user``, the actum's id and ``at``
    as the event's id and timestamp, no invocation id. State snapshots, and other writers'
    thoughts and tool exchanges that ``foreign`` leaves out, give ``None``.
    """
    own = own_event(actum)
    if own is not None:
        return own
    if actum.actor == STATE_ACTOR or not shown(actum, foreign or ForeignActa()):
        return None
    return Event(
        id=actum.id,
        invocation_id="",
        author=USER_AUTHOR,
        content=types.Content(role="user", parts=[types.Part(text=attributed(actum))]),
        timestamp=actum.at.timestamp() if actum.at is not None else 0.0,
    )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A state snapshot as read back.

    Attributes:
        id: the snapshot actum's id: the storage revision marker of a session.
        at: when the store wrote it (timezone-aware UTC).
        state: the state, keys as ADK has them in that scope (``user:`` and ``app:`` ones
            without their prefix).
        event_id: the id of the event whose batch wrote it (``None`` for a creation or a
            user's or app's snapshot).
        write: the random nonce its writer put in, which tells a writer whether its own write
            landed or another one that used the same idempotency key.
        event_time: the timestamp of the event whose batch wrote it (``None`` for a creation,
            or one an earlier release wrote).
    """

    id: str
    at: datetime
    state: dict[str, Any]
    event_id: str | None
    write: str
    event_time: float | None = None

    @property
    def updated(self) -> float:
        """The session's last update time in seconds since the epoch, as ADK's services give it.

        The timestamp of the event that wrote the snapshot; the store's time for a creation.
        """
        return self.at.timestamp() if self.event_time is None else self.event_time


def snapshot_actum(
    chronicum_id: str,
    scope: str,
    state: dict[str, Any],
    write: str,
    event_id: str | None = None,
    event_time: float | None = None,
) -> Actum:
    """Return the snapshot actum of ``state`` (JSON-ready values) in ``scope``: a system message."""
    content: dict[str, Any] = {"chronica_adk": scope, "state": state, "write": write}
    if event_id is not None:
        content["event"] = event_id
    if event_time is not None:
        content["time"] = event_time
    text = json.dumps(content, ensure_ascii=False)
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.SYSTEM, STATE_ACTOR, text)


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
    event_time = content.get("time")
    return Snapshot(
        actum.id,
        actum.at,
        state,
        event_id if isinstance(event_id, str) else None,
        write,
        float(event_time) if isinstance(event_time, (int, float)) else None,
    )
