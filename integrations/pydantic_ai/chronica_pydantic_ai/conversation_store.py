"""``ChronicaConversationStore``: pydantic-ai's ``ConversationStore`` kept in Chronica chronica.

pydantic-ai's base class works out which messages are new, where a history branches and what a
fork shares; this store implements its storage primitives on a :class:`chronica_core.AsyncChronicarius`:

- **A conversation is a chronicum** of the store's owner (the conversation id is the chronicum
  id), so the person and every other agent share it. Its **scope is the owner**: a record reports
  ``scope=owner_id``, and another scope reads as a conversation the store does not have.
- **An entry is an actum.** Its id is ``"<chronicum id>:<actum id>"`` (the chronicum the actum
  was written in); its parent is the actum before it in the history. Messages are written as
  :class:`chronica_pydantic_ai.ChronicaHistory` writes them, and every actum of the history is an
  entry: a person's CLI message, another agent's message, all mapped by
  :func:`chronica_pydantic_ai.mapping.message_of_actum`. ``read_entry`` is ``get_actum``.
- **The record** (head, usage, deferred tool requests, branches left, revision) is an actum of
  the conversation's chronicum, a thought of the system actor :data:`RECORD_ACTOR` whose native
  form (:data:`RECORD_FORMAT`) is the record's JSON; readers leave it out. The newest one counts.
  A record whose head is the newest entry of its line *follows* the line: a message another
  writer appends later (a person through the CLI) is the conversation's newest entry on the next
  load, never a conflict.
- **Revisions.** Every write after the revision ``R`` is recorded with the idempotency key
  ``"pydantic-ai:R"`` (``"pydantic-ai:new"`` for a conversation the store does not have): of two
  writers that loaded ``R``, the second one's write returns the first one's acta instead of
  landing, and is ``ConversationConflict`` with nothing written. A save that appends to the
  conversation's own chronicum writes its messages and the record as one atomic batch.
- **Branches and forks** are Chronica forks (``fork_chronicum``): a save whose messages follow
  an entry that is not the newest (after ``branch``, or a history rewritten by compaction) forks
  the line at that entry and appends there, leaving the old line stored; ``fork`` makes the new
  conversation's chronicum a fork of the source at the entry it keeps, sharing, not copying.
- ``delete`` records a tombstone: the conversation no longer loads or lists, its acta stay (the
  person's record). Erase the chronicum (``Chronicarius.erase_chronicum``) to remove them, and
  with them every fork of it. ``update`` (titles, metadata) is not supported.

The store needs the ``history``, ``native``, ``batch`` and ``idempotency`` capabilities.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, Final

from pydantic import TypeAdapter
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage
from pydantic_ai.run import AgentRunResult

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncStore,
    CapabilityUnsupported,
    ChronicumExists,
    ChronicumNotFound,
    new_chronicum_id,
    open_async_store,
)
from chronica_core.capabilities import BATCH, HISTORY, IDEMPOTENCY, LISTING, NATIVE, store_capabilities
from chronica_core.model import Native
from chronica_core.readable import ForeignActa, is_native
from chronica_pydantic_ai.mapping import RECORD_FORMAT, linked, message_actum, message_of_actum

__all__ = ["RECORD_ACTOR", "RECORD_FORMAT", "ChronicaConversationStore", "entry_id", "split_entry_id"]

RECORD_ACTOR: Final = "pydantic-ai"
"""The system actor of the record acta."""

KEY_PREFIX: Final = "pydantic-ai:"
"""Idempotency keys of this store's writes: the prefix, then the revision the write follows."""

UNSAVED: Final = "chronica:unsaved"
"""The revision of a chronicum that holds acta but no record yet (other writers' only)."""

_RECORDS: Final = TypeAdapter(ConversationRecord)
_PAGE: Final = 64
_NEEDS: Final = (HISTORY, NATIVE, BATCH, IDEMPOTENCY)


def entry_id(actum: Actum) -> str:
    """Return the entry id of ``actum``: ``"<chronicum id it was written in>:<actum id>"``."""
    return f"{actum.chronicum_id}:{actum.id}"


