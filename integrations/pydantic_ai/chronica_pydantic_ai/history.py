"""``ChronicaHistory``: a pydantic-ai conversation's messages kept in one Chronica chronicum.

Save what a run added (``result.new_messages()``) with :meth:`ChronicaHistory.save`, and load a
context window to pass back as ``message_history=`` with :meth:`ChronicaHistory.load`. Each
message is one actum (:mod:`chronica_pydantic_ai.mapping`); a run's messages are written as one
atomic batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse

from chronica_core import (
    Actum,
    AsyncChronicarius,
    AsyncStore,
    Chronicarius,
    ChronicumNotFound,
    InvalidActum,
    InvalidQuery,
    Store,
    open_async_store,
    open_store,
)
from chronica_core.capabilities import HISTORY, NATIVE, store_capabilities
from chronica_core.plans import Plan, run_plan, run_plan_async
from chronica_core.readable import ForeignActa
from chronica_pydantic_ai.mapping import linked, message_actum, message_of_actum, window

__all__ = ["ChronicaHistory"]

_Read = Plan[int, list[ModelMessage]]
"""A read: yields how many of the newest acta to read (``0``: all), is sent them, returns messages."""


def _read_window(last_n: int | None, foreign: ForeignActa, actor: str) -> _Read:
    """The read behind :meth:`ChronicaHistory.load`, for either flavour of store.

    Reads the newest ``last_n`` acta (every actum when ``last_n`` is ``None`` or below 1), and
    twice as many each time acta left out (other writers' thoughts and tool exchanges that
    ``foreign`` does not ask for) leave fewer than ``last_n`` messages, until the whole chronicum
    has been read.
    """

    def read(actum: Actum) -> ModelMessage | None:
        return message_of_actum(actum, foreign, actor=actor)

    if last_n is not None and (isinstance(last_n, bool) or not isinstance(last_n, int)):
        raise InvalidQuery("last_n", f"must be an int or None, not {type(last_n).__name__}")
    if last_n is None or last_n <= 0:
        acta = yield 0
        return window([m for m in map(read, acta) if m is not None], None)
    wanted = last_n + 1  # one more than asked, to know whether anything lies before the window
    while True:
        acta = yield wanted
        messages = [m for m in map(read, acta) if m is not None]
        whole = len(acta) < wanted
        if whole or len(messages) > last_n:
            return window(messages, last_n, whole=whole)
        wanted *= 2


class ChronicaHistory:
    """The message history of one pydantic-ai conversation, kept in one chronicum of one owner.

    ::

        history = ChronicaHistory(chat_id, "postgresql://app@db/app", owner_id="ardian", actor="concierge")
        result = await agent.run(prompt, message_history=await history.load(last_n=20))
        await history.save(result.new_messages(), idempotency_key=result.run_id)

    The asyncio methods (:meth:`load`, :meth:`save`) need an asyncio store, the blocking ones
    (:meth:`load_sync`, :meth:`save_sync`, for ``agent.run_sync``) a blocking one. Given a URL,
    the history opens each kind the first time one of its methods needs it (the asyncio store
    serves every event loop) and :meth:`close` closes what it opened.

    Args:
        chronicum_id: the conversation's chronicum id (1 to 255 characters, no NUL). Give a new
            conversation an unguessable one: ``chronica_core.new_chronicum_id()``.
        store: a store URL (``"memory://"``, ``"sqlite:///chat.db"``, ``"postgresql://..."``), or
            an open store or keeper, left open (it is the caller's): an
            :class:`chronica_core.AsyncStore` or :class:`chronica_core.AsyncChronicarius` for the
            asyncio methods, a :class:`chronica_core.Store` or :class:`chronica_core.Chronicarius`
            for the blocking ones. The store needs the ``batch`` capability (and
            ``idempotency`` for a key); every bundled backend has both.
        owner_id: the person the conversation belongs to; only they read or write it.
        actor: the agent's actor id, the writer of model responses and tool results.
        human_actor: the writer of user prompts; the owner by default.
        foreign: which acta of other writers :meth:`load` hands pydantic-ai besides their
            messages (other agents' thoughts, tool exchanges); by default none.
        store_options: options for ``open_async_store`` / ``open_store`` when ``store`` is a URL.

    Raises:
        TypeError: ``store`` is none of the above.
    """

    def __init__(
        self,
        chronicum_id: str,
        store: str | AsyncStore | AsyncChronicarius | Store | Chronicarius,
        *,
        owner_id: str,
        actor: str,
        human_actor: str | None = None,
        foreign: ForeignActa | None = None,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        self.chronicum_id = chronicum_id
        self.owner_id = owner_id
        self.actor = actor
        self.human_actor = owner_id if human_actor is None else human_actor
        self.foreign = ForeignActa() if foreign is None else foreign
        self._url: str | None = None
        self._store_options = dict(store_options or {})
        self._async: AsyncChronicarius | None = None
        self._sync: Chronicarius | None = None
        self._capabilities_async: frozenset[str] | None = None  # each keeper's store's, read once
        self._capabilities_sync: frozenset[str] | None = None
        self._opened_async: AsyncStore | None = None
        self._opened_sync: Store | None = None
        if isinstance(store, str):
            self._url = store
        elif isinstance(store, AsyncChronicarius):
            self._async = store
        elif isinstance(store, Chronicarius):
            self._sync = store
        elif isinstance(store, (AsyncStore, Store)):
            # Both protocols name the same methods; the keeper tells the flavours apart.
            try:
                self._async = AsyncChronicarius(store)  # type: ignore[arg-type]
            except TypeError:
                self._sync = Chronicarius(store)  # type: ignore[arg-type]
        else:
            raise TypeError(
                "store must be a store URL, a Store or AsyncStore, or a Chronicarius or "
                f"AsyncChronicarius, not {type(store).__name__}"
            )

    async def load(self, last_n: int | None = None) -> list[ModelMessage]:
        """Return the conversation's context window, to pass as ``message_history=``.

        Args:
            last_n: how many of the newest messages; ``None`` (or ``0`` or less): every message.
                The window never starts with a tool's result whose call it cut off. How it
                decides: of the newest ``last_n`` messages, a leading ``ModelRequest`` holding a
                ``ToolReturnPart`` (or a ``RetryPromptPart`` naming a tool) is left out whole,
                and so is the next one while it holds one too; so the window starts with a user
                prompt, a system prompt or a model response, and holds at most ``last_n``
                messages. A conversation of at most ``last_n`` messages is returned whole, as
                stored. The end is never cut, so every call in the window has its result in it
                when the stored history has it (:func:`chronica_pydantic_ai.mapping.window`).

        Returns:
            The messages, oldest first: this package's as ``ModelMessagesTypeAdapter`` reads
            back what it wrote (equal to what was saved), every other writer's actum as a request
            made from its readable content (:func:`chronica_pydantic_ai.mapping.message_of_actum`:
            a person's message a user prompt, another agent's an attributed one); ``[]`` for a
            conversation never saved, erased, or another owner's. Other writers' thoughts and tool
            exchanges are left out (and not counted) unless ``foreign`` asks for them.

        Raises:
            InvalidQuery: ``last_n`` is not an int or ``None`` (``field="last_n"``).
            TypeError: the history was given a blocking store (use :meth:`load_sync`).
            StoreError: the store failed.
        """
        keeper = self._asyncio_keeper()

        async def read(last_n: int) -> list[Actum]:
            try:
                return await keeper.get_acta(self.owner_id, self.chronicum_id, last_n=last_n)
            except ChronicumNotFound:
                return []

        return await run_plan_async(_read_window(last_n, self.foreign, self.actor), read)

    async def save(
        self, messages: Sequence[ModelMessage], *, idempotency_key: str | None = None
    ) -> list[Actum]:
        """Append ``messages`` (a run's ``result.new_messages()``) as one atomic batch.

        All or none land, consecutively: no other writer's actum falls between them. The first
        save creates the chronicum for the owner. An empty list writes nothing.

        Args:
            messages: ``ModelRequest`` and ``ModelResponse`` objects, oldest first, at most 1000.
            idempotency_key: with a key (the run's ``result.run_id``, say), a retried save of the
                same run returns what the first one stored and writes nothing.

        Returns:
            The acta stored, one per message, in order.

        Raises:
            InvalidActum: a message is not a ``ModelRequest`` or ``ModelResponse``, or pydantic-ai
                cannot write it as JSON (``.index`` is its position, ``.field`` is ``"content"``),
                or ``messages`` is not a list of them or holds more than 1000 (``field="acta"``);
                nothing is written.
            ActumTooLarge: (an ``InvalidActum``) a message (its readable content and native
                form together) is larger than the store accepts; nothing is written.
            ChronicumNotFound: the chronicum is another owner's; nothing is written.
            IdempotencyUnsupported, CapabilityUnsupported: the store cannot take a key or a
                batch; nothing is written.
            TypeError: the history was given a blocking store (use :meth:`save_sync`).
            StoreError: the store failed; nothing was written.
        """
        keeper = self._asyncio_keeper()
        if self._capabilities_async is None:
            self._capabilities_async = store_capabilities(keeper.store)
        acta = self._acta(messages, self._capabilities_async)
        return await keeper.record_acta(self.owner_id, acta, idempotency_key=idempotency_key)

    def load_sync(self, last_n: int | None = None) -> list[ModelMessage]:
        """The blocking twin of :meth:`load`, for ``agent.run_sync`` (no event loop involved).

        Raises:
            InvalidQuery: ``last_n`` is not an int or ``None`` (``field="last_n"``).
            TypeError: the history was given an asyncio store (use :meth:`load`).
            StoreError: the store failed.
        """
        keeper = self._blocking_keeper()

        def read(last_n: int) -> list[Actum]:
            try:
                return keeper.get_acta(self.owner_id, self.chronicum_id, last_n=last_n)
            except ChronicumNotFound:
                return []

        return run_plan(_read_window(last_n, self.foreign, self.actor), read)

    def save_sync(
        self, messages: Sequence[ModelMessage], *, idempotency_key: str | None = None
    ) -> list[Actum]:
        """The blocking twin of :meth:`save`, with the same arguments, returns and errors.

        Raises:
            TypeError: the history was given an asyncio store (use :meth:`save`).
        """
        keeper = self._blocking_keeper()
        if self._capabilities_sync is None:
            self._capabilities_sync = store_capabilities(keeper.store)
        acta = self._acta(messages, self._capabilities_sync)
        return keeper.record_acta(self.owner_id, acta, idempotency_key=idempotency_key)

    async def close(self) -> None:
        """Close the stores the history opened from a URL (a store or keeper given is left open).

        The history's methods then raise the closed store's ``StoreError``.
        """
        if self._opened_async is not None:
            store, self._opened_async = self._opened_async, None
            await store.close()  # later calls get the closed store's StoreError
        self.close_sync()

    def close_sync(self) -> None:
        """Close the blocking store the history opened from a URL (an asyncio one needs :meth:`close`)."""
        if self._opened_sync is not None:
            store, self._opened_sync = self._opened_sync, None
            store.close()

    async def __aenter__(self) -> ChronicaHistory:
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __enter__(self) -> ChronicaHistory:
        return self

    def __exit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close_sync()

    def _acta(self, messages: Sequence[ModelMessage], capabilities: frozenset[str]) -> list[Actum]:
        """One actum per message, checked before anything is written.

        With the store's ``native`` capability, readable content and the native form; with
        ``history``, each tool result naming its call (:func:`chronica_pydantic_ai.mapping.linked`).
        """
        native = NATIVE in capabilities
        if isinstance(messages, (str, bytes, ModelRequest, ModelResponse)) or not isinstance(
            messages, Sequence
        ):
            raise InvalidActum(
                "acta",
                f"messages must be a list of ModelRequest and ModelResponse, not {type(messages).__name__}",
            )
        acta = [
            message_actum(self.chronicum_id, m, self.actor, self.human_actor, index=i, native=native)
            for i, m in enumerate(messages)
        ]
        return linked(messages, acta) if HISTORY in capabilities else acta

    def _asyncio_keeper(self) -> AsyncChronicarius:
        """The asyncio keeper, opening the asyncio store from the URL on first use."""
        if self._async is None:
            if self._url is None:
                raise TypeError("this history was given a blocking store; use load_sync and save_sync")
            self._opened_async = open_async_store(self._url, **self._store_options)
            self._async = AsyncChronicarius(self._opened_async)
        return self._async

    def _blocking_keeper(self) -> Chronicarius:
        """The blocking keeper, opening the blocking store from the URL on first use."""
        if self._sync is None:
            if self._url is None:
                raise TypeError("this history was given an asyncio store; use load and save")
            self._opened_sync = open_store(self._url, **self._store_options)
            self._sync = Chronicarius(self._opened_sync)
        return self._sync
