"""The raw baseline for ``mongodb://``: pymongo alone, doing the operations the store does.

In the steady state the store's ``record`` is one ``insert_one`` of the actum document at the
chronicum's next sequence number (the store remembers each chronicum's newest number; the unique
index ``(chronicum_id, seq)`` is what makes the number stick). The baseline does the same insert,
counting numbers itself. The context window is the same ``find`` (filter on chronicum and kind,
sort by ``seq`` descending, limit, projection), materialised as a list. No plans, no Chronicarius,
no conversion to ``Actum``: the ratio is what those add on top of the same driver work.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from bson.int64 import Int64
from pymongo import AsyncMongoClient, MongoClient

from chronica_core import Actum, Chronicum

__all__ = ["RawBaseline"]

_PROJECTION = {"_id": 0, "id": 1, "kind": 1, "actor_kind": 1, "actor": 1, "content": 1, "at": 1}
_NEWEST_FIRST = [("seq", -1)]


def _window_filter(chronicum_id: str) -> dict[str, Any]:
    return {"chronicum_id": chronicum_id, "kind": {"$in": ["message"]}}


def _now() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond - now.microsecond % 1000)


def _chronicum_document(chronicum_id: str, owner_id: str, started: datetime) -> dict[str, Any]:
    """A chronicum's document as the store's ``create`` writes it (BSON keeps milliseconds)."""
    return {
        "_id": chronicum_id,
        "owner_id": owner_id,
        "started_at": started.replace(microsecond=started.microsecond - started.microsecond % 1000),
        "started_at_us": started.microsecond % 1000,
    }


def _document(actum: Actum, seq: int, at: datetime) -> dict[str, Any]:
    return {
        "chronicum_id": actum.chronicum_id,
        "seq": Int64(seq),
        "id": actum.id,
        "kind": str(actum.kind),
        "actor_kind": str(actum.actor_kind),
        "actor": actum.actor,
        "content": actum.content,
        "at": at,
    }


class _AsyncPymongo:
    """pymongo's ``AsyncMongoClient`` (opened on first use) doing the same insert and find.

    It counts sequence numbers in the same table as its :class:`RawBaseline`, which prepares and
    fills the chronica it appends to.
    """

    def __init__(self, raw: RawBaseline) -> None:
        self._raw = raw
        self._client: AsyncMongoClient[dict[str, Any]] | None = None

    def _acta(self) -> Any:
        if self._client is None:
            self._client = AsyncMongoClient(self._raw.url, tz_aware=True, **self._raw.client_options)
        return self._client[self._raw.database_name]["acta"]

    async def append(self, actum: Actum) -> None:
        await self._acta().insert_one(_document(actum, self._raw.next_seq(actum.chronicum_id), _now()))

    async def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        documents = self._acta().find(
            _window_filter(chronicum_id), projection=_PROJECTION, sort=_NEWEST_FIRST, limit=n
        )
        window: list[Any] = await documents.to_list()
        window.reverse()
        return window

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


class RawBaseline:
    """pymongo on one ``MongoClient`` (thread-safe, pooled), on the store's database.

    Args:
        url: the store's URL.
        options: the store's options; ``database`` picks the database (else the URL's path, else
            ``chronica``, as the store), ``auto_migrate`` is ignored, the rest go to the client.
    """

    name = "pymongo"
    thread_safe = True
    fills_store = True

    def __init__(self, url: str, **options: str) -> None:
        client_options: dict[str, Any] = dict(options)
        database = client_options.pop("database", None)
        client_options.pop("auto_migrate", None)
        self.url = url
        self.client_options = client_options
        self._client: MongoClient[dict[str, Any]] = MongoClient(url, tz_aware=True, **client_options)
        if database is None:
            default = self._client.get_default_database(default="chronica")
            database = default.name
        self.database_name: str = database
        self._database = self._client[database]
        self._newest: dict[str, int] = {}
        self._lock = threading.Lock()
        self.async_variants: dict[str, Any] = {self.name: _AsyncPymongo(self)}

    def prepare(self, chronicum_id: str, owner_id: str) -> None:
        """Insert the chronicum's document, as ``Store.create`` does."""
        self._database["chronica"].insert_one(_chronicum_document(chronicum_id, owner_id, datetime.now(UTC)))
        with self._lock:
            self._newest[chronicum_id] = 0

    def fill_chronica(self, chronica: Sequence[Chronicum]) -> None:
        """``insert_many`` the chronica's documents (as ``Store.create`` writes them), in batches."""
        for start in range(0, len(chronica), 1000):
            documents = [
                _chronicum_document(chronicum.id, chronicum.owner_id, chronicum.started_at)
                for chronicum in chronica[start : start + 1000]
            ]
            self._database["chronica"].insert_many(documents, ordered=False)

    def fill(self, chronicum_id: str, acta: Sequence[Actum]) -> None:
        """``insert_many`` the history with sequence numbers 1..n, in batches."""
        batch: list[dict[str, Any]] = []
        for seq, actum in enumerate(acta, start=1):
            batch.append(_document(actum, seq, actum.at or _now()))
            if len(batch) == 500:
                self._database["acta"].insert_many(batch, ordered=True)
                batch = []
        if batch:
            self._database["acta"].insert_many(batch, ordered=True)
        with self._lock:
            self._newest[chronicum_id] = len(acta)

    def next_seq(self, chronicum_id: str) -> int:
        """Return the chronicum's next sequence number, counted here (as the store remembers it)."""
        with self._lock:
            seq = self._newest.get(chronicum_id, 0) + 1
            self._newest[chronicum_id] = seq
        return seq

    def append(self, actum: Actum) -> None:
        """The store's steady-state ``record``: one ``insert_one`` at the next sequence number."""
        self._database["acta"].insert_one(_document(actum, self.next_seq(actum.chronicum_id), _now()))

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """The store's window query for ``last_n=n, actum_kinds=[message]``."""
        documents = self._database["acta"].find(
            _window_filter(chronicum_id), projection=_PROJECTION, sort=_NEWEST_FIRST, limit=n
        )
        window = documents.to_list()
        window.reverse()
        return window

    def close(self) -> None:
        """Close the client."""
        self._client.close()
