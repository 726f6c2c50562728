"""The MongoDB stores: :class:`MongoStore` (pymongo ``MongoClient``) and :class:`AsyncMongoStore`.

Both only perform the commands that the plans of :mod:`chronica_mongodb.core` yield; every
decision (documents, order, errors) lives in those plans, once. The operations themselves are
those of :class:`chronica_core.PlannedStore` and :class:`chronica_core.AsyncPlannedStore`, which
run those plans through each store's ``_run``.
"""

from __future__ import annotations

import asyncio
import inspect
from datetime import UTC
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from bson.codec_options import CodecOptions
from pymongo import AsyncMongoClient, MongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import PyMongoError
from pymongo.synchronous.database import Database

from chronica_core.errors import StoreError
from chronica_core.planned import AsyncPlannedStore, PlannedStore
from chronica_core.plans import Plan, run_plan, run_plan_async
from chronica_mongodb.core import Command, MongoCore

__all__ = ["DEFAULT_DATABASE", "AsyncMongoStore", "MongoStore"]

DEFAULT_DATABASE = "chronica"
"""The database used when neither the ``database`` option nor the URL's path names one."""

Result = TypeVar("Result")

_CODEC_OPTIONS: CodecOptions[dict[str, Any]] = CodecOptions(tz_aware=True, tzinfo=UTC)
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def _flag(value: bool | str) -> bool:
    """Read a boolean option given as a bool or as text (``--option auto_migrate=false``)."""
    if isinstance(value, str):
        return value.strip().lower() not in _FALSE_WORDS
    return bool(value)


def _database_name(url: str | None, database: str | None) -> str:
    """The database: the ``database`` option, else the URL's path, else :data:`DEFAULT_DATABASE`."""
    if database:
        return database
    if url:
        path = unquote(urlsplit(url).path).lstrip("/")
        if path:
            return path
    return DEFAULT_DATABASE


def _client(client_class: Any, url: str | None, options: dict[str, Any]) -> Any:
    """Open a ``MongoClient`` or ``AsyncMongoClient`` (neither connects before its first operation).

    Raises ``StoreError("mongodb: open: ...")`` for a malformed URL or option, or an SRV record
    that cannot be resolved.
    """
    try:
        return client_class(url or "mongodb://localhost", **options)
    except (PyMongoError, ValueError) as error:  # pymongo reports some malformed URLs as ValueError
        raise StoreError("mongodb: open", str(error)) from error


def _database(client: Any, url: str | None, database: str | None) -> Any:
    """The store's database on ``client``, reading dates as timezone-aware UTC."""
    return client.get_database(_database_name(url, database), codec_options=_CODEC_OPTIONS)


class MongoStore(PlannedStore):
    """A blocking, idempotent store on MongoDB (collections ``chronica`` and ``acta``).

    Thread-safe: pymongo's ``MongoClient`` pools connections. Use it as a context manager or call
    :meth:`close`.

    Args:
        url: a ``mongodb://`` or ``mongodb+srv://`` URL; its path names the database. Ignored when
            ``client`` is given (except for the database name).
        client: an existing ``MongoClient`` to use instead of opening one; the store then does not
            close it.
        database: the database name; overrides the URL's path (default ``"chronica"``).
        auto_migrate: create the indexes on opening (``True`` or text such as ``"false"``).
        client_options: passed to ``MongoClient`` (e.g. ``maxPoolSize=50``), when it opens one.

    Raises:
        StoreError: ``mongodb: migrate: ...`` when the indexes cannot be created.
        StoreError: ``mongodb: open: ...`` when ``url`` or an option is malformed (or an SRV
            record cannot be resolved).
    """

    plans: MongoCore

    def __init__(
        self,
        url: str | None = None,
        *,
        client: MongoClient[dict[str, Any]] | None = None,
        database: str | None = None,
        auto_migrate: bool | str = True,
        **client_options: Any,
    ) -> None:
        self._owns_client = client is None
        self.client: MongoClient[dict[str, Any]] = client or _client(MongoClient, url, client_options)
        self.database: Database[dict[str, Any]] = _database(self.client, url, database)
        self.plans = MongoCore()
        if _flag(auto_migrate):
            self.migrate()

    def migrate(self) -> None:
        """Create the indexes if missing (safe to repeat, and from many processes at once)."""
        self._run(self.plans.migrate())

    def close(self) -> None:
        """Close the client if the store opened it."""
        if self._owns_client:
            self.client.close()

    def _run(self, plan: Plan[Any, Result]) -> Result:
        return run_plan(plan, self._perform)

    def _perform(self, command: Command) -> Any:
        outcome = getattr(self.database[command.collection], command.method)(*command.args, **command.kwargs)
        return outcome.to_list() if command.cursor else outcome


class AsyncMongoStore(AsyncPlannedStore):
    """The asyncio twin of :class:`MongoStore` on pymongo's ``AsyncMongoClient``.

    Built without awaiting anything: the client connects, and the indexes are created
    (``auto_migrate``), inside the event loop that first uses the store. Use it in that loop only,
    and ``await store.close()`` there. Arguments are those of :class:`MongoStore`, with an
    ``AsyncMongoClient`` as ``client``.
    """

    plans: MongoCore

    def __init__(
        self,
        url: str | None = None,
        *,
        client: AsyncMongoClient[dict[str, Any]] | None = None,
        database: str | None = None,
        auto_migrate: bool | str = True,
        **client_options: Any,
    ) -> None:
        self._owns_client = client is None
        self.client: AsyncMongoClient[dict[str, Any]] = client or _client(
            AsyncMongoClient, url, client_options
        )
        self.database: AsyncDatabase[dict[str, Any]] = _database(self.client, url, database)
        self.plans = MongoCore()
        self._migrated = not _flag(auto_migrate)
        self._migrating = asyncio.Lock()

    async def migrate(self) -> None:
        """Create the indexes if missing (safe to repeat, and from many processes at once)."""
        await run_plan_async(self.plans.migrate(), self._perform)
        self._migrated = True

    async def close(self) -> None:
        """Close the client if the store opened it."""
        if self._owns_client:
            await self.client.close()

    async def _run(self, plan: Plan[Any, Result]) -> Result:
        if not self._migrated:
            async with self._migrating:
                if not self._migrated:
                    await self.migrate()
        return await run_plan_async(plan, self._perform)

    async def _perform(self, command: Command) -> Any:
        outcome = getattr(self.database[command.collection], command.method)(*command.args, **command.kwargs)
        if inspect.isawaitable(outcome):  # find returns its cursor at once, the others a coroutine
            outcome = await outcome
        return await outcome.to_list() if command.cursor else outcome