def split_entry_id(entry: str) -> tuple[str, str]:
    """Return ``(chronicum id, actum id)`` of an entry id; ``LookupError`` for one this store never made."""
    chronicum_id, _, actum_id = entry.rpartition(":")
    if not chronicum_id or not actum_id:
        raise LookupError(f"{entry!r} is not an entry id of a ChronicaConversationStore")
    return chronicum_id, actum_id


@dataclasses.dataclass(frozen=True)
class _Stored:
    """What a conversation's chronicum holds now: its record, its line and the key the next write uses."""

    record: ConversationRecord | None  # None: deleted
    line: str  # the chronicum new messages are appended to
    end: str | None  # entry id of the line's newest entry
    key: str  # the revision the next write follows, in its idempotency key


class ChronicaConversationStore(ConversationStore):
    """pydantic-ai's ``ConversationStore`` on Chronica: one owner's conversations, each a chronicum.

    ::

        conversations = ChronicaConversationStore(store, owner_id="ardian", actor="concierge")
        conversation = await conversations.load(chat_id) or Conversation(conversation_id=chat_id)
        result = await agent.run("A quiet table for four?", conversation=conversation)
        await conversations.save(result)

    See the module docstring for how conversations, entries, records, revisions, branches and
    forks map onto Chronica.

    Args:
        store: an asyncio store URL (opened on first use, closed by :meth:`close`), or an open
            :class:`chronica_core.AsyncStore` or :class:`chronica_core.AsyncChronicarius` (left
            open). It needs the ``history``, ``native``, ``batch`` and ``idempotency``
            capabilities (``listing`` for ``list_conversations``); the memory store has them.
        owner_id: the person whose conversations these are: every chronicum read or written is
            theirs, and it is every record's ``scope``.
        actor: the agent's actor id, the writer of model responses and tool results.
        human_actor: the writer of user prompts; the owner by default.
        foreign: which of other writers' thoughts and tool exchanges a history shows (default:
            none; their messages always).
        store_options: options for ``open_async_store`` when ``store`` is a URL.

    Raises:
        TypeError: ``store`` is none of the above.
    """

    def __init__(
        self,
        store: str | AsyncStore | AsyncChronicarius,
        *,
        owner_id: str,
        actor: str,
        human_actor: str | None = None,
        foreign: ForeignActa | None = None,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        self.owner_id = owner_id
        self.actor = actor
        self.human_actor = owner_id if human_actor is None else human_actor
        self.foreign = ForeignActa() if foreign is None else foreign
        self._url: str | None = None
        self._options = dict(store_options or {})
        self._opened: AsyncStore | None = None
        self._keeper: AsyncChronicarius | None = None
        self._capabilities: frozenset[str] | None = None  # the keeper's store's, read once
        self._renamed: dict[str, str] = {}  # entry ids pydantic-ai minted -> the ids of their acta
        if isinstance(store, str):
            self._url = store
        elif isinstance(store, AsyncChronicarius):
            self._keeper = store
        elif isinstance(store, AsyncStore):
            self._keeper = AsyncChronicarius(store)
        else:
            raise TypeError(
                "store must be a store URL, an AsyncStore or an AsyncChronicarius, "
                f"not {type(store).__name__}"
            )

    async def close(self) -> None:
        """Close the store opened from a URL (a store or keeper given is left open).

        The conversation store's methods then raise the closed store's ``StoreError``.
        """
        if self._opened is not None:
            store, self._opened = self._opened, None
            await store.close()  # the keeper stays on it: later calls get its StoreError

    async def __aenter__(self) -> ChronicaConversationStore:
        return self

    async def __aexit__(self, *exception: object) -> None:
        await self.close()

    async def save(
        self, conversation: Conversation | AgentRunResult[Any], *, scope: str | None = None
    ) -> list[ConversationEntry]:
        """Save as ``ConversationStore.save`` does; the entries returned carry the ids of their acta.

        Raises:
            ConversationConflict: as ``ConversationStore.save`` says; also for a conversation id
                another owner holds. Nothing is written.
            UserError: ``scope`` is not the owner.
        """
        entries = await super().save(conversation, scope=scope)
        ids = {entry.id: self._renamed.pop(entry.id, entry.id) for entry in entries}
        return [
            dataclasses.replace(
                entry,
                id=ids[entry.id],
                parent_id=None if entry.parent_id is None else ids.get(entry.parent_id, entry.parent_id),
            )
            for entry in entries
        ]

    # The storage primitives of ConversationStore.

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The conversation's newest record, or ``None`` (never saved, deleted, erased, another owner's).

        A chronicum of the owner that holds acta but no record (other writers' only) reads as a
        conversation of revision :data:`UNSAVED` whose history is those acta.
        """
        stored = await self._stored(conversation_id)
        return None if stored is None else stored.record

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        """The owner's saved conversations, newest ``updated_at`` first (``[]`` for another scope).

        Reads the record of every chronicum of the owner (the ``listing`` capability).
        """
        if scope not in (None, self.owner_id):
            return []
        keeper = await self._ready(LISTING)
        records: list[ConversationRecord] = []
        cursor: str | None = None
        while True:
            page = await keeper.list_chronica(self.owner_id, limit=1000, cursor=cursor)
            for chronicum in page.chronica:
                stored = await self._stored(chronicum.id)
                if stored is not None and stored.record is not None and stored.record.revision != UNSAVED:
                    records.append(stored.record)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        records.sort(key=lambda record: record.updated_at, reverse=True)
        return records[:limit]

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Write ``record`` and ``new_entries`` if the stored revision is ``expected_revision``.

        Raises:
            ConversationConflict: the stored revision is not ``expected_revision`` (also when
                another writer following the same revision won), the conversation id is another
                owner's, or a fork's id is taken. Nothing is written.
            UserError: ``record.scope`` is not the owner.
        """
        keeper = await self._ready()
        conversation_id = record.conversation_id
        if record.scope not in (None, self.owner_id):
            raise UserError(
                f"the scope of a ChronicaConversationStore is its owner {self.owner_id!r}, "
                f"not {record.scope!r}"
            )
        record = dataclasses.replace(record, scope=self.owner_id)
        stored = await self._stored(conversation_id)
        current = None if stored is None or stored.record is None else stored.record.revision
        if current != expected_revision:
            raise ConversationConflict(conversation_id)
        key = KEY_PREFIX + ("new" if stored is None else stored.key)
        line = conversation_id if stored is None or stored.record is None else stored.line
        end = None if stored is None else stored.end
        try:
            if new_entries:
                await self._append(record, new_entries, line, end, key)
                return
            if stored is None and record.head_id is not None:  # a fork: a chronicum sharing the source's acta
                source, at = split_entry_id(record.head_id)
                await keeper.fork_chronicum(self.owner_id, source, at=at, fork_id=conversation_id)
                line, end = conversation_id, record.head_id
            written = await keeper.record_actum(
                self.owner_id, self._record_actum(record, line, record.head_id == end), idempotency_key=key
            )
        except (ChronicumNotFound, ChronicumExists) as error:
            raise ConversationConflict(conversation_id) from error
        self._check_won(written, record)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Record a tombstone: the conversation no longer loads or lists; its acta stay.

        Raises:
            ConversationConflict: the stored revision is not ``expected_revision``.
        """
        keeper = await self._ready()
        stored = await self._stored(conversation_id)
        if stored is None or stored.record is None or stored.record.revision != expected_revision:
            raise ConversationConflict(conversation_id)
        tombstone = ConversationRecord(conversation_id=conversation_id, head_id=None, scope=self.owner_id)
        actum = self._record_actum(tombstone, stored.line, False, deleted=True)
        try:
            written = await keeper.record_actum(self.owner_id, actum, idempotency_key=KEY_PREFIX + stored.key)
        except ChronicumNotFound as error:
            raise ConversationConflict(conversation_id) from error
        self._check_won(written, tombstone)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id: its actum, read with ``get_actum``, and the one before it.

        Raises:
            LookupError: (``ActumNotFound``, ``ChronicumNotFound``) no such entry of the owner's.
        """
        history = await self.read_history(entry_id, limit=1)
        return history[-1]

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
        """The entries up to ``head_id``, oldest first, or only the last ``limit`` of them.

        Reads back page by page from the head's actum (``get_acta(before=...)``) and stops once
        it holds ``limit`` entries and the one before them (their parent).

        Raises:
            LookupError: (``ActumNotFound``, ``ChronicumNotFound``) ``head_id`` names no actum of
                the owner's.
        """
        if head_id is None or limit == 0:
            return []
        keeper = await self._ready()
        chronicum_id, actum_id = split_entry_id(head_id)
        head = await keeper.get_actum(self.owner_id, chronicum_id, actum_id)
        shown: list[tuple[Actum, ModelMessage]] = []  # newest first
        message = self._message(head)
        if message is None:
            raise LookupError(f"{head_id!r} is not an entry of a conversation")
        shown.append((head, message))
        before = actum_id
        while limit is None or len(shown) <= limit:
            page = await keeper.get_acta(
                self.owner_id, chronicum_id, before=before, last_n=_PAGE, tool_exchanges="as_written"
            )
            for actum in reversed(page):
                message = self._message(actum)
                if message is not None:
                    shown.append((actum, message))
            if len(page) < _PAGE:
                break
            before = page[0].id
        shown.reverse()
        entries: list[ConversationEntry] = []
        parent: str | None = None
        for actum, message in shown:
            entries.append(ConversationEntry(id=entry_id(actum), parent_id=parent, message=message))
            parent = entry_id(actum)
        return entries if limit is None else entries[-limit:]

    # How a conversation is kept in its chronicum.

    async def _ready(self, *needs: str) -> AsyncChronicarius:
        """The keeper (opened from the URL on first use), checked for the capabilities it needs."""
        if self._keeper is None:
            assert self._url is not None  # the constructor took a store, a keeper or a URL
            self._opened = open_async_store(self._url, **self._options)
            self._keeper = AsyncChronicarius(self._opened)
        if self._capabilities is None:
            self._capabilities = store_capabilities(self._keeper.store)
        for capability in (*_NEEDS, *needs):
            if capability not in self._capabilities:
                raise CapabilityUnsupported(
                    type(self._keeper.store).__name__,
                    capability,
                    f"ChronicaConversationStore needs a store with the {capability} capability "
                    f"({type(self._keeper.store).__name__} has none); use ChronicaHistory, "
                    "or a store that has it",
                )
        return self._keeper

    def _message(self, actum: Actum) -> ModelMessage | None:
        """The message ``actum`` is in a history (``None``: a record, or a hidden act of another writer)."""
        return message_of_actum(actum, self.foreign, actor=self.actor)

    async def _stored(self, conversation_id: str) -> _Stored | None:
        """What ``conversation_id`` holds now; ``None`` when it is no chronicum of the owner."""
        keeper = await self._ready()
        wanted = 8
        newest: Actum | None = None
        while True:
            try:
                acta = await keeper.get_acta(
                    self.owner_id,
                    conversation_id,
                    actum_kinds=[ActumKind.THOUGHT],
                    actor_kinds=[ActorKind.SYSTEM],
                    last_n=wanted,
                )
            except ChronicumNotFound:
                return None
            records = [a for a in acta if _is_record(a, conversation_id)]
            if records or len(acta) < wanted:
                newest = records[-1] if records else None
                break
            wanted *= 8
        if newest is None:  # acta of other writers only
            end = await self._end(conversation_id)
            unsaved = ConversationRecord(
                conversation_id=conversation_id, head_id=end, scope=self.owner_id, revision=UNSAVED
            )
            return _Stored(unsaved, conversation_id, end, UNSAVED)
        assert newest.native is not None  # _is_record says so
        data = json.loads(newest.native.data)
        record = _RECORDS.validate_python(data["record"])
        line = str(data["line"])
        end = await self._end(line)
        if data.get("deleted"):
            return _Stored(None, line, end, record.revision)
        if data["follows"]:
            record = dataclasses.replace(record, head_id=end)
        return _Stored(record, line, end, record.revision)

    async def _end(self, line: str) -> str | None:
        """The entry id of the newest entry of ``line``'s history, ``None`` when it has none."""
        keeper = await self._ready()
        before: str | None = None
        while True:
            try:
                page = await keeper.get_acta(
                    self.owner_id, line, before=before, last_n=_PAGE, tool_exchanges="as_written"
                )
            except ChronicumNotFound:
                return None
            for actum in reversed(page):
                if self._message(actum) is not None:
                    return entry_id(actum)
            if len(page) < _PAGE:
                return None
            before = page[0].id

    async def _append(
        self,
        record: ConversationRecord,
        new_entries: Sequence[ConversationEntry],
        line: str,
        end: str | None,
        key: str,
    ) -> None:
        """Write ``new_entries`` after their parent, then ``record`` following them."""
        keeper = await self._ready()
        conversation_id = record.conversation_id
        parent = new_entries[0].parent_id
        if parent != end:  # a branch: a new line from the parent, the old one stays
            if parent is None:
                line = new_chronicum_id()
            else:
                source, at = split_entry_id(parent)
                line = (await keeper.fork_chronicum(self.owner_id, source, at=at)).id
        messages = [entry.message for entry in new_entries]
        mine = linked(
            messages,
            [message_actum(line, m, self.actor, self.human_actor, index=i) for i, m in enumerate(messages)],
        )
        record_actum = self._record_actum(record, line, True)
        if line == conversation_id:  # messages and record in one atomic batch
            written = await keeper.record_acta(self.owner_id, [*mine, record_actum], idempotency_key=key)
            self._check_won(written[-1], record)
            written = written[:-1]
        else:
            written = await keeper.record_acta(self.owner_id, mine, idempotency_key=key)
            if [(a.content, a.native) for a in written] != [(a.content, a.native) for a in mine]:
                raise ConversationConflict(conversation_id)
            self._check_won(
                await keeper.record_actum(self.owner_id, record_actum, idempotency_key=key), record
            )
        for entry, actum in zip(new_entries, written, strict=True):
            self._renamed[entry.id] = entry_id(actum)

    def _record_actum(
        self, record: ConversationRecord, line: str, follows: bool, *, deleted: bool = False
    ) -> Actum:
        """The actum that records ``record`` (its head left to the line's end when it ``follows``)."""
        kept = dataclasses.replace(record, head_id=None) if follows else record
        data = {"record": _RECORDS.dump_python(kept, mode="json"), "line": line, "follows": follows}
        if deleted:
            data["deleted"] = True
        what = "deleted" if deleted else "saved"
        content = f"pydantic-ai {what} the conversation (revision {record.revision})"
        native = Native(RECORD_FORMAT, json.dumps(data, ensure_ascii=False, separators=(",", ":")))
        return Actum(
            record.conversation_id, ActumKind.THOUGHT, ActorKind.SYSTEM, RECORD_ACTOR, content, native=native
        )

    @staticmethod
    def _check_won(written: Actum, record: ConversationRecord) -> None:
        """Raise ``ConversationConflict`` when the keyed write returned another writer's actum.

        That is another writer's record, or, when a racing writer saved the same revision with its
        messages and record in one batch under the same key, that batch's first message.
        """
        native = written.native
        if native is None or native.format != RECORD_FORMAT:
            raise ConversationConflict(record.conversation_id)
        saved = json.loads(native.data).get("record")
        if not isinstance(saved, dict) or saved.get("revision") != record.revision:
            raise ConversationConflict(record.conversation_id)


def _is_record(actum: Actum, conversation_id: str) -> bool:
    """Whether ``actum`` is a record written in ``conversation_id`` itself (not in a source it forked)."""
    return (
        actum.chronicum_id == conversation_id
        and actum.actor == RECORD_ACTOR
        and is_native(actum, RECORD_FORMAT)
    )
