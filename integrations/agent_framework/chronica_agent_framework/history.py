"""``ChronicaHistoryProvider``: the Agent Framework's ``HistoryProvider`` kept in Chronica.

The agent session's id is the chronicum id. Before a run the provider loads a context window of
the chronicum as messages; after it, it saves the run's messages as acta, one atomic batch
(:mod:`chronica_agent_framework.mapping` says what each message becomes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, ClassVar

from agent_framework import HistoryProvider, Message

from chronica_agent_framework.mapping import (
    NATIVE_FORMAT,
    PART_FORMAT,
    Part,
    foreign_message,
    message_parts,
)
from chronica_core import (
    ActorKind,
    Actum,
    AsyncChronicarius,
    AsyncStore,
    CapabilityUnsupported,
    ChronicumNotFound,
    open_async_store,
)
from chronica_core.capabilities import BATCH, HISTORY, NATIVE, store_capabilities
from chronica_core.readable import ForeignActa, is_native, shown
from chronica_core.rules import MAX_BATCH_SIZE

__all__ = ["ChronicaHistoryProvider"]


def _linked(parts: Sequence[Part], linking: bool) -> list[Actum]:
    """The acta of ``parts``, one batch: each tool response answering the batch's request for its call.

    A request is given a placeholder id (``request-<index>``) that its responses name; Chronica
    replaces both with the request's new id when it records the batch. ``linking`` is ``False``
    on a store without the ``history`` capability: then no response names its request.
    """
    acta: list[Actum] = []
    requests: dict[str, str] = {}
    for index, part in enumerate(parts):
        actum = part.actum
        if linking and part.requests:
            placeholder = f"request-{index}"
            requests.update(dict.fromkeys(part.requests, placeholder))
            actum = replace(actum, id=placeholder)
        elif linking and part.answers in requests:
            actum = replace(actum, answers=requests[part.answers])
        acta.append(actum)
    return acta


class ChronicaHistoryProvider(HistoryProvider):
    """An Agent Framework history provider whose messages live in Chronica, one chronicum a session.

    Give it to an agent (``Agent(..., context_providers=[provider])``) and run the agent with a
    session (``agent.create_session(session_id=...)``): the session id is the chronicum id.
    Several agents given providers on one store and sessions with one id share the conversation.

    Args:
        store: a store URL (``"memory://"``, ``"postgresql://..."``: the provider opens an asyncio
            store and closes it in :meth:`close`), an open :class:`chronica_core.AsyncStore`, or
            an :class:`chronica_core.AsyncChronicarius` (both left open: they are the caller's).
            The store needs the ``native`` and ``batch`` capabilities; with ``history`` too, each
            tool result names the call it answers and a window never starts with a result
            without its call.
        owner_id: the person the conversations belong to; only they read or write them.
        actor: the agent's actor id: the writer of its replies, thoughts, tool calls and results.
        human_actor: the writer of user messages; the owner by default.
        last_n: how many of the newest acta a run loads (``0``: the whole history).
        foreign: which of other writers' thoughts and tool exchanges a run loads (their messages
            always); by default none.
        source_id: the provider's id among the agent's context providers.
        store_options: options for ``open_async_store`` when ``store`` is a URL.
        **history_options: ``HistoryProvider``'s ``load_messages``, ``store_inputs``,
            ``store_outputs``, ``store_context_messages``, ``store_context_from``.

    Raises:
        TypeError: ``store`` is a blocking store or ``Chronicarius`` (use the asyncio ones).
        UnknownBackend, BackendUnavailable, InvalidOption: from ``open_async_store`` for a URL.
    """

    DEFAULT_SOURCE_ID: ClassVar[str] = "chronica"

    def __init__(
        self,
        store: str | AsyncStore | AsyncChronicarius,
        *,
        owner_id: str,
        actor: str,
        human_actor: str | None = None,
        last_n: int = 0,
        foreign: ForeignActa | None = None,
        source_id: str = DEFAULT_SOURCE_ID,
        store_options: dict[str, Any] | None = None,
        **history_options: Any,
    ) -> None:
        super().__init__(source_id, **history_options)
        self.owner_id = owner_id
        self.actor = actor
        self.human_actor = owner_id if human_actor is None else human_actor
        self.last_n = last_n
        self.foreign = ForeignActa() if foreign is None else foreign
        self._owned_store: AsyncStore | None = None
        if isinstance(store, str):
            self._owned_store = open_async_store(store, **(store_options or {}))
            self.chronicarius = AsyncChronicarius(self._owned_store)
        elif isinstance(store, AsyncChronicarius):
            self.chronicarius = store
        else:
            self.chronicarius = AsyncChronicarius(store)
        capabilities = store_capabilities(self.chronicarius.store)
        self._missing = next((needed for needed in (NATIVE, BATCH) if needed not in capabilities), None)
        self._linking = HISTORY in capabilities

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Message]:
        """Return the session's context window as messages, oldest first.

        This agent's own messages come back equal to what was saved (a message saved in several
        parts, whole). Everyone else's acta are mapped from their readable content
        (:func:`chronica_agent_framework.mapping.foreign_message`): their messages always, their
        thoughts and tool exchanges as ``foreign`` says.

        Args:
            session_id: the chronicum id.
            state: unused (the messages live in the store, not in the session's state).
            **kwargs: unused.

        Returns:
            The messages; ``[]`` for a session never written, erased, or another owner's.

        Raises:
            ValueError: ``session_id`` is ``None`` (run the agent with a session).
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
            StoreError: the store failed.
        """
        chronicum_id = self._chronicum_id(session_id)
        self._require()
        try:
            acta = await self.chronicarius.get_acta(self.owner_id, chronicum_id, last_n=self.last_n)
        except ChronicumNotFound:
            return []
        messages: list[Message] = []
        continues = False  # the previous actum was one of this agent's message parts
        for actum in acta:
            if self._own(actum):
                assert actum.native is not None
                part = Message.from_json(actum.native.data)
                if continues and actum.native.format == PART_FORMAT:
                    messages[-1].contents.extend(part.contents)
                else:
                    messages.append(part)
                continues = True
                continue
            continues = False
            if shown(actum, self.foreign):
                messages.append(foreign_message(actum))
        return messages

    async def save_messages(
        self,
        session_id: str | None,
        messages: Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Append ``messages`` in order, as one atomic batch (all or none, no other write between them).

        More than 1000 acta (Chronica's largest batch) land as consecutive batches of 1000, each
        atomic on its own. No messages: nothing is written.

        Args:
            session_id: the chronicum id.
            messages: the run's messages.
            state: unused.
            **kwargs: unused.

        Raises:
            ValueError: ``session_id`` is ``None``; nothing is written.
            CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability;
                nothing is written.
            TypeError: a message holds a value ``to_json()`` cannot write; nothing is written.
            ChronicumNotFound: the session id is another owner's chronicum; nothing is written.
            ActumTooLarge: a message is larger than the store accepts; nothing is written.
            StoreError: the store failed; nothing of that batch was written.
        """
        chronicum_id = self._chronicum_id(session_id)
        self._require()
        parts = [
            part
            for message in messages
            for part in message_parts(chronicum_id, message, self.actor, self.human_actor)
        ]
        for start in range(0, len(parts), MAX_BATCH_SIZE):
            batch = _linked(parts[start : start + MAX_BATCH_SIZE], self._linking)
            await self.chronicarius.record_acta(self.owner_id, batch)

    async def close(self) -> None:
        """Close the store the provider opened from a URL (a store or keeper given is left open)."""
        if self._owned_store is not None:
            await self._owned_store.close()

    async def __aenter__(self) -> ChronicaHistoryProvider:
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def _own(self, actum: Actum) -> bool:
        """Whether ``actum`` is this agent's to read back from its native form.

        Acta an agent framework provider wrote in the person's or the system's name are read
        back from their native form; another agent's are that agent's, read from their content.
        """
        own_format = is_native(actum, NATIVE_FORMAT) or is_native(actum, PART_FORMAT)
        return own_format and (actum.actor_kind is not ActorKind.AGENT or actum.actor == self.actor)

    def _require(self) -> None:
        """Refuse a store without a capability this provider needs, before reading or writing."""
        if self._missing is not None:
            name = type(self.chronicarius.store).__name__
            raise CapabilityUnsupported(
                name,
                self._missing,
                f"{name} does not offer the {self._missing} capability, which chronica-agent-framework "
                "needs to read its messages back exactly; use a store that does",
            )

    @staticmethod
    def _chronicum_id(session_id: str | None) -> str:
        if session_id is None:
            raise ValueError(
                "session_id: ChronicaHistoryProvider keeps a session's messages under its id; "
                "run the agent with a session (agent.create_session())"
            )
        return session_id
