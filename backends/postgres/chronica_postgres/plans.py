"""Every store operation written once, as a plan that does no I/O (see ``chronica_core.plans``).

A plan yields :class:`Statement` (run it on a pooled connection in autocommit mode and send back
its rows), :class:`Transaction` (run its statements, in order, in one transaction on one pooled
connection and send back the last one's rows) or :data:`DISCARD_BROKEN_CONNECTIONS` (test the
pool's idle connections and drop the dead ones). It builds the parameters, turns rows into
:class:`Actum` / :class:`Chronicum` and psycopg errors into Chronica errors.
:class:`chronica_postgres.PostgresStore` and :class:`chronica_postgres.AsyncPostgresStore` only
perform the operations.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

import psycopg
from psycopg import errors
from psycopg_pool import PoolTimeout

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ChronicaError,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    InvalidOption,
    ListingPosition,
    StoreConflict,
    StoreError,
    clock,
)
from chronica_core.history import StaleLayout
from chronica_core.idle import CHECK_IDLE_AFTER, DEFAULT_CHECK_IDLE_AFTER, check_idle_after_option
from chronica_core.limits import (
    MAX_CONTENT_OPTION,
    POSTGRESQL_MAX_CONTENT_BYTES,
    check_actum_size,
    content_limit_option,
)
from chronica_core.model import ForkPoint, Native, Span, build_actum, recorded_at
from chronica_core.options import count_option, flag_option, seconds_option
from chronica_core.plans import Plan
from chronica_core.poolers import LISTEN, PREPARED_STATEMENTS, listen_option, prepared_statements_option
from chronica_core.rows import check_row, check_rows
from chronica_postgres.conflicts import conflicted
from chronica_postgres.schema import (
    ACTA_IDEMPOTENCY_INDEX,
    ACTA_TO_CHRONICA_KEY,
    CHRONICA_PRIMARY_KEY,
    FOREIGN_TABLES,
    LATEST_VERSION,
    SQLALCHEMY_VERSION_TABLE,
    VERSION_TABLE,
    Statements,
    schema_name_problem,
)
from chronica_postgres.timeout import OperationTimedOut

__all__ = [
    "BULKY_CONTENT_CHARS",
    "DEFAULT_MAX_IDLE",
    "DEFAULT_MAX_SIZE",
    "DISCARD_BROKEN_CONNECTIONS",
    "INSERTED_AT",
    "Operation",
    "Options",
    "Plans",
    "Rows",
    "Statement",
    "Transaction",
    "acta_of",
    "batch_parameters",
    "chronicum_of",
    "names_constraint",
    "record_parameters",
    "text_array",
    "translate",
    "written_chars",
]

INSERTED_AT: Final = 9
"""Where a keyed write's row holds the ``at`` of an actum it inserted (after the flag, 8 columns)."""

Rows = list[tuple[Any, ...]]
"""What performing an operation sends back into the plan: the rows (``[]`` when none)."""


def batch_parameters(acta: Sequence[Actum], key: str | None) -> tuple[object, ...]:
    """The parameters of :attr:`Statements.record_many` for ``acta`` (one chronicum's) and ``key``.

    The chronicum id, the key, the count, whether any actum answers a request, now
    (:func:`chronica_core.clock.now`: the acta's ``at`` unless the chronicum's last is later), then one array
    each of ids, kinds, actor kinds, actors, contents as text and contents as bytes (exactly one
    of the two set per actum, see :func:`_content_parameters`), native formats, native data as
    text and as bytes (likewise), and the requests answered (``None``: none), in batch order.
    """
    texts: list[str | None] = []
    encoded: list[bytes | None] = []
    native_texts: list[str | None] = []
    native_encoded: list[bytes | None] = []
    for actum in acta:
        text, content_bytes = _content_parameters(actum.content)
        texts.append(text)
        encoded.append(content_bytes)
        native = actum.native
        text, content_bytes = (None, None) if native is None else _content_parameters(native.data)
        native_texts.append(text)
        native_encoded.append(content_bytes)
    return (
        acta[0].chronicum_id,
        key,
        len(acta),
        any(actum.answers for actum in acta),
        clock.now(),
        [actum.id for actum in acta],
        [str(actum.kind) for actum in acta],
        [str(actum.actor_kind) for actum in acta],
        [actum.actor for actum in acta],
        texts,
        encoded,
        [None if actum.native is None else actum.native.format for actum in acta],
        native_texts,
        native_encoded,
        [actum.answers or None for actum in acta],
    )


def written_chars(actum: Actum) -> int:
    """How many characters of content and native data ``actum`` carries (see :attr:`Statement.bulky`)."""
    native = actum.native
    return len(actum.content) + (0 if native is None else len(native.data))


BULKY_CONTENT_CHARS: Final = 8192
"""Content longer than this, in characters (all of a batch's together), makes its statement
``bulky``: a store keeps nothing of it once it ran (at most four bytes a character)."""


