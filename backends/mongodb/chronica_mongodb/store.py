"""The MongoDB stores: :class:`MongoStore` (pymongo ``MongoClient``) and :class:`AsyncMongoStore`.

Both only perform the commands that the plans of :mod:`chronica_mongodb.core` yield; every
decision (documents, order, errors) lives in those plans, once. The operations themselves are
those of :class:`chronica_core.PlannedStore` and :class:`chronica_core.AsyncPlannedStore`, which
run those plans through each store's ``_run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import inspect
import logging
import re
import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from bson.codec_options import CodecOptions
from pymongo import AsyncMongoClient, MongoClient, common, uri_parser
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import ConfigurationError, InvalidURI, PyMongoError
from pymongo.synchronous.database import Database

from chronica_core.after_fork import renew_after_fork
from chronica_core.errors import ChronicumNotFound, InvalidOption, StoreError
from chronica_core.follow import NEWEST, acta_after_by_windows, follow_reads, newest_actum_id
from chronica_core.history import Layout, Located, Segment, WindowReads, WindowRows
from chronica_core.limits import MAX_CONTENT_OPTION, content_limit_option
from chronica_core.loops import PerLoop
from chronica_core.model import ActaQuery, Actum, Chronicum
from chronica_core.options import count_option, flag_option, real_option, seconds_option
from chronica_core.planned import AsyncPlannedStore, PlannedStore
from chronica_core.plans import Plan, run_plan, run_plan_async
from chronica_core.redaction import masked_url, redact, redact_error
from chronica_core.store import ListingPosition
from chronica_mongodb import after_fork, history, migration, retention
from chronica_mongodb.core import DATABASE, DOCUMENT_RESERVE, MAX_DOCUMENT_BYTES, Command, MongoCore
from chronica_mongodb.follow import (
    POLL_SECONDS,
    UNDECIDED,
    Watcher,
    deadline_of,
    remaining_until,
    wait_seconds,
    waker_for_running_loop,
)

__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_SERVER_SELECTION_TIMEOUT_MS",
    "STORE_OPTIONS",
    "AsyncMongoStore",
    "MongoStore",
]

DEFAULT_DATABASE = "chronica"
"""The database used when neither the ``database`` option nor the URL's path names one."""

Result = TypeVar("Result")

_CODEC_OPTIONS: CodecOptions[dict[str, Any]] = CodecOptions(tz_aware=True, tzinfo=UTC)

STORE_OPTIONS = ("database", "auto_migrate", "operation_timeout", MAX_CONTENT_OPTION)
"""The options the store itself defines; every other option is one of pymongo's ``MongoClient``."""

_HOUR_MS = 3_600_000
BOUNDED_CLIENT_OPTIONS: dict[str, tuple[str, float, float]] = {
    "maxPoolSize": ("count", 0, 1000),  # 0: no limit
    "minPoolSize": ("count", 0, 1000),
    "maxConnecting": ("count", 1, 100),
    "timeoutMS": ("milliseconds", 1000, _HOUR_MS),  # a whole operation: a second at least
    "socketTimeoutMS": ("milliseconds", 1000, _HOUR_MS),
    "waitQueueTimeoutMS": ("milliseconds", 1000, _HOUR_MS),
    "connectTimeoutMS": ("milliseconds", 100, _HOUR_MS),  # a connection on a near network
    "serverSelectionTimeoutMS": ("milliseconds", 100, _HOUR_MS),
    "heartbeatFrequencyMS": ("milliseconds", 500, _HOUR_MS),  # pymongo's own least
    "maxIdleTimeMS": ("milliseconds", 1, _HOUR_MS),
    "localThresholdMS": ("milliseconds", 0, _HOUR_MS),
    "wTimeoutMS": ("milliseconds", 0, _HOUR_MS),
}
"""pymongo's numeric ``MongoClient`` options that the store bounds (kind, least, most) before
pymongo checks them: pymongo takes values no store can work with (a ``timeoutMS`` of a
microsecond, a ``minPoolSize`` of 10**30). Names are matched in any case, as pymongo does."""

