"""``ChronicaSession``: the Agents SDK's ``Session`` protocol kept in one Chronica chronicum.

The session id is the chronicum id; every item is one actum, its readable text in ``content``
and the item itself in ``native`` (:mod:`chronica_openai_agents.mapping`); other writers' acta
read as messages. Nothing in Chronica edits or deletes one actum, so
:meth:`ChronicaSession.pop_item` appends a tombstone naming the popped actum and every read skips
tombstones and what they name.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import secrets
import weakref
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from agents import SessionSettings, TResponseInputItem

from chronica_core import (
    Actum,
    AsyncChronicarius,
    AsyncStore,
    ChronicumNotFound,
    open_async_store,
)
from chronica_core.capabilities import HISTORY, NATIVE, store_capabilities
from chronica_core.readable import ForeignActa
from chronica_core.rules import MAX_BATCH_SIZE
from chronica_openai_agents.mapping import item_actum, item_of_actum, linked, tombstone, tombstone_target

__all__ = ["ChronicaSession"]

WINDOW_SLACK = 4
"""How many acta beyond ``limit`` a read asks for at first: room for two popped items and their
tombstones (a turn taken back, its user message and its answer). A read that still finds too
few live items asks again for twice as many, until the chronicum is read whole."""


Live = tuple[Actum, TResponseInputItem]
"""An actum the session shows and the item it reads as."""


def _live(acta: Sequence[Actum], foreign: ForeignActa, actor: str) -> list[Live]:
    """Return the acta of ``acta`` the session shows as items and that were not popped, in order.

    Correct for any suffix of a chronicum: a tombstone is always written after the actum it names,
    so every tombstone naming an actum of the suffix is in the suffix too.
    """
    popped: set[str] = set()
    items: list[Live] = []
    for actum in acta:
        target = tombstone_target(actum)
        if target is not None:
            popped.add(target[0])
            continue
        item = item_of_actum(actum, foreign, actor=actor)
        if item is not None:
            items.append((actum, item))
    return [(actum, item) for actum, item in items if actum.id not in popped]


class _ExitCloser:
    """Closes the store a session opened from a URL when the interpreter exits, if nobody did.

    ``Runner.run_sync`` runs each turn in the thread's default event loop and leaves that loop
    open; the store's connections, and the driver's tasks (psycopg's pool workers), live in it.
    Left there, Python reports them at exit as "Task was destroyed but it is pending!". So at
    exit the store is closed in the loop the session last ran in that is still open and not
    running (a fresh loop when there is none): a loop ``asyncio.run`` made and closed since (a
    look at the session between ``run_sync`` turns) closed its connections when it closed.
    """

    def __init__(self, store: AsyncStore) -> None:
        self.store = store
        self.loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []  # oldest first

    def note(self, loop: asyncio.AbstractEventLoop) -> None:
        """Remember ``loop`` as the newest the session ran in."""
        self.loops = [ref for ref in self.loops if ref() is not None and ref() is not loop]
        self.loops.append(weakref.ref(loop))

    def __call__(self) -> None:
        open_loops = [
            loop
            for loop in (ref() for ref in reversed(self.loops))
            if loop is not None and not loop.is_closed() and not loop.is_running()
        ]
        with contextlib.suppress(Exception):  # the interpreter is exiting: nobody to report to
            if open_loops:
                open_loops[0].run_until_complete(self.store.close())
            else:
                asyncio.run(self.store.close())


class ChronicaSession:
    """An Agents SDK session whose items live in one chronicum of one owner.

    Pass it to ``Runner.run(agent, input, session=...)`` like any session. Before each turn the
    SDK reads the history (``get_items``, a context window of the newest items), after it the
    SDK stores the turn's items (``add_items``, one atomic batch).

    Args:
        session_id: the chronicum id (1 to 255 characters, no NUL). Give a new conversation an
            unguessable one: ``chronica_core.new_chronicum_id()``.
        store: a store URL (``"memory://"``, ``"postgresql://..."``: the session opens an asyncio
            store and closes it in :meth:`close`), an open :class:`chronica_core.AsyncStore`, or
            an :class:`chronica_core.AsyncChronicarius` (both left open: they are the caller's).
            The store needs the ``idempotency``, ``batch`` and ``erasure`` capabilities.
        owner_id: the person the conversation belongs to; only they read or write it.
        actor: the agent's actor id, the writer of assistant messages, thoughts and tool calls.
        human_actor: the writer of user messages; the owner by default.
        foreign: which of other writers' thoughts and tool exchanges the session hands the SDK
            (default: none; their messages always).
        session_settings: the SDK's settings (a ``SessionSettings`` or a dict of its fields;
            default ``SessionSettings()``); ``limit`` is the window ``get_items()`` reads when
            called without one (``None``: the whole history).
        store_options: options for ``open_async_store`` when ``store`` is a URL. A store opened
            from a URL is closed by :meth:`close`, or else when the interpreter exits (in the
            event loop ``Runner.run_sync`` left open, so that none of the driver's tasks is left
            pending).

    Raises:
        TypeError: ``store`` is a blocking store or ``Chronicarius`` (use the asyncio ones), or
            ``session_settings`` names a field ``SessionSettings`` does not have.
        UnknownBackend, BackendUnavailable, InvalidOption: from ``open_async_store`` for a URL.
    """

    session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        store: str | AsyncStore | AsyncChronicarius,
        *,
        owner_id: str,
        actor: str,
        human_actor: str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        store_options: dict[str, Any] | None = None,
        foreign: ForeignActa | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = SessionSettings().resolve(session_settings)
        self.owner_id = owner_id
        self.actor = actor
        self.human_actor = owner_id if human_actor is None else human_actor
        self.foreign = ForeignActa() if foreign is None else foreign
        self._owned_store: AsyncStore | None = None
        self._exit_closer: _ExitCloser | None = None
        if isinstance(store, str):
            self._owned_store = open_async_store(store, **(store_options or {}))
            self.chronicarius = AsyncChronicarius(self._owned_store)
            self._exit_closer = _ExitCloser(self._owned_store)
            atexit.register(self._exit_closer)
        elif isinstance(store, AsyncChronicarius):
            self.chronicarius = store
        else:
            self.chronicarius = AsyncChronicarius(store)
        capabilities = store_capabilities(self.chronicarius.store)
        self._native = NATIVE in capabilities
        self._linking = HISTORY in capabilities

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """Return the newest ``limit`` items, oldest first (the session's items when none was popped).

        Args:
            limit: how many of the newest items; ``None`` takes ``session_settings.limit``, and
                when that is ``None`` too, every item; ``0`` or less: no items.

        Returns:
            The items as they were added (equal JSON objects), with other writers' acta between
            them as messages (the module's docstring), popped ones left out; ``[]`` for a
            session with no items, a cleared one, one never written, or another owner's.

        Raises:
            StoreError: the store failed.
        """
        self._note_loop()
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is None:
            return [item for _, item in _live(await self._read(0), self.foreign, self.actor)]
        if limit <= 0:
            return []
        live = await self._newest_live(limit)
        return [item for _, item in live[-limit:]]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in order, as one atomic batch (all or none, no other write between them).

        More than 1000 items (Chronica's largest batch) land as consecutive batches of 1000, each
        atomic on its own. An empty list writes nothing.

        Raises:
            TypeError: an item is not a dict or holds a value JSON cannot represent; nothing is written.
            ChronicumNotFound: the session id is another owner's chronicum; nothing is written.
            ActumTooLarge: an item's JSON is larger than the store accepts; nothing is written.
            StoreError: the store failed; nothing of that batch was written.
        """
        self._note_loop()
        acta = [
            item_actum(self.session_id, item, self.actor, self.human_actor, native=self._native)
            for item in items
        ]
        for start in range(0, len(acta), MAX_BATCH_SIZE):
            batch = acta[start : start + MAX_BATCH_SIZE]
            if self._linking:
                batch = linked(items[start : start + MAX_BATCH_SIZE], batch)
            await self.chronicarius.record_acta(self.owner_id, batch)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item for every later reader of this session and return it.

        Appends a tombstone naming the item's actum, written with the idempotency key
        ``pop:<actum id>``: of several pops racing for the same item exactly one writes it, and
        each loser reads again and pops the next newest item, so concurrent pops remove
        different items. The tombstone is written only into the chronicum as it exists
        (``record_actum(create=False)``): a ``clear_session`` landing between the pop's read and
        its tombstone makes the pop find nothing, and it never starts a fresh session.

        Returns:
            The item removed; ``None`` when the session has no items (or is another owner's, or
            was cleared while the pop ran).

        Raises:
            StoreError: the store failed (a retry pops at most one item more).
        """
        self._note_loop()
        nonce = secrets.token_hex(16)
        while True:
            live = await self._newest_live(1)
            if not live:
                return None
            newest, newest_item = live[-1]
            try:
                stored = await self.chronicarius.record_actum(
                    self.owner_id,
                    tombstone(self.session_id, newest.id, nonce),
                    idempotency_key=f"pop:{newest.id}",
                    create=False,  # a clear that landed since the read leaves nothing to pop
                )
            except ChronicumNotFound:
                return None
            if tombstone_target(stored) == (newest.id, nonce):
                return newest_item
            # Another pop took this item first; its tombstone is now visible: take the next one.

    async def clear_session(self) -> None:
        """Erase the session's chronicum: every item and tombstone leaves the store.

        The same owner adding items later starts a fresh, empty session under the same id.
        Clearing a session never written, already cleared, or another owner's does nothing.

        Raises:
            StoreError: the store failed; nothing was erased.
        """
        self._note_loop()
        with contextlib.suppress(ChronicumNotFound):
            await self.chronicarius.erase_chronicum(self.owner_id, self.session_id)

    async def close(self) -> None:
        """Close the store the session opened from a URL (a store or keeper given is left open)."""
        if self._exit_closer is not None:
            atexit.unregister(self._exit_closer)
        if self._owned_store is not None:
            await self._owned_store.close()

    async def __aenter__(self) -> ChronicaSession:
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def _note_loop(self) -> None:
        """Remember the running loop: the one a store left open is closed in at exit."""
        if self._exit_closer is not None:
            self._exit_closer.note(asyncio.get_running_loop())

    async def _read(self, last_n: int) -> list[Actum]:
        """The newest ``last_n`` acta (``0``: all), or ``[]`` for a missing or foreign chronicum."""
        try:
            return await self.chronicarius.get_acta(self.owner_id, self.session_id, last_n=last_n)
        except ChronicumNotFound:
            return []

    async def _newest_live(self, wanted: int) -> list[Live]:
        """At least the newest ``wanted`` live item acta (all of them if fewer), oldest first.

        Reads a window of ``wanted`` + :data:`WINDOW_SLACK` acta, and twice as many each time
        popped items leave fewer than ``wanted`` live ones in a window that is not the whole
        chronicum.
        """
        window = wanted + WINDOW_SLACK
        while True:
            acta = await self._read(window)
            live = _live(acta, self.foreign, self.actor)
            if len(live) >= wanted or len(acta) < window:
                return live
            window *= 2