@dataclass(slots=True)  # not frozen: every operation makes one, and frozen fields cost more to set
class Statement:
    """Run ``sql`` with ``params`` (``None``: no parameters, several statements allowed).

    A statement with parameters asks for its rows in PostgreSQL's binary format (``binary``):
    psycopg then reads timestamps and numbers from their binary form instead of parsing text,
    which spares the client work on every row of a context window, and ``bytea`` arrives as its
    bytes instead of hex text. The rows are the same Python values either way.

    ``bulky`` says that ``params`` carry content longer than :data:`BULKY_CONTENT_CHARS`: the
    blocking store runs each statement on a cursor it keeps (psycopg then reuses the cursor's
    adapters), and a cursor keeps its last parameters until its next run, so a bulky statement
    runs on a cursor of its own, dropped after it.
    """

    sql: bytes
    params: tuple[Any, ...] | None = None
    bulky: bool = False

    @property
    def binary(self) -> bool:
        """Whether to ask for binary rows: only with parameters (the simple protocol has no binary rows)."""
        return self.params is not None


@dataclass(frozen=True, slots=True)
class Transaction:
    """Run ``statements`` in order in one transaction on one connection; the rows are the last one's.

    Each statement sees what was committed before it started (PostgreSQL's read committed), so a
    statement after one that waited for a row lock sees every write committed until then.
    """

    statements: tuple[Statement, ...]


class _DiscardBrokenConnections:
    """Test the idle connections of the pool and replace the broken ones (after a lost connection)."""

    def __repr__(self) -> str:
        return "DISCARD_BROKEN_CONNECTIONS"


DISCARD_BROKEN_CONNECTIONS: Final = _DiscardBrokenConnections()
"""The operation a plan yields once it saw a connection die (a server restart kills them all)."""

Operation = Statement | Transaction | _DiscardBrokenConnections
"""What a plan of this package yields."""

_KINDS = {kind.value: kind for kind in ActumKind}
_ACTOR_KINDS = {kind.value: kind for kind in ActorKind}
_NOT_MIGRATED_HINT = (
    "; the schema is not migrated (or not to this version): run `chronica migrate --store URL`"
    " or open the store with auto_migrate=True"
)


_BACKEND = "postgres"
_log = logging.getLogger("chronica.postgres")
POOL_SIZE_MOST: Final = 1000
"""The largest ``min_size`` / ``max_size`` (PostgreSQL serves 100 connections by default)."""
SECONDS_MOST: Final = 3600.0
"""The longest ``connect_timeout``, ``pool_timeout`` and ``operation_timeout``: an hour."""
IDLE_MOST: Final = 86400.0
"""The longest ``max_idle``: a day."""
DEFAULT_MAX_SIZE: Final = 40
"""The default ``max_size``: the threads a typical agent server runs requests in at once (AnyIO's
thread limiter under Starlette and FastAPI holds 40), each needing a connection while it writes
or reads. Mostly idle in between, so ``max_idle`` hands them back to the server."""
DEFAULT_MAX_IDLE: Final = 10.0
"""The default ``max_idle``, in seconds. psycopg_pool closes one connection beyond ``min_size`` per
``max_idle`` seconds in which some stayed unused: a pool grown to 40 is back to 1 within 7 minutes."""


def _schema_name(value: object) -> str:
    """The ``schema`` option as a name that means exactly one schema; raises ``InvalidOption`` why not."""
    schema = str(value)
    problem = schema_name_problem(schema)
    if problem:
        raise InvalidOption("postgres", "schema", f"{problem}, got {schema!r}")
    return schema