_BOUNDED = {name.lower(): (name, *bounds) for name, bounds in BOUNDED_CLIENT_OPTIONS.items()}

DEFAULT_SERVER_SELECTION_TIMEOUT_MS = 5000
"""How long, in milliseconds, an operation waits for a server it can use before it fails, unless
``serverSelectionTimeoutMS`` is given (as an option or in the URL). pymongo's own default, 30 s,
keeps a caller waiting half a minute on a URL with no server behind it. A replica set electing a
new primary (about 10-12 s at the server's default ``electionTimeoutMillis``) may want more: give
it."""

_BACKEND = "mongodb"
_CREATING = threading.Lock()
"""Held while a store creates its watcher, so that racing first waits make one."""
_log = logging.getLogger("chronica.mongodb")
_DATABASE_NAME_FORBIDDEN = frozenset(' ./\\"$\x00')  # as pymongo and the server refuse them
_DATABASE_NAME_MAX_BYTES = 63  # MongoDB: "less than 64 bytes"


def _name_problem(name: str) -> str | None:
    """Why MongoDB cannot use ``name`` as a database name, or ``None`` when it can."""
    if not name:
        return "a database name cannot be empty"
    forbidden = sorted(set(name) & _DATABASE_NAME_FORBIDDEN)
    if forbidden:
        return f"a database name cannot contain {forbidden[0]!r}"
    if len(name.encode()) > _DATABASE_NAME_MAX_BYTES:
        return f"a database name is at most {_DATABASE_NAME_MAX_BYTES} bytes in UTF-8"
    return None


def _database_name(url: str | None, database: Any) -> str:
    """The database: the ``database`` option, else the URL's path, else :data:`DEFAULT_DATABASE`.

    Raises ``InvalidOption`` for a ``database`` option MongoDB cannot use as a name, and
    ``StoreError("mongodb: open: ...")`` for such a name in the URL's path, or for a URL that
    cannot be split into its parts (an unclosed ``[``), its secrets redacted.
    """
    if database is not None:
        problem = _name_problem(database) if isinstance(database, str) else "expected a database name"
        if problem:
            raise InvalidOption(_BACKEND, "database", f"{problem}, got {database!r}")
        return str(database)
    try:
        path = unquote(urlsplit(url).path).lstrip("/") if url else ""
    except ValueError as error:  # "Invalid IPv6 URL": an unclosed "[" in the host
        redact_error(error, url or "")
        raise StoreError("mongodb: open", f"not a MongoDB URL: {error}") from error
    if not path:
        return DEFAULT_DATABASE
    problem = _name_problem(path)
    if problem:  # a "path" may be the end of a password holding a "/": redacted
        detail = f"the URL's path names no database: {problem}, got {path!r}"
        raise StoreError("mongodb: open", redact(detail, url or ""))
    return path


