"""``ChronicaSessionRepository``: Strands' ``SessionRepository`` kept in Chronica.

A Strands session is one chronicum; every agent of the session writes its messages into it
(:mod:`chronica_strands.mapping` says what each becomes), and each agent's conversation is the
whole chronicum as that agent sees it: its own messages exactly, everyone else's mapped from their
readable content.

**Numbering.** Strands numbers an agent's messages (``message_id``: 0, 1, 2, ...) and reads them
back from an index on (``list_messages(offset=...)``), the messages its conversation manager has
not dropped. Here an agent's conversation is numbered the same way: its own messages keep the
number Strands gave them (kept in their native form), and another writer's message takes the
number after the one before it. A read goes back from the newest actum only as far as the agent's
own message at or before the index asked for (a context window, doubled until it holds that
message), never further unless that message is further back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from strands.session.session_repository import SessionRepository
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    CapabilityUnsupported,
    Chronicarius,
    ChronicumNotFound,
    Store,
    ToolExchanges,
    open_store,
)
from chronica_core.capabilities import BATCH, HISTORY, NATIVE, store_capabilities
from chronica_core.readable import ForeignActa, shown
from chronica_strands.mapping import (
    AGENT_FORMAT,
    MESSAGE_FORMAT,
    MULTI_AGENT_FORMAT,
    PART_FORMAT,
    UPDATE_FORMAT,
    Part,
    bookkeeping_actum,
    foreign_message,
    message_parts,
    parse_native,
    readable,
    session_message_of,
)

if TYPE_CHECKING:
    from strands.multiagent import MultiAgentBase

__all__ = ["FIRST_WINDOW", "ChronicaSessionRepository"]

BOOKKEEPING: Final = frozenset({UPDATE_FORMAT, AGENT_FORMAT, MULTI_AGENT_FORMAT})

FIRST_WINDOW: Final = 64
"""How many of the newest acta a read asks for first; it asks for twice as many while that is not enough."""


@dataclass(slots=True)
class _Entry:
    """A message of an agent's conversation: its number (``None`` until known), whether it is the agent's."""

    number: int | None
    session_message: SessionMessage
    own: bool


def _iso(moment: datetime | None) -> str:
    return moment.isoformat() if moment is not None else ""


class ChronicaSessionRepository(SessionRepository):
    """A Strands session repository whose sessions are chronica of one person.

    Use it through :class:`chronica_strands.ChronicaSessionManager` (a ``RepositorySessionManager``
    over it), or give it to ``RepositorySessionManager(session_id=..., session_repository=...)``.

    Args:
        store: a store URL (``"memory://"``, ``"postgresql://..."``: the repository opens a
            blocking store and closes it in :meth:`close`), an open :class:`chronica_core.Store`,
            or a :class:`chronica_core.Chronicarius` (both left open: they are the caller's). The
            store needs the ``native`` and ``batch`` capabilities; with ``history`` too, a tool
            result names the tool use it answers.
        owner_id: the person the sessions belong to; only they read or write them.
        human_actor: the writer of the person's messages; the owner by default.
        foreign: which of other writers' thoughts and tool exchanges an agent's conversation
            holds (their messages always); by default none.
        store_options: options for ``open_store`` when ``store`` is a URL.

    Raises:
        TypeError: ``store`` is an asyncio store or ``AsyncChronicarius`` (use the blocking ones).
        UnknownBackend, BackendUnavailable, InvalidOption: from ``open_store`` for a URL.
    """

    def __init__(
        self,
        store: str | Store | Chronicarius,
        *,
        owner_id: str,
        human_actor: str | None = None,
        foreign: ForeignActa | None = None,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        self.owner_id = owner_id
        self.human_actor = owner_id if human_actor is None else human_actor
        self.foreign = ForeignActa() if foreign is None else foreign
        self._owned_store: Store | None = None
        if isinstance(store, str):
            self._owned_store = open_store(store, **(store_options or {}))
            self.chronicarius = Chronicarius(self._owned_store)
        elif isinstance(store, Chronicarius):
            self.chronicarius = store
        else:
            self.chronicarius = Chronicarius(store)
        capabilities = store_capabilities(self.chronicarius.store)
        self._missing = next((needed for needed in (NATIVE, BATCH) if needed not in capabilities), None)
        self._linking = HISTORY in capabilities
        self._requests: dict[
            tuple[str, str], dict[str, str]
        ] = {}  # (session, agent) -> tool use id -> actum id

    def close(self) -> None:
        """Close the store the repository opened from a URL (a store or keeper given is left open)."""
        if self._owned_store is not None:
            self._owned_store.close()

    # Sessions

    def create_session(self, session: Session, **kwargs: Any) -> Session:
        """Return ``session``: its chronicum is created by the first write into it.

        Raises:
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
        """
        self._require()
        return session

    def read_session(self, session_id: str, **kwargs: Any) -> Session | None:
        """Return the session whose chronicum is ``session_id``; ``None`` if none is the owner's.

        Raises:
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed.
        """
        self._require()
        try:
            chronicum = self.chronicarius.get_chronicum(self.owner_id, session_id)
        except ChronicumNotFound:
            return None
        return Session(
            session_id=session_id,
            session_type=SessionType.AGENT,
            created_at=_iso(chronicum.started_at),
            updated_at=_iso(chronicum.last_actum_at or chronicum.started_at),
        )

    def has_acta(self, session_id: str) -> bool:
        """Whether the session's chronicum holds any actum (one actum read).

        Raises:
            StoreError: the store failed.
        """
        return bool(self._window(session_id, 1))

    # Agents

    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """Record the agent's state (a bookkeeping actum; see :mod:`chronica_strands.mapping`).

        Raises:
            ChronicumNotFound: the session is another owner's chronicum; nothing is written.
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed.
        """
        self.update_agent(session_id, session_agent)

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> SessionAgent | None:
        """Return the agent's newest recorded state; ``None`` if it has none in the session.

        Raises:
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed.
        """
        form = self._newest_state(session_id, AGENT_FORMAT, "agent_id", agent_id)
        return None if form is None else SessionAgent.from_dict(form)

    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """Record the agent's state; the newest recorded is the one read.

        Raises:
            ChronicumNotFound: the session is another owner's chronicum; nothing is written.
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed.
        """
        self._require()
        content = f"state of agent {session_agent.agent_id}"
        actum = bookkeeping_actum(session_id, AGENT_FORMAT, session_agent.to_dict(), content)
        self.chronicarius.record_actum(self.owner_id, actum)

    # Messages

    def create_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        """Record the agent's message: its parts as one atomic batch (see :mod:`chronica_strands.mapping`).

        Raises:
            TypeError: the message holds a value JSON cannot represent; nothing is written.
            ChronicumNotFound: the session is another owner's chronicum; nothing is written.
            ActumTooLarge: the message is larger than the store accepts; nothing is written.
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed; nothing was written.
        """
        self._require()
        parts = message_parts(session_id, agent_id, session_message, self.human_actor)
        requests = self._requests.get((session_id, agent_id), {})
        acta = [self._linked(part, requests) for part in parts]
        stored = self.chronicarius.record_acta(self.owner_id, acta)
        for part, actum in zip(parts, stored, strict=True):
            if part.actum.kind is ActumKind.TOOL_REQUEST:
                self._requests[(session_id, agent_id)] = dict.fromkeys(part.tool_use_ids, actum.id)

    def read_message(
        self, session_id: str, agent_id: str, message_id: int, **kwargs: Any
    ) -> SessionMessage | None:
        """Return the agent's own message numbered ``message_id`` (its newest version), or ``None``.

        Raises:
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed.
        """
        for entry in self._conversation(session_id, agent_id, message_id):
            if entry.own and entry.number == message_id:
                return entry.session_message
        return None

    def update_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        """Record a later version of one of the agent's messages (Strands redacts one this way).

        Chronica never changes an actum: the new version is a bookkeeping actum that this
        agent's reads apply from then on. The first version stays in the record, where other
        readers see it; erase the chronicum to remove it.

        Raises:
            ChronicumNotFound: the session is another owner's chronicum; nothing is written.
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed.
        """
        self._require()
        form = {"agent_id": agent_id, "session_message": session_message.to_dict()}
        shown_text = "\n".join(filter(None, map(readable, session_message.to_message().get("content", []))))
        content = f"message {session_message.message_id} of agent {agent_id} now reads: {shown_text}"
        self.chronicarius.record_actum(
            self.owner_id, bookkeeping_actum(session_id, UPDATE_FORMAT, form, content)
        )

    def list_messages(
        self, session_id: str, agent_id: str, limit: int | None = None, offset: int = 0, **kwargs: Any
    ) -> list[SessionMessage]:
        """Return the agent's conversation from message number ``offset`` on, oldest first.

        Args:
            session_id: the chronicum id.
            agent_id: the agent whose conversation it is.
            limit: at most this many messages (``None``: all of them).
            offset: the number of the first message (the messages before it are not read).
            **kwargs: unused.

        Returns:
            The agent's own messages as it recorded them (their newest versions), everyone
            else's as ``user`` messages made from their readable content; ``[]`` for a session
            that is not the owner's.

        Raises:
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed.
        """
        messages = [entry.session_message for entry in self._conversation(session_id, agent_id, offset)]
        return messages if limit is None else messages[: max(limit, 0)]

    # Multi-agents

    def create_multi_agent(self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any) -> None:
        """Record a multi-agent's state (``multi_agent.serialize_state()``).

        Raises:
            ChronicumNotFound: the session is another owner's chronicum; nothing is written.
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed.
        """
        self.update_multi_agent(session_id, multi_agent)

    def read_multi_agent(self, session_id: str, multi_agent_id: str, **kwargs: Any) -> dict[str, Any] | None:
        """Return the multi-agent's newest recorded state; ``None`` if it has none in the session.

        Raises:
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed.
        """
        form = self._newest_state(session_id, MULTI_AGENT_FORMAT, "id", multi_agent_id)
        return None if form is None else dict(form["state"])

    def update_multi_agent(self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any) -> None:
        """Record the multi-agent's state; the newest recorded is the one read.

        Raises:
            ChronicumNotFound: the session is another owner's chronicum; nothing is written.
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed.
        """
        self._require()
        form = {"id": multi_agent.id, "state": multi_agent.serialize_state()}
        actum = bookkeeping_actum(
            session_id, MULTI_AGENT_FORMAT, form, f"state of multi-agent {multi_agent.id}"
        )
        self.chronicarius.record_actum(self.owner_id, actum)

    # Reading

    def _require(self) -> None:
        """Refuse a store without a capability this repository needs, before reading or writing."""
        if self._missing is not None:
            name = type(self.chronicarius.store).__name__
            raise CapabilityUnsupported(
                name,
                self._missing,
                f"{name} does not offer the {self._missing} capability, which chronica-strands "
                "needs to read its messages back exactly; use a store that does",
            )

    def _window(
        self,
        session_id: str,
        last_n: int,
        tool_exchanges: ToolExchanges = ToolExchanges.AS_WRITTEN,
        **filters: Any,
    ) -> list[Actum]:
        """The newest ``last_n`` acta (as written unless ``tool_exchanges`` says); ``[]`` for none."""
        self._require()
        try:
            return self.chronicarius.get_acta(
                self.owner_id, session_id, last_n=last_n, tool_exchanges=tool_exchanges, **filters
            )
        except ChronicumNotFound:
            return []

    def _newest_state(
        self, session_id: str, native_format: str, key: str, value: str
    ) -> dict[str, Any] | None:
        """The newest bookkeeping form of ``native_format`` whose ``key`` is ``value``, or ``None``."""
        window = FIRST_WINDOW
        while True:
            acta = self._window(
                session_id, window, actor_kinds=[ActorKind.SYSTEM], actum_kinds=[ActumKind.TOOL_RESPONSE]
            )
            for actum in reversed(acta):
                parsed = parse_native(actum)
                if parsed is not None and parsed[0] == native_format and parsed[1].get(key) == value:
                    return parsed[1]
            if len(acta) < window:
                return None
            window *= 2

    def _conversation(self, session_id: str, agent_id: str, offset: int) -> list[_Entry]:
        """The agent's conversation from the first message numbered ``offset`` or more on."""
        window = FIRST_WINDOW
        while True:
            # a tool result's use comes along, also when a summary covers the use and not the result
            acta = self._window(session_id, window, ToolExchanges.WHOLE)
            whole = len(acta) < window
            entries = self._entries(acta, agent_id, numbered=whole)
            anchor = next((index for index, entry in enumerate(entries) if entry.number is not None), None)
            if whole or (anchor is not None and (entries[anchor].number or 0) <= offset):
                if anchor is None:
                    return []
                start = next(
                    (
                        index
                        for index in range(anchor, len(entries))
                        if (entries[index].number or 0) >= offset
                    ),
                    len(entries),
                )
                return entries[start:]
            window *= 2

    def _entries(self, acta: Sequence[Actum], agent_id: str, *, numbered: bool) -> list[_Entry]:
        """The conversation ``acta`` (the newest acta of a chronicum) hold for the agent.

        ``numbered``: ``acta`` is the whole chronicum, so every message's number is known; else
        the messages before the agent's first own one in ``acta`` have ``None``.
        """
        entries: list[_Entry] = []
        number: int | None = -1 if numbered else None
        continues = False  # the previous actum was a part of one of the agent's messages
        for actum in acta:
            native_format, form = parse_native(actum) or ("", {})
            mine = form.get("agent_id") == agent_id
            if mine and native_format == PART_FORMAT and continues:
                entries[-1].session_message.message["content"].extend(
                    session_message_of(form).message["content"]
                )
                continue
            if mine and native_format in (MESSAGE_FORMAT, PART_FORMAT):
                session_message = session_message_of(form)
                number = session_message.message_id
                entries.append(_Entry(number, session_message, own=True))
                continues = True
                continue
            continues = False
            if mine and native_format == UPDATE_FORMAT:
                self._apply_update(entries, SessionMessage.from_dict(form["session_message"]))
            elif native_format in BOOKKEEPING:
                continue
            elif shown(actum, self.foreign):  # anyone else's, another agent's messages too
                number = None if number is None else number + 1
                foreign = SessionMessage(foreign_message(actum), -1 if number is None else number)
                entries.append(_Entry(number, foreign, own=False))
        return entries

    def _linked(self, part: Part, requests: dict[str, str]) -> Actum:
        """``part``'s actum; a tool response names the request of its first tool use (``history`` stores)."""
        if not self._linking or part.actum.kind is not ActumKind.TOOL_RESPONSE or not part.tool_use_ids:
            return part.actum
        return replace(part.actum, answers=requests.get(part.tool_use_ids[0], ""))

    @staticmethod
    def _apply_update(entries: list[_Entry], session_message: SessionMessage) -> None:
        for entry in reversed(entries):
            if entry.own and entry.number == session_message.message_id:
                entry.session_message = session_message
                return
