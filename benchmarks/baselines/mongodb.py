"""The raw baseline for ``mongodb://`` (chronica-mongodb): pymongo alone, doing the store's operations.

In the steady state the store's ``record`` is one ``insert_one`` of the actum document at the
chronicum's next sequence number (the store remembers each chronicum's newest number; the unique
index ``(chronicum_id, seq)`` is what makes the number stick). The floor does the same insert,
reading a chronicum's newest number once and counting on from it. The window is the same
``find`` (filter on chronicum and kind, sort by ``seq`` descending, limit, projection),
materialised as a list. pymongo has no prepared statements: this is its floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from bson.int64 import Int64
from pymongo import AsyncMongoClient, MongoClient

from chronica_core import Actum, Chronicum

__all__ = ["ASYNC_COLUMNS", "COLUMNS", "FLOOR", "Loader"]

FLOOR = "pymongo on a MongoClient it keeps: insert_one at the next seq, one find for the window"

_PROJECTION = {"_id": 0, "id": 1, "kind": 1, "actor_kind": 1, "actor": 1, "content": 1, "at": 1}
_NEWEST_FIRST = [("seq", -1)]


def _client_options(options: dict[str, str]) -> tuple[str | None, dict[str, Any]]:
    """The database option (else the URL's, else ``chronica``) and what goes to the client."""
    client_options: dict[str, Any] = dict(options)
    database = client_options.pop("database", None)
    client_options.pop("auto_migrate", None)
    return database, client_options


def _database_name(client: MongoClient[dict[str, Any]], database: str | None) -> str:
    return database if database is not None else client.get_default_database(default="chronica").name


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


class Loader:
    """``insert_many`` of chronica and acta documents, as the store writes them.

    Args:
        url: the store's URL.
        options: the store's options; ``database`` picks the database (else the URL's path, else
            ``chronica``, as the store), ``auto_migrate`` is ignored, the rest go to the client.
    """

    fills_store = True

    def __init__(self, url: str, **options: str) -> None:
        database, client_options = _client_options(dict(options))
        self._client: MongoClient[dict[str, Any]] = MongoClient(url, tz_aware=True, **client_options)
        self._database = self._client[_database_name(self._client, database)]

    def prepare(self, chronicum_id: str, owner_id: str) -> None:
        """Insert the chronicum's document."""
        self._database["chronica"].insert_one(_chronicum_document(chronicum_id, owner_id, datetime.now(UTC)))

    def fill_chronica(self, chronica: Sequence[Chronicum]) -> None:
        """``insert_many`` the chronica's documents, in batches."""
        for start in range(0, len(chronica), 1000):
            documents = [
                _chronicum_document(chronicum.id, chronicum.owner_id, chronicum.started_at)
                for chronicum in chronica[start : start + 1000]
            ]
            self._database["chronica"].insert_many(documents, ordered=False)

    def fill(self, chronicum_id: str, acta: Sequence[Actum]) -> None:
        """``insert_many`` the history with sequence numbers 1..n, in batches."""
        for start in range(0, len(acta), 500):
            batch = [
                _document(actum, seq, actum.at or _now())
                for seq, actum in enumerate(acta[start : start + 500], start=start + 1)
            ]
            self._database["acta"].insert_many(batch, ordered=True)

    def close(self) -> None:
        """Close the client."""
        self._client.close()


class Floor:
    """pymongo on a ``MongoClient`` of its own (opened on first use)."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        self._url = url
        self._database_option, self._client_options = _client_options(options)
        self._client: MongoClient[dict[str, Any]] | None = None
        self._newest: dict[str, int] = {}

    def _acta(self) -> Any:
        if self._client is None:
            self._client = MongoClient(self._url, tz_aware=True, **self._client_options)
        return self._client[_database_name(self._client, self._database_option)]["acta"]

    def _next_seq(self, acta: Any, chronicum_id: str) -> int:
        if chronicum_id not in self._newest:
            newest = acta.find_one({"chronicum_id": chronicum_id}, {"seq": 1}, sort=_NEWEST_FIRST)
            self._newest[chronicum_id] = 0 if newest is None else int(newest["seq"])
        self._newest[chronicum_id] += 1
        return self._newest[chronicum_id]

    def append(self, actum: Actum) -> None:
        """One ``insert_one`` at the next sequence number."""
        acta = self._acta()
        acta.insert_one(_document(actum, self._next_seq(acta, actum.chronicum_id), _now()))

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """The store's window query for ``last_n=n, actum_kinds=[message]``, oldest first."""
        window = self._acta().find(
            _window_filter(chronicum_id), projection=_PROJECTION, sort=_NEWEST_FIRST, limit=n
        )
        documents: list[Any] = window.to_list()
        documents.reverse()
        return documents

    def close(self) -> None:
        """Close the client."""
        if self._client is not None:
            self._client.close()


class AsyncFloor:
    """The floor on pymongo's ``AsyncMongoClient`` (opened on first use, in the caller's loop)."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        self._url = url
        self._database_option, self._client_options = _client_options(options)
        self._client: AsyncMongoClient[dict[str, Any]] | None = None
        self._newest: dict[str, int] = {}

    def _acta(self) -> Any:
        if self._client is None:
            self._client = AsyncMongoClient(self._url, tz_aware=True, **self._client_options)
        name = self._database_option
        database = (
            self._client.get_default_database(default="chronica") if name is None else self._client[name]
        )
        return database["acta"]

    async def append(self, actum: Actum) -> None:
        """As :meth:`Floor.append`, awaited."""
        acta, chronicum_id = self._acta(), actum.chronicum_id
        if chronicum_id not in self._newest:
            newest = await acta.find_one({"chronicum_id": chronicum_id}, {"seq": 1}, sort=_NEWEST_FIRST)
            self._newest[chronicum_id] = 0 if newest is None else int(newest["seq"])
        self._newest[chronicum_id] += 1
        await acta.insert_one(_document(actum, self._newest[chronicum_id], _now()))

    async def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """As :meth:`Floor.last_messages`, awaited."""
        window = self._acta().find(
            _window_filter(chronicum_id), projection=_PROJECTION, sort=_NEWEST_FIRST, limit=n
        )
        documents: list[Any] = await window.to_list()
        documents.reverse()
        return documents

    async def close(self) -> None:
        """Close the client."""
        if self._client is not None:
            await self._client.close()


COLUMNS: dict[str, type[Any]] = {"floor": Floor}
ASYNC_COLUMNS: dict[str, type[Any]] = {"floor": AsyncFloor}