def _unknown(name: str) -> InvalidOption:
    client_options = sorted({*common.VALIDATORS, "port"})
    close = difflib.get_close_matches(name.lower(), [*STORE_OPTIONS, *client_options], n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return InvalidOption(
        _BACKEND,
        name,
        f"unknown option{hint}; known options: {', '.join(STORE_OPTIONS)}, and pymongo's "
        f"MongoClient options (any case): {', '.join(client_options)}",
    )


def _check_client_options(options: Mapping[str, Any]) -> None:
    """Check each option meant for the client with pymongo's own validators, before opening it.

    Raises ``InvalidOption`` for a name neither the store nor ``MongoClient`` knows (listing the
    known ones), for a value out of the bounds of :data:`BOUNDED_CLIENT_OPTIONS`, and for a value
    pymongo would refuse (with pymongo's reason).
    """
    for name, value in options.items():
        bounded = _BOUNDED.get(name.lower())
        if bounded is not None:
            _, kind, least, most = bounded
            if kind == "count":
                count_option(_BACKEND, name, value, least=int(least), most=int(most))
            else:
                real_option(_BACKEND, name, value, least=least, most=most, unit=kind)
        if name == "host":
            raise InvalidOption(_BACKEND, name, "the URL names the host(s); give it there")
        if name == "port":
            if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
                raise InvalidOption(_BACKEND, name, f"expected a port number (an int), got {value!r}")
            continue
        try:
            common.validate(name, value)
        except ConfigurationError:
            raise _unknown(name) from None
        except (TypeError, ValueError) as error:
            raise InvalidOption(_BACKEND, name, str(error)) from error


def _check_url_options(url: str) -> None:
    """Check each of the URL's query parameters with pymongo's URI parser, before opening a client.

    pymongo would drop a parameter it does not know with only a warning (``?bogus=1``, or
    ``?wtimeout=5`` for ``wTimeoutMS``) and refuse a malformed value with a message that may not
    name it. Each parameter is parsed alone (in a ``mongodb://`` URL: no DNS lookup); what only
    the whole URL can judge (``srvServiceName`` without ``mongodb+srv://``) is left to pymongo.

    Raises:
        InvalidOption: a parameter pymongo does not know (with pymongo's suggestions), or a
            value it refuses (with pymongo's reason); ``.option`` is the parameter as written.
    """
    try:
        query = urlsplit(url).query
    except ValueError:  # reported by _database_name
        return
    for name, value in parse_qsl(query, keep_blank_values=True):
        try:
            uri_parser.parse_uri("mongodb://localhost/?" + urlencode({name: value}), warn=False)
        except ConfigurationError as error:
            if str(error).startswith("Unknown option"):
                raise InvalidOption(_BACKEND, name, f"no URI option pymongo knows ({error})") from None
        except (TypeError, ValueError) as error:
            raise InvalidOption(_BACKEND, name, redact(str(error), url)) from None


def _client(client_class: Any, url: str | None, options: dict[str, Any]) -> Any:
    """Open a ``MongoClient`` or ``AsyncMongoClient`` (neither connects before its first operation).

    Raises ``InvalidOption`` when pymongo refuses options given here together (e.g. two that
    exclude each other), naming the first of them its message names; ``StoreError("mongodb: open:
    ...")`` for a malformed URL or an SRV record that cannot be resolved. The URL's secrets are
    redacted from both and from pymongo's error (which may quote the URL or a part of it).
    """
    try:
        client = client_class(url or "mongodb://localhost", **options)
        _log.debug("opened a %s for %s", client_class.__name__, masked_url(url or "mongodb://localhost"))
        return client
    except (InvalidURI, TypeError, ValueError) as error:  # pymongo reports some malformed URLs as ValueError
        redact_error(error, url or "")
        named = [name for name in options if re.search(rf"\b{re.escape(name)}\b", str(error))]
        if named:
            raise InvalidOption(_BACKEND, named[0], str(error)) from error
        raise StoreError("mongodb: open", str(error)) from error
    except PyMongoError as error:
        redact_error(error, url or "")
        raise StoreError("mongodb: open", str(error)) from error


def _checked(
    url: str | None,
    database: Any,
    auto_migrate: Any,
    operation_timeout: Any,
    client_options: dict[str, Any],
    opens_client: bool,
) -> tuple[str, bool]:
    """Check every option before anything is opened: return the database name and ``auto_migrate``.

    ``operation_timeout`` (seconds) becomes pymongo's ``timeoutMS`` in ``client_options``.

    Raises ``InvalidOption`` (an unknown option, a malformed or out-of-range value,
    ``operation_timeout`` with ``timeoutMS`` or with a client given) or ``StoreError`` (the URL's
    path is no database name).
    """
    migrate = flag_option(_BACKEND, "auto_migrate", auto_migrate)
    name = _database_name(url, database)
    if operation_timeout is not None:
        seconds = seconds_option(_BACKEND, "operation_timeout", operation_timeout, least=1.0, most=3600.0)
        if not opens_client:
            raise InvalidOption(
                _BACKEND, "operation_timeout", "give timeoutMS to the client you open instead"
            )
        if any(option.lower() == "timeoutms" for option in client_options):
            raise InvalidOption(
                _BACKEND, "operation_timeout", "give operation_timeout or timeoutMS, not both"
            )
        client_options["timeoutMS"] = seconds * 1000
    if opens_client:
        _check_url_options(url or "")
        _check_client_options(client_options)
        if not _names_selection_timeout(url, client_options):
            client_options["serverSelectionTimeoutMS"] = DEFAULT_SERVER_SELECTION_TIMEOUT_MS
    return name, migrate


def _names_selection_timeout(url: str | None, client_options: Mapping[str, Any]) -> bool:
    """Whether ``serverSelectionTimeoutMS`` is given as an option or in the URL's query (any case)."""
    wanted = "serverselectiontimeoutms"
    query = (url or "").partition("?")[2].partition("#")[0]
    named = [name for name, _ in parse_qsl(query, keep_blank_values=True)]
    return any(name.lower() == wanted for name in [*client_options, *named])


def _content_limit(value: object) -> int | None:
    """The ``max_content_bytes`` option (``None``: the server's limit), from 0 to what 16 MiB holds."""
    if value is None:
        return None
    return content_limit_option(_BACKEND, value, MAX_DOCUMENT_BYTES - DOCUMENT_RESERVE)


def _target(database: Any, command: Command) -> Any:
    """What ``command`` is addressed to: the database itself, or one of its collections."""
    return database if command.collection == DATABASE else database[command.collection]


def _database(client: Any, name: str) -> Any:
    """The database ``name`` on ``client``, reading dates as timezone-aware UTC."""
    return client.get_database(name, codec_options=_CODEC_OPTIONS)


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
        auto_migrate: create the indexes on opening (a bool, or ``true``/``false``, ``yes``/``no``,
            ``on``/``off``, ``1``/``0`` as text).
        operation_timeout: seconds one operation may take, 1 to 3600 (default ``None``: no bound);
            pymongo's ``timeoutMS`` (client-side: it bounds server selection, the wait for a
            pooled connection and every socket read and write of the operation; the server is
            also told ``maxTimeMS``). When it passes the call raises ``StoreError`` saying it
            timed out; a write's fate is then unknown (retry it with its idempotency key).
        max_content_bytes: a lower limit on content than the server's, in bytes of UTF-8 (see
            :meth:`chronica_mongodb.core.MongoCore.content_limit`); ``None`` keeps the server's.
        client_options: passed to ``MongoClient`` (e.g. ``maxPoolSize=50``), when it opens one;
            the numeric ones of :data:`BOUNDED_CLIENT_OPTIONS` are bounded first, then all are
            checked with pymongo's own validators.

    Raises:
        InvalidOption: an option neither the store (:data:`STORE_OPTIONS`) nor ``MongoClient``
            knows (the reason lists the known ones), or a malformed value (``auto_migrate="maybe"``,
            a ``max_content_bytes`` that is not a whole number from 0 to what 16 MiB holds,
            a ``database`` name MongoDB refuses, ``maxPoolSize="many"``, options that exclude each
            other); raised before any client is opened.
        StoreError: ``mongodb: open: ...`` when ``url`` is malformed (its path included) or an SRV
            record cannot be resolved.
        StoreError: ``mongodb: migrate: ...`` when the indexes cannot be created, or when
            ``chronica``/``acta`` are another application's collections (documents without this
            package's fields, or indexes it does not make); without ``auto_migrate`` that is
            ``mongodb: open: ...``, raised by the first operation (opening does no I/O then). They
            are left untouched, and the message names what was found and what to do.
    """

    plans: MongoCore
    backend_name = "mongodb"

    def __init__(
        self,
        url: str | None = None,
        *,
        client: MongoClient[dict[str, Any]] | None = None,
        database: str | None = None,
        auto_migrate: bool | str = True,
        operation_timeout: float | str | None = None,
        max_content_bytes: int | str | None = None,
        **client_options: Any,
    ) -> None:
        name, migrate = _checked(
            url, database, auto_migrate, operation_timeout, client_options, client is None
        )
        limit = _content_limit(max_content_bytes)
        self._secrets_of = url or ""
        self._owns_client = client is None
        self.client: MongoClient[dict[str, Any]] = client or _client(MongoClient, url, client_options)
        self.database: Database[dict[str, Any]] = _database(self.client, name)
        self.plans = MongoCore(limit)
        self._database_name = name
        self._watcher: Watcher | None = None
        self._new_client = functools.partial(_client, MongoClient, url, client_options)
        self._inherited_client = False  # True in a process forked since: see chronica_mongodb.after_fork
        self._opening_own_client = threading.Lock()
        renew_after_fork(self, after_fork.forget_parent)
        self._unchecked = not migrate  # checked before the first operation (no I/O here)
        if migrate:
            try:
                self.migrate()
            except BaseException:
                self.close()  # a client it opened is closed, not left to the garbage collector
                raise

    @property
    def follow_mechanism(self) -> str:
        """How this store's followers wait: ``"change streams"``, ``"polling"`` or ``"undecided"``.

        ``"undecided"`` until the watcher has asked the server, after the first follower's wait
        (see :mod:`chronica_mongodb.follow`).
        """
        return UNDECIDED if self._watcher is None else self._watcher.mechanism

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """See :meth:`chronica_core.FollowStore.acta_after`: the newest acta, a window at a time."""
        page = run_plan(acta_after_by_windows(chronicum_id, after), self._perform_acta)
        return None if page is None else page[:limit]

    def _perform_acta(self, call: tuple[str, tuple[object, ...]]) -> list[Actum]:
        """Perform an ``("acta", (chronicum_id, query))`` call of a follow plan."""
        chronicum_id, query = call[1]
        assert isinstance(chronicum_id, str) and isinstance(query, ActaQuery)
        return self._own_acta(chronicum_id, query)

    def _own_acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """The chronicum's own acta, as ``acta`` reads them, whatever its layout (for following)."""
        return self._run_if_open(self.plans.acta(chronicum_id, query, own_acta=True))

    def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """See :meth:`chronica_core.FollowStore.wait_for_acta`: the change stream, else polling."""
        watcher = self._follow_watcher()
        woken = threading.Event()
        watcher.watch(chronicum_id, woken.set)
        deadline = deadline_of(timeout)
        try:
            while True:
                try:
                    with follow_reads(self).turn():
                        newest = self._own_acta(chronicum_id, NEWEST)
                except ChronicumNotFound:
                    return
                if newest_actum_id(newest) != after:
                    return
                wait = wait_seconds(watcher, remaining_until(deadline))
                if woken.wait(wait) or watcher.streaming or wait < POLL_SECONDS:
                    return
        finally:
            watcher.unwatch(chronicum_id, woken.set)

    def _follow_watcher(self) -> Watcher:
        with _CREATING:
            if self._watcher is None:
                self._refuse_if_closed(None, "mongodb: store")
                self._watcher = Watcher(lambda: self.client, self._database_name, owns_client=False)
            return self._watcher

    def migrate(self) -> None:
        """Create the indexes if missing (safe to repeat, and from many processes at once)."""
        self._run_if_open(migration.migrate(self.plans))

    def keeps_native(self) -> bool:
        """Return ``True``: every actum keeps its native form (see :class:`chronica_core.NativeStore`)."""
        return True

    def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> list[Chronicum]:
        """See :meth:`chronica_core.RetentionStore.idle_chronica` and :mod:`chronica_mongodb.retention`."""
        return self._run_if_open(retention.idle_chronica(self.plans, idle_before, owner_id, after, limit))

    def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> int:
        """See :meth:`chronica_core.RetentionStore.erase_idle` and :mod:`chronica_mongodb.retention`."""
        return self._run_if_open(retention.erase_idle(self.plans, chronicum_id, idle_before, owner_digest))

    def layout(self, chronicum_id: str) -> Layout:
        """See :meth:`chronica_core.HistoryStore.layout` and :mod:`chronica_mongodb.history`."""
        return self._run_if_open(history.layout(self.plans, chronicum_id))

    def window(self, chronicum_id: str, reads: WindowReads) -> WindowRows:
        """See :meth:`chronica_core.HistoryStore.window` and :mod:`chronica_mongodb.history`."""
        return self._run_if_open(history.window(self.plans, chronicum_id, reads))

    def locate(self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]) -> dict[str, Located]:
        """See :meth:`chronica_core.HistoryStore.locate` and :mod:`chronica_mongodb.history`."""
        return self._run_if_open(history.locate(self.plans, lineage, actum_ids))

    def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> None:
        """See :meth:`chronica_core.HistoryStore.fork` and :mod:`chronica_mongodb.history`."""
        self._run_if_open(history.fork(self.plans, chronicum, lineage))

    def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Actum:
        """See :meth:`chronica_core.HistoryStore.record_summary` and :mod:`chronica_mongodb.history`."""
        return self._run_if_open(history.record_summary(self.plans, actum, first, last, version, key))

    def close(self) -> None:
        """Close the client if the store opened it.

        Later operations raise ``StoreError("mongodb: store", "the store is closed")``.
        """
        self._mark_closed()
        if self._watcher is not None:
            self._watcher.close()
        if self._owns_client and not self._inherited_client:  # the parent's is the parent's to close
            self.client.close()
            _log.debug("closed the MongoClient for %s", masked_url(self._secrets_of))

    def _run(self, plan: Plan[Any, Result]) -> Result:
        if self._inherited_client:
            after_fork.own_client(self)
        if self._unchecked:
            run_plan(self.plans.check(), self._perform)
            self._unchecked = False
        return run_plan(plan, self._perform)

    def _perform(self, command: Command) -> Any:
        outcome = getattr(_target(self.database, command), command.method)(*command.args, **command.kwargs)
        return outcome.to_list() if command.cursor else outcome