@dataclass(frozen=True, slots=True)
class Options:
    """The options of a PostgreSQL store (all may be given as strings, as on the command line).

    Every one is checked when the store is built, before any connection is made.

    Attributes:
        schema: the schema holding the tables (default ``public``); several apps can share a
            database, each in its own schema.
        auto_migrate: create or upgrade the schema when the store opens (default ``True``);
            with ``False`` run ``chronica migrate --store URL`` (or :func:`chronica_postgres.migrate`).
        min_size: connections the pool keeps open, 0 to ``max_size`` (default 1).
        max_size: connections the pool may open at most, 1 to 1000 (default
            :data:`DEFAULT_MAX_SIZE`, 40, or ``min_size`` when that is larger): as many as the
            threads or tasks a typical agent server runs at once, so none waits for a connection.
        max_idle: how fast a grown pool shrinks, in seconds from 1 to 86400 (default
            :data:`DEFAULT_MAX_IDLE`, 10): psycopg_pool's ``max_idle``, which closes one
            connection beyond ``min_size`` for every such period in which some stayed unused, so
            a burst's connections go back to the server one by one after it.
        connect_timeout: seconds to wait for a new connection to the server, 1 to 3600 (default 10;
            libpq counts whole seconds and waits at least 2).
        pool_timeout: seconds a call waits for a free pooled connection before ``StoreError``,
            1 to 3600 (default 30).
        operation_timeout: seconds one statement may take once it has its connection, 1 to 3600,
            or ``None`` (the default): no bound. When it passes, the connection is cut and the
            call raises ``StoreError`` saying it timed out (see :class:`OperationTimedOut`).
        max_content_bytes: the largest content a write accepts, in bytes of UTF-8 (default and
            most: ``POSTGRESQL_MAX_CONTENT_BYTES``, 536,838,142, what PostgreSQL can store and
            send back); larger content raises ``ActumTooLarge`` before anything is sent.
        check_idle_after: seconds a pooled connection may sit idle and still be used without
            a check (default 60, from 0 to 86400; see :mod:`chronica_core.idle`); one idle longer,
            or closed by the server meanwhile, is checked (one round trip) and replaced if dead.
        notify: whether appends and erasures call ``pg_notify`` to wake followers at once (default
            ``True``). PostgreSQL lets one notifying transaction commit at a time, so many writers
            to followed chronica wait for each other's commits with it; followers of a store with
            ``notify=False`` read again every :data:`chronica_postgres.follow.UNWATCHED_WAIT_SECONDS`
            instead of listening. Turn it off on every store of a schema, or on none: a listening follower
            learns of a write that did not notify only when its wait ends (30 s at most).
        prepared_statements: whether psycopg prepares a statement it has run five times on a
            connection: ``None`` (``auto``, the default) until the store connects, then off when it
            found a pooler between it and the server, else on (see :mod:`chronica_core.poolers`).
        listen: a libpq URL the store's followers listen on, as given (the server itself, or a
            session-mode pooler); ``None``: the store's own URL, unless a pooler is found there
            (then followers read again every :data:`chronica_postgres.follow.UNWATCHED_WAIT_SECONDS`).
    """

    schema: str = "public"
    auto_migrate: bool = True
    min_size: int = 1
    max_size: int = DEFAULT_MAX_SIZE
    max_idle: float = DEFAULT_MAX_IDLE
    connect_timeout: float = 10.0
    pool_timeout: float = 30.0
    max_content_bytes: int = POSTGRESQL_MAX_CONTENT_BYTES
    operation_timeout: float | None = None
    check_idle_after: float = DEFAULT_CHECK_IDLE_AFTER
    notify: bool = True
    prepared_statements: bool | None = None
    listen: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, object]) -> Options:
        """Return the options given by name.

        Raises:
            chronica_core.InvalidOption: an unknown option (the message lists the known ones) or
                a malformed or out-of-range value (the message gives the bounds); its ``backend``
                is ``"postgres"``, its ``option`` the name.
        """
        defaults = cls()
        unknown = sorted(set(options) - set(cls.__slots__))
        if unknown:
            known = ", ".join(cls.__slots__)
            raise InvalidOption(_BACKEND, unknown[0], f"unknown option (known: {known})")
        schema = _schema_name(options.get("schema", defaults.schema))
        min_size = count_option(
            _BACKEND, "min_size", options.get("min_size", defaults.min_size), least=0, most=POOL_SIZE_MOST
        )
        max_size = count_option(
            _BACKEND,
            "max_size",
            options.get("max_size", max(defaults.max_size, min_size)),
            least=max(1, min_size),
            most=POOL_SIZE_MOST,
        )
        operation_timeout = options.get("operation_timeout")
        return cls(
            schema=schema,
            auto_migrate=flag_option(
                _BACKEND, "auto_migrate", options.get("auto_migrate", defaults.auto_migrate)
            ),
            min_size=min_size,
            max_size=max_size,
            max_idle=seconds_option(
                _BACKEND, "max_idle", options.get("max_idle", defaults.max_idle), least=1.0, most=IDLE_MOST
            ),
            connect_timeout=_seconds(options, "connect_timeout", defaults.connect_timeout),
            pool_timeout=_seconds(options, "pool_timeout", defaults.pool_timeout),
            operation_timeout=None
            if operation_timeout is None
            else _seconds(options, "operation_timeout", operation_timeout),
            max_content_bytes=content_limit_option(
                "postgres",
                options.get(MAX_CONTENT_OPTION, defaults.max_content_bytes),
                POSTGRESQL_MAX_CONTENT_BYTES,
            ),
            check_idle_after=check_idle_after_option(
                "postgres", options.get(CHECK_IDLE_AFTER, defaults.check_idle_after)
            ),
            notify=flag_option(_BACKEND, "notify", options.get("notify", defaults.notify)),
            prepared_statements=prepared_statements_option(_BACKEND, options.get(PREPARED_STATEMENTS)),
            listen=listen_option(_BACKEND, options.get(LISTEN)),
        )

    def behind(self, pooler: bool) -> Options:
        """These options once the store knows whether a pooler stands before the server.

        ``prepared_statements=auto`` becomes off behind a pooler, on otherwise; a value given stays.
        """
        if self.prepared_statements is not None:
            return self
        return replace(self, prepared_statements=not pooler)

    def connect_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``psycopg.connect`` / ``AsyncConnection.connect``.

        Autocommit, ``connect_timeout`` in whole seconds (libpq's unit; it treats less than 2 as 2),
        and ``prepare_threshold=None`` (psycopg prepares nothing) when ``prepared_statements`` is off.
        """
        arguments: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(2, round(self.connect_timeout)),
        }
        if self.prepared_statements is False:
            arguments["prepare_threshold"] = None
        return arguments

    def pool_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``psycopg_pool.ConnectionPool`` / ``AsyncConnectionPool``."""
        return {
            "min_size": self.min_size,
            "max_size": self.max_size,
            "max_idle": self.max_idle,
            "timeout": self.pool_timeout,
            "kwargs": self.connect_arguments(),
            "name": f"chronica-postgres {self.schema}",
        }


def _seconds(options: Mapping[str, object], name: str, default: object) -> float:
    return seconds_option(_BACKEND, name, options.get(name, default), least=1.0, most=SECONDS_MOST)


def _utc(moment: datetime) -> datetime:
    """``moment`` in UTC (already so on the store's own connections, which run in UTC)."""
    return moment if moment.tzinfo is UTC else moment.astimezone(UTC)


def _content_parameters(content: str) -> tuple[str | None, bytes | None]:
    """``(text, None)``, or ``(None, UTF-8 bytes)`` for content holding NUL (``text`` cannot)."""
    if "\x00" in content:
        return None, content.encode()
    return content, None


def stored_at(actum: Actum, at: datetime) -> Actum:
    """``actum`` as recorded at ``at`` (converted to UTC)."""
    return recorded_at(actum, _utc(at))


def chronicum_of(row: Sequence[Any]) -> Chronicum:
    """A chronicum from ``(id, owner_id, started_at, last_actum_at, forked_from_id, forked_from_actum)``."""
    row_id, owner_id, started_at, last_actum_at, forked_from_id, forked_from_actum = row
    return Chronicum(
        row_id,
        owner_id,
        _utc(started_at),
        None if last_actum_at is None else _utc(last_actum_at),
        None if forked_from_id is None else ForkPoint(forked_from_id, forked_from_actum),
    )


def acta_of(rows: Iterable[Sequence[Any]]) -> list[Actum]:
    """The acta of actum rows, in order: one loop, no call per row but the actum's.

    A row is ``(chronicum_id, seq, id, kind, actor_kind, actor, content, content_bytes, at,
    native_format, native_data, native_data_bytes, answers, summarizes_first, summarizes_last)``;
    its ``seq`` is not read. A context window builds twenty acta per read, a third of the client
    CPU a read costs: hence :data:`chronica_core.model.build_actum`, and no function call per row
    on top of it (but for a native form or a summary's range, where the actum has one).
    """
    kinds, actor_kinds, build = _KINDS, _ACTOR_KINDS, build_actum
    return [
        build(
            chronicum_id,
            kinds[kind],
            actor_kinds[actor_kind],
            actor,
            bytes(content_bytes).decode() if content is None else content,
            actum_id,
            at if at.tzinfo is UTC else at.astimezone(UTC),
            None
            if native_format is None
            else Native(native_format, bytes(native_bytes).decode() if native_data is None else native_data),
            answers or "",
            None if first is None else Span(first, last),
        )
        for (
            chronicum_id,
            _,
            actum_id,
            kind,
            actor_kind,
            actor,
            content,
            content_bytes,
            at,
            native_format,
            native_data,
            native_bytes,
            answers,
            first,
            last,
        ) in rows
    ]


def text_array(values: Iterable[str]) -> str:
    """A PostgreSQL ``text[]`` literal of ``values``, each quoted: ``{"message","thought"}``.

    Sent as one string and cast in SQL, it costs psycopg far less than adapting a Python list.
    """
    quoted = ('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' for value in map(str, values))
    return "{" + ",".join(quoted) + "}"


@functools.lru_cache(maxsize=256)
def _kinds_array(kinds: tuple[str, ...]) -> str:
    """:func:`text_array` of a query's kinds, remembered (queries repeat the same few)."""
    return text_array(kinds)


_LOOKED_FOR = text_array((*FOREIGN_TABLES, VERSION_TABLE))
"""The tables looked for in a schema without a version table (found there, it just appeared)."""


def connection_lost(error: Exception) -> bool:
    """Whether ``error`` says the connection died (the server restarted, the backend was killed)."""
    if not isinstance(error, psycopg.OperationalError) or isinstance(error, PoolTimeout | OperationTimedOut):
        return False
    state = error.sqlstate
    return state is None or state.startswith(("08", "57P"))


def names_constraint(error: psycopg.Error, constraint: str) -> bool:
    """Whether ``error`` is a violation of ``constraint``, or of its copy on a partition or shard.

    A partition's index has a name of its own, which a violation names instead (the docs'
    partitioning DDL renames each to ``<constraint>_<partition>``), and Citus appends the shard's
    number to a shard's (``chronica_pkey_102008``): a name ``constraint`` followed by ``_`` and
    anything counts as ``constraint``.
    """
    name = error.diag.constraint_name
    return name is not None and (name == constraint or name.startswith(f"{constraint}_"))


def translate(error: psycopg.Error, operation: str, chronicum_id: str) -> ChronicaError:
    """The Chronica error for a psycopg ``error`` raised while doing ``operation``.

    A violated foreign key to ``chronica`` is ``ChronicumNotFound``, a taken chronicum id
    ``ChronicumExists``; a conflict the server rolled back (:mod:`chronica_postgres.conflicts`)
    ``StoreConflict``; anything else ``StoreError("postgres: <operation>", detail)``.
    """
    if isinstance(error, errors.ForeignKeyViolation) and names_constraint(error, ACTA_TO_CHRONICA_KEY):
        return ChronicumNotFound(chronicum_id)
    if isinstance(error, errors.UniqueViolation) and names_constraint(error, CHRONICA_PRIMARY_KEY):
        return ChronicumExists(chronicum_id)
    detail = str(error).strip() or type(error).__name__
    if conflicted(error):
        return StoreConflict(f"postgres: {operation}", detail)
    if isinstance(error, errors.UndefinedTable | errors.InvalidSchemaName | errors.UndefinedColumn):
        detail += _NOT_MIGRATED_HINT
    return StoreError(f"postgres: {operation}", detail)


def _refuse_nul(chronicum_id: str) -> None:
    """Raise ``ChronicumNotFound`` for an id holding NUL: ``text`` cannot, so none was ever stored."""
    if "\x00" in chronicum_id:
        raise ChronicumNotFound(chronicum_id)


class Plans:
    """The plans of every store operation for one schema.

    Args:
        statements: the SQL for the schema the store uses.
        max_content_bytes: the largest content ``record`` accepts, in bytes of UTF-8.
    """

    def __init__(self, statements: Statements, max_content_bytes: int = POSTGRESQL_MAX_CONTENT_BYTES) -> None:
        self.statements = statements
        self.max_content_bytes = max_content_bytes

    def content_limit(self) -> Plan[Operation, int | None]:
        """The largest content ``record`` accepts, in bytes (PostgreSQL has no setting for it: no I/O)."""
        return self.max_content_bytes
        yield  # a plan that performs nothing

    def create(self, chronicum: Chronicum) -> Plan[Operation, None]:
        """Insert ``chronicum`` as given. Raises ``ChronicumExists``, ``StoreError``."""
        statement = Statement(
            self.statements.create,
            (chronicum.id, chronicum.owner_id, chronicum.started_at, chronicum.last_actum_at),
        )
        rows = yield from self.write(statement, "create chronicum", chronicum.id)
        if not rows:
            raise ChronicumExists(chronicum.id)

    def get(self, chronicum_id: str) -> Plan[Operation, Chronicum]:
        """Read a chronicum. Raises ``ChronicumNotFound``, ``StoreError``."""
        _refuse_nul(chronicum_id)
        rows = yield from self.read(
            Statement(self.statements.get, (chronicum_id,)), "get chronicum", chronicum_id
        )
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        check_row("postgres: get chronicum", "chronicum id", chronicum_id, rows[0][0])
        return chronicum_of(rows[0])

    def record(self, actum: Actum) -> Plan[Operation, Actum]:
        """Append ``actum`` in one statement.

        Raises ``ActumTooLarge`` (before sending anything), ``ChronicumNotFound``, ``StoreError``.
        """
        _refuse_nul(actum.chronicum_id)
        check_actum_size(actum, self.max_content_bytes)
        statement = Statement(
            self.statements.record,
            record_parameters(actum, None),
            bulky=written_chars(actum) > BULKY_CONTENT_CHARS,
        )
        rows = yield from self.write(statement, "record actum", actum.chronicum_id)
        if not rows:
            raise ChronicumNotFound(actum.chronicum_id)
        row_chronicum, row_actum, at = rows[0]
        check_row("postgres: record actum", "chronicum id", actum.chronicum_id, row_chronicum)
        check_row("postgres: record actum", "actum id", actum.id, row_actum)
        return stored_at(actum, at)

    def record_idempotent(self, actum: Actum, key: str) -> Plan[Operation, Actum]:
        """Append ``actum`` unless ``key`` was used in its chronicum; else return the stored one.

        One statement in the steady state; a writer that lost a race on the same key (its
        statement fails on the unique index once the winner commits) reads the winner's actum
        with a second (the first actum of the winner's batch, when a batch used the key). Raises
        ``ActumTooLarge``, ``ChronicumNotFound`` (also when the chronicum was erased between the
        two), ``StoreError``.
        """
        chronicum_id = actum.chronicum_id
        _refuse_nul(chronicum_id)
        check_actum_size(actum, self.max_content_bytes)
        statement = Statement(
            self.statements.record_idempotent,
            (chronicum_id, key, *record_parameters(actum, key)),
            bulky=written_chars(actum) > BULKY_CONTENT_CHARS,
        )
        try:
            rows = yield from self.again_if_lost(statement)  # the key makes a repeat land once
        except errors.UniqueViolation as error:
            if not names_constraint(error, ACTA_IDEMPOTENCY_INDEX):
                raise translate(error, "record actum", chronicum_id) from error
            stored = yield from self.read_keyed_write(chronicum_id, key, "record actum", error)
            return stored[0]
        except psycopg.Error as error:
            yield from self.discard_if_lost(error)
            raise translate(error, "record actum", chronicum_id) from error
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        inserted, row_chronicum, _, row_actum = rows[0][:4]
        check_row("postgres: record actum", "chronicum id", chronicum_id, row_chronicum)
        if not inserted:
            return acta_of((rows[0][1:],))[0]
        check_row("postgres: record actum", "actum id", actum.id, row_actum)
        return stored_at(actum, rows[0][INSERTED_AT])

    def acta(self, chronicum_id: str, query: ActaQuery) -> Plan[Operation, list[Actum]]:
        """The context window ``query`` describes, oldest first, in one query.

        Raises ``ChronicumNotFound`` (no row at all), ``StoreError``.
        """
        _refuse_nul(chronicum_id)
        parameters: list[Any] = [chronicum_id]
        if query.actum_kinds is not None:
            parameters.append(_kinds_array(tuple(query.actum_kinds)))
        if query.actor_kinds is not None:
            parameters.append(_kinds_array(tuple(query.actor_kinds)))
        if query.last_n > 0:
            parameters.append(query.last_n)
        parameters.append(chronicum_id)
        sql = self.statements.window(
            kinds=query.actum_kinds is not None,
            actor_kinds=query.actor_kinds is not None,
            limited=query.last_n > 0,
        )
        rows = yield from self.read(Statement(sql, tuple(parameters)), "read acta", chronicum_id)
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        # The first column is the one chronicum row's id, joined to every actum row: one row answers for all.
        check_row("postgres: read acta", "chronicum id", chronicum_id, rows[0][0])
        if rows[0][1]:  # a summary or an answered request: the rules read it with `window`
            raise StaleLayout(chronicum_id)
        if rows[0][2] is None:  # the chronicum exists; no actum matched
            return []
        return acta_of(rows)

    def acta_after(
        self, chronicum_id: str, after: str | None, limit: int
    ) -> Plan[Operation, list[Actum] | None]:
        """Up to ``limit`` acta after the actum ``after``, in one query (see ``FollowStore.acta_after``).

        Returns ``None`` when ``after`` is no actum of the chronicum. Raises ``ChronicumNotFound``
        (missing or erased), ``StoreError``.
        """
        _refuse_nul(chronicum_id)
        parameters = (chronicum_id, after, chronicum_id, after, after, max(limit, 1))
        rows = yield from self.read(
            Statement(self.statements.acta_after, parameters), "read acta after", chronicum_id
        )
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        check_rows("postgres: read acta after", "chronicum id", chronicum_id, rows)
        if not rows[0][1]:
            return None
        if rows[0][2] is None:  # nothing after the position
            return []
        return acta_of(row[2:] for row in rows)

    def follow(self, chronicum_id: str, ahead: float, renew_below: float) -> Plan[Operation, bool | None]:
        """Mark the chronicum followed for ``ahead`` seconds, unless it is for ``renew_below`` or more.

        One autocommitted statement; once it has run, appends to the live chronicum notify the
        channel for at least ``renew_below`` seconds. Returns whether the marking was written
        (``False``: it was kept), or ``None`` for a missing or erased chronicum, which holds no
        marking. Raises ``StoreError``.
        """
        if "\x00" in chronicum_id:
            return None  # no stored id holds NUL
        statement = Statement(self.statements.follow, (ahead, chronicum_id, renew_below, chronicum_id))
        rows = yield from self.read(statement, "mark chronicum followed", chronicum_id)
        if not rows:
            return None
        check_row("postgres: mark chronicum followed", "chronicum id", chronicum_id, rows[0][0])
        return bool(rows[0][1])

    def record_many(self, acta: Sequence[Actum], key: str | None) -> Plan[Operation, list[Actum]]:
        """Append ``acta`` (at least one, all of one chronicum) in one statement, or return the keyed write.

        The statement takes ``len(acta)`` consecutive ``seq`` under the chronicum's row lock, with
        one ``at`` for all; with ``key``, the key and the batch's size go on its first actum. A
        writer that lost a race on the same key reads the winner's acta with a second statement,
        as in :meth:`record_idempotent`. Returns the stored acta in the order given (or the acta
        the key's first write stored, in their order). Raises ``ActumTooLarge`` (any actum, before
        sending anything), ``ChronicumNotFound`` (nothing written), ``StoreError``.
        """
        chronicum_id = acta[0].chronicum_id
        _refuse_nul(chronicum_id)
        for actum in acta:
            check_actum_size(actum, self.max_content_bytes)
        statement = Statement(
            self.statements.record_many,
            batch_parameters(acta, key),
            bulky=sum(map(written_chars, acta)) > BULKY_CONTENT_CHARS,
        )
        where = "postgres: record acta"
        try:
            if key is None:
                rows = yield statement
            else:
                rows = yield from self.again_if_lost(statement)  # the key makes a repeat land once
        except errors.UniqueViolation as error:
            if key is None or not names_constraint(error, ACTA_IDEMPOTENCY_INDEX):
                raise translate(error, "record acta", chronicum_id) from error
            return (yield from self.read_keyed_write(chronicum_id, key, "record acta", error))
        except psycopg.Error as error:
            yield from self.discard_if_lost(error)
            raise translate(error, "record acta", chronicum_id) from error
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        check_rows(where, "chronicum id", chronicum_id, rows, column=1)
        if not rows[0][0]:  # the key was used before: its write's acta
            return acta_of(row[1:] for row in rows)
        if len(rows) != len(acta):
            raise StoreError(where, f"the database stored {len(rows)} acta of a batch of {len(acta)}")
        stored: list[Actum] = []
        for actum, row in zip(acta, rows, strict=True):
            check_row(where, "actum id", actum.id, row[3])
            stored.append(stored_at(actum, row[INSERTED_AT]))
        return stored

    def list_chronica(
        self, owner_id: str, limit: int, after: ListingPosition | None
    ) -> Plan[Operation, list[Chronicum]]:
        """Up to ``limit`` of the owner's live chronica, newest first, after ``after``; one query.

        Served by the listing index (``owner_id, started_at DESC, id DESC``). Raises ``StoreError``.
        """
        if "\x00" in owner_id:  # text cannot hold NUL: no chronicum has that owner
            return []
        if after is None:
            statement = Statement(self.statements.list_chronica, (owner_id, limit))
        else:
            started_at, after_id = after
            sql = self.statements.list_chronica_after
            if "\x00" in after_id:  # text cannot hold NUL: cut there, the cut id included
                after_id, sql = after_id[: after_id.index("\x00")], self.statements.list_chronica_after_or_at
            statement = Statement(sql, (owner_id, started_at, after_id, limit))
        rows = yield from self.read(statement, "list chronica", owner_id)
        chronica = [chronicum_of(row) for row in rows]
        for chronicum in chronica:
            check_row("postgres: list chronica", "owner id", owner_id, chronicum.owner_id)
        return chronica

    def erase(self, chronicum_id: str, owner_digest: str) -> Plan[Operation, int]:
        """Erase the chronicum in one transaction, leaving its marker; return the acta erased.

        The transaction locks the chronicum's row (as ``record`` does, so a racing write lands
        wholly before or finds the marker), then deletes the acta and turns the row into the
        marker holding ``owner_digest``. Raises ``ChronicumNotFound`` (no chronicum, or a
        marker), ``StoreError``.
        """
        _refuse_nul(chronicum_id)
        rows = yield from self.write(self.erasure(chronicum_id, owner_digest), "erase", chronicum_id)
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        row_chronicum, erased, _ = rows[0]
        check_row("postgres: erase", "chronicum id", chronicum_id, row_chronicum)
        return int(erased)

    def erase_owner(self, owner_id: str, owner_digest: str) -> Plan[Operation, int]:
        """Erase every live chronicum of ``owner_id``, each in its own transaction; return how many.

        The owner's chronica are read first; one erased meanwhile by another call is not counted.
        Raises ``StoreError`` (the chronica erased before it stay erased; a retry finishes).
        """
        if "\x00" in owner_id:
            return 0
        rows = yield from self.read(Statement(self.statements.owned, (owner_id,)), "erase owner", owner_id)
        erased = 0
        for (chronicum_id,) in rows:
            done = yield from self.write(
                self.erasure(chronicum_id, owner_digest), "erase owner", chronicum_id
            )
            if done:
                check_row("postgres: erase owner", "chronicum id", chronicum_id, done[0][0])
                erased += int(done[0][2])  # with its forks
        return erased

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> Plan[Operation, bool]:
        """Replace the marker of ``chronicum.id`` holding ``owner_digest`` with ``chronicum``, in one UPDATE.

        Returns whether it did (``False``: no marker for that id, or another digest). Raises
        ``StoreError``.
        """
        if "\x00" in chronicum.id:
            return False
        statement = Statement(
            self.statements.reopen,
            (chronicum.owner_id, chronicum.started_at, chronicum.last_actum_at, chronicum.id, owner_digest),
        )
        rows = yield from self.write(statement, "reopen chronicum", chronicum.id)
        if not rows:
            return False
        check_row("postgres: reopen chronicum", "chronicum id", chronicum.id, rows[0][0])
        return True

    def withdraw(self, chronicum_id: str, owner_digest: str) -> Plan[Operation, bool]:
        """Turn the chronicum into its marker holding ``owner_digest`` if it holds no acta; one UPDATE.

        Returns whether it did (``False``: it holds acta, is missing or a marker; nothing
        changed). Raises ``StoreError``.
        """
        if "\x00" in chronicum_id:
            return False
        statement = Statement(self.statements.withdraw, (owner_digest, chronicum_id))
        rows = yield from self.write(statement, "withdraw chronicum", chronicum_id)
        if not rows:
            return False
        check_row("postgres: withdraw chronicum", "chronicum id", chronicum_id, rows[0][0])
        return True

    def erasure(
        self, chronicum_id: str, owner_digest: str, idle_before: datetime | None = None
    ) -> Transaction:
        """The transaction erasing one chronicum and its forks: lock their rows, then delete and mark.

        With ``idle_before``, only if it and every fork of it were last active before that moment.
        """
        return Transaction(
            (
                Statement(self.statements.lock_live, (chronicum_id, chronicum_id)),
                Statement(
                    self.statements.erase,
                    (chronicum_id, chronicum_id, idle_before, idle_before, owner_digest, chronicum_id),
                ),
            )
        )

    def read_keyed_write(
        self, chronicum_id: str, key: str, operation: str, lost_race: Exception
    ) -> Plan[Operation, list[Actum]]:
        """The acta the write that used ``key`` stored (after losing a race to it on the unique index).

        Raises ``ChronicumNotFound`` when they are gone (the chronicum was erased since),
        ``StoreError``.
        """
        keyed = Statement(self.statements.read_keyed, (chronicum_id, key))
        rows = yield from self.read(keyed, operation, chronicum_id)
        if not rows:  # only an erasure deletes acta
            raise ChronicumNotFound(chronicum_id) from lost_race
        check_rows(f"postgres: {operation}", "chronicum id", chronicum_id, rows)
        return acta_of(rows)

    def migrate(self) -> Plan[Operation, int]:
        """Create or upgrade the schema; return its version (:data:`LATEST_VERSION`).

        Reads the version first (one statement, no lock, no privilege needed when it is current);
        otherwise runs the migration script, which takes an advisory lock so concurrent migrators
        take turns. Raises ``StoreError``: ``"postgres: migrate"`` when the schema is newer than
        this package, or holds tables this package did not create (see :meth:`check`).
        """
        version = yield from self._own_version("migrate")
        if version < LATEST_VERSION:
            before = version
            yield from self.write(Statement(self.statements.migrate), "migrate", "")
            version = yield from self._own_version("migrate")
            schema = self.statements.schema
            _log.info("migrated schema %r from version %d to %d", schema, before, version)
        if version != LATEST_VERSION:
            raise StoreError(
                "postgres: migrate",
                f"schema {self.statements.schema!r} is at version {version}, but this chronica-postgres "
                f"knows versions up to {LATEST_VERSION}; upgrade chronica-postgres",
            )
        return version

    def check(self) -> Plan[Operation, int]:
        """What a store opened without ``auto_migrate`` runs: refuse tables that are not its own.

        Returns the schema version (0: not migrated yet, which the first write reports). One
        statement while the schema is this package's, two while it holds no version table.

        Raises:
            StoreError: ``"postgres: open"`` when the schema holds ``chronica`` or ``acta`` that
                this package did not create (another application's, or chronica-sqlalchemy's),
                naming them and what to do; nothing is written.
        """
        return (yield from self._own_version("open"))

    def _own_version(self, operation: str) -> Plan[Operation, int]:
        """The schema's version (0 without a version table), once the tables are known to be ours."""
        statements = self.statements
        try:
            rows = yield Statement(statements.read_version, ())
        except (errors.UndefinedTable, errors.InvalidSchemaName):
            rows = yield from self.read(
                Statement(statements.find_tables, (statements.schema, _LOOKED_FOR)), operation, ""
            )
            found = [name for (name,) in rows]
            if VERSION_TABLE in found:  # another store migrated the schema in the meantime
                return (yield from self._own_version(operation))
            if found:
                raise self._foreign(operation, found, mixed=False) from None
            return 0
        except psycopg.Error as error:
            yield from self.discard_if_lost(error)
            raise translate(error, operation, "") from error
        version, sqlalchemy_too = rows[0]
        if sqlalchemy_too:
            raise self._foreign(operation, [SQLALCHEMY_VERSION_TABLE], mixed=True)
        return int(version)

    def _foreign(self, operation: str, found: list[str], *, mixed: bool) -> StoreError:
        """The refusal of a schema holding tables this package did not create."""
        schema = self.statements.schema
        names = ", ".join(found)
        if mixed:
            what = (
                f"schema {schema!r} holds this package's tables and also chronica-sqlalchemy's "
                f"version table {SQLALCHEMY_VERSION_TABLE}: a chronica-sqlalchemy store has used (and "
                "may have written into) these tables, which the two backends cannot share"
            )
        else:
            whose = (
                f"chronica-sqlalchemy's (its version table {SQLALCHEMY_VERSION_TABLE} is there)"
                if SQLALCHEMY_VERSION_TABLE in found
                else "another application's"
            )
            what = (
                f"schema {schema!r} holds {names} without {VERSION_TABLE}: tables chronica-postgres "
                f"did not create, they look like {whose}"
            )
        return StoreError(
            f"postgres: {operation}",
            f"{what}; chronica-postgres uses only tables it created and has left these untouched. "
            "Give another schema (the schema option, or ?schema=NAME in the URL) or another database"
            + (
                ", or open this one with chronica-sqlalchemy"
                if SQLALCHEMY_VERSION_TABLE in found and not mixed
                else ""
            ),
        )

    def write(
        self, statement: Statement | Transaction, operation: str, chronicum_id: str
    ) -> Plan[Operation, Rows]:
        """Perform ``statement`` (or ``Transaction``) once: its fate is unknown after a lost connection."""
        try:
            rows: Rows = yield statement
        except psycopg.Error as error:
            yield from self.discard_if_lost(error)
            raise translate(error, operation, chronicum_id) from error
        return rows

    def read(self, statement: Statement, operation: str, chronicum_id: str) -> Plan[Operation, Rows]:
        """Perform ``statement``; after a lost connection drop the dead ones and try once more."""
        try:
            rows: Rows = yield from self.again_if_lost(statement)
        except psycopg.Error as error:
            yield from self.discard_if_lost(error)
            raise translate(error, operation, chronicum_id) from error
        return rows

    @staticmethod
    def again_if_lost(statement: Statement) -> Plan[Operation, Rows]:
        """Perform ``statement`` (one safe to repeat); once more after a lost connection.

        Only for reads and keyed writes: a repeated keyed write finds the actum stored the first
        time. Before the second try the pool's dead connections are dropped. Raises the psycopg
        error of the last try.
        """
        try:
            rows: Rows = yield statement
        except psycopg.Error as error:
            if not connection_lost(error):
                raise
            lost = type(error).__name__
        else:
            return rows
        _log.warning("lost the connection (%s); trying the read or keyed write once more on a new one", lost)
        yield DISCARD_BROKEN_CONNECTIONS
        rows = yield statement
        return rows

    @staticmethod
    def discard_if_lost(error: Exception) -> Plan[Operation, None]:
        """Drop the pool's dead connections if ``error`` says the connection was lost."""
        if connection_lost(error):
            yield DISCARD_BROKEN_CONNECTIONS


def record_parameters(actum: Actum, key: str | None) -> tuple[Any, ...]:
    """Parameters of :attr:`Statements.record` for ``actum``, with ``key``.

    Now (:func:`chronica_core.clock.now`: the actum's ``at`` unless the chronicum's last is
    later), whether it answers a request, chronicum id, id, kind, actor kind, actor, content (two),
    key, native format, native data (two), the request it answers.
    """
    text, encoded = _content_parameters(actum.content)
    native = actum.native
    native_text, native_encoded = (None, None) if native is None else _content_parameters(native.data)
    return (
        clock.now(),
        bool(actum.answers),
        actum.chronicum_id,
        actum.id,
        str(actum.kind),
        str(actum.actor_kind),
        actum.actor,
        text,
        encoded,
        key,
        None if native is None else native.format,
        native_text,
        native_encoded,
        actum.answers or None,
    )