@dataclass(frozen=True, eq=False)
class _LoopClient:
    """One event loop's client and the store's database on it.

    Attributes:
        client: the loop's client (the caller's own when ``owned`` is false).
        database: the store's database on ``client``.
        owned: whether the store made the client (then it closes it).
    """

    client: AsyncMongoClient[dict[str, Any]]
    database: AsyncDatabase[dict[str, Any]]
    owned: bool


class AsyncMongoStore(AsyncPlannedStore):
    """The asyncio twin of :class:`MongoStore` on pymongo's ``AsyncMongoClient``.

    Built without awaiting anything. Built from a URL, one store serves every event loop of the
    process, one after another (``asyncio.run()`` per request) and at once (a loop per thread):
    an ``AsyncMongoClient`` belongs to the loop it first ran in, so each loop gets a client of its
    own, made from the URL and options on the loop's first operation. A loop's client is closed
    when that loop closes (``asyncio.run()`` and ``loop.shutdown_asyncgens()`` close it, in the
    loop), and every one at :meth:`close` (see :class:`chronica_core.loops.PerLoop` for a loop
    closed otherwise, or running in another thread). The indexes are created (``auto_migrate``),
    or else checked, once per store. A client given as ``client`` is used as it is: it serves the
    loop it first ran in only (pymongo refuses another); give a URL to serve every loop.
    Arguments are those of :class:`MongoStore`, with an ``AsyncMongoClient`` as ``client``; so
    are the errors raised when it is built (``InvalidOption``, ``StoreError("mongodb: open:
    ...")``). A failed migration is raised by the first operation.
    """

    plans: MongoCore
    backend_name = "mongodb"

    def __init__(
        self,
        url: str | None = None,
        *,
        client: AsyncMongoClient[dict[str, Any]] | None = None,
        database: str | None = None,
        auto_migrate: bool | str = True,
        operation_timeout: float | str | None = None,
        max_content_bytes: int | str | None = None,
        **client_options: Any,
    ) -> None:
        name, migrate = _checked(
            url, database, auto_migrate, operation_timeout, client_options, client is None
        )
        limit = _content_limit(max_content_bytes)
        self._secrets_of = url or ""
        self._owns_client = client is None
        self.client: AsyncMongoClient[dict[str, Any]] = client or _client(
            AsyncMongoClient, url, client_options
        )
        """The client given, or the one made when the store was built (checking the URL and
        options); a store built from a URL makes one more per event loop, and never uses this one."""
        self.database: AsyncDatabase[dict[str, Any]] = _database(self.client, name)
        self._new_client = functools.partial(_client, AsyncMongoClient, url, client_options)
        self._watch_client = functools.partial(_client, MongoClient, url, dict(client_options))
        self._watcher: Watcher | None = None
        self._database_name = name
        self.plans = MongoCore(limit)
        self._auto_migrate = migrate
        self._opened = False
        self._clients: PerLoop[_LoopClient] = PerLoop(
            self._where, self._open_client, _close_client, _drop_client
        )
        renew_after_fork(self, after_fork.forget_parent)

    async def migrate(self) -> None:
        """Create the indexes if missing (safe to repeat, and from many processes at once).

        Refused, as every operation is, once closed (``StoreError``).
        """
        self._check_open()
        database = self._loop_database(await self._clients.get())
        await run_plan_async(migration.migrate(self.plans), functools.partial(_perform, database))
        self._opened = True

    def keeps_native(self) -> bool:
        """Return ``True``: see :meth:`MongoStore.keeps_native`."""
        return True

    async def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> list[Chronicum]:
        """See :meth:`MongoStore.idle_chronica`."""
        return await self._run_if_open(
            retention.idle_chronica(self.plans, idle_before, owner_id, after, limit)
        )

    async def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> int:
        """See :meth:`MongoStore.erase_idle`."""
        return await self._run_if_open(
            retention.erase_idle(self.plans, chronicum_id, idle_before, owner_digest)
        )

    async def layout(self, chronicum_id: str) -> Layout:
        """See :meth:`MongoStore.layout`."""
        return await self._run_if_open(history.layout(self.plans, chronicum_id))

    async def window(self, chronicum_id: str, reads: WindowReads) -> WindowRows:
        """See :meth:`MongoStore.window`."""
        return await self._run_if_open(history.window(self.plans, chronicum_id, reads))

    async def locate(self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]) -> dict[str, Located]:
        """See :meth:`MongoStore.locate`."""
        return await self._run_if_open(history.locate(self.plans, lineage, actum_ids))

    async def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> None:
        """See :meth:`MongoStore.fork`."""
        await self._run_if_open(history.fork(self.plans, chronicum, lineage))

    async def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Actum:
        """See :meth:`MongoStore.record_summary`."""
        return await self._run_if_open(history.record_summary(self.plans, actum, first, last, version, key))

    @property
    def follow_mechanism(self) -> str:
        """See :attr:`MongoStore.follow_mechanism`."""
        return UNDECIDED if self._watcher is None else self._watcher.mechanism

    async def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """See :meth:`MongoStore.acta_after`."""
        page = await run_plan_async(acta_after_by_windows(chronicum_id, after), self._perform_acta)
        return None if page is None else page[:limit]

    async def _perform_acta(self, call: tuple[str, tuple[object, ...]]) -> list[Actum]:
        """Perform an ``("acta", (chronicum_id, query))`` call of a follow plan."""
        chronicum_id, query = call[1]
        assert isinstance(chronicum_id, str) and isinstance(query, ActaQuery)
        return await self._own_acta(chronicum_id, query)

    async def _own_acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """See :meth:`MongoStore._own_acta`."""
        return await self._run_if_open(self.plans.acta(chronicum_id, query, own_acta=True))

    async def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """See :meth:`MongoStore.wait_for_acta`; cancelling it leaves nothing of the follower's."""
        self._check_open()
        watcher = self._follow_watcher()
        woken = asyncio.Event()
        waker = waker_for_running_loop(woken)
        watcher.watch(chronicum_id, waker)
        deadline = deadline_of(timeout)
        try:
            while True:
                try:
                    async with follow_reads(self).loop_turn():
                        newest = await self._own_acta(chronicum_id, NEWEST)
                except ChronicumNotFound:
                    return
                if newest_actum_id(newest) != after:
                    return
                wait = wait_seconds(watcher, remaining_until(deadline))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await woken.wait()
                if woken.is_set() or watcher.streaming or wait < POLL_SECONDS:
                    return
        finally:
            watcher.unwatch(chronicum_id, waker)

    def _follow_watcher(self) -> Watcher:
        with _CREATING:
            if self._watcher is None:
                client = self._watch_client if self._owns_client else None
                self._watcher = Watcher(client, self._database_name, owns_client=True)
            return self._watcher

    async def close(self) -> None:
        """Close the clients the store made, one per event loop (a client given to it stays open).

        Later operations raise ``StoreError("mongodb: async store", "the store is closed")``.
        The running loop's client is closed here, one of a loop running in another thread in that
        loop, and one of a loop that is not running (closed already, or idle) is dropped, its
        sockets closed when Python frees them. Raises nothing.
        """
        self._mark_closed()
        if self._watcher is not None:
            self._watcher.close()
        await self._clients.close()
        if self._owns_client:
            await self.client.close()  # never used: nothing to wait for
        _log.debug("closed the AsyncMongoClient for %s (one per event loop)", masked_url(self._secrets_of))

    async def _open_client(self) -> _LoopClient:
        """The running loop's client: a new one from the URL, or the one given."""
        if not self._owns_client:
            return _LoopClient(self.client, self.database, owned=False)
        client = self._new_client()
        return _LoopClient(client, _database(client, self._database_name), owned=True)

    def _loop_database(self, loop_client: _LoopClient) -> AsyncDatabase[dict[str, Any]]:
        """The store's database on the running loop's client (a test may wrap it to inject faults)."""
        return loop_client.database

    async def _run(self, plan: Plan[Any, Result]) -> Result:
        try:
            loop_client = await self._clients.get()
        except BaseException:
            plan.close()
            raise
        perform = functools.partial(_perform, self._loop_database(loop_client))
        if not self._opened:
            opening = migration.migrate(self.plans) if self._auto_migrate else self.plans.check()
            await run_plan_async(opening, perform)
            self._opened = True
        return await run_plan_async(plan, perform)


async def _perform(database: AsyncDatabase[dict[str, Any]], command: Command) -> Any:
    """Perform one command of a plan on ``database``, in its client's loop."""
    outcome = getattr(_target(database, command), command.method)(*command.args, **command.kwargs)
    if inspect.isawaitable(outcome):  # find returns its cursor at once, the others a coroutine
        outcome = await outcome
    return await outcome.to_list() if command.cursor else outcome


async def _close_client(loop_client: _LoopClient) -> None:
    """Close a client the store made, in its own loop."""
    if loop_client.owned:
        await loop_client.client.close()


def _drop_client(loop_client: _LoopClient) -> None:
    """Its loop is not running: nothing can be awaited; the client's sockets close when it is freed."""
