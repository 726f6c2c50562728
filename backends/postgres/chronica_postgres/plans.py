"""Every store operation written once, as a plan that does no I/O (see ``chronica_core.plans``).

A plan yields :class:`Statement` (run it on a pooled connection in autocommit mode and send back
its rows) or :data:`DISCARD_BROKEN_CONNECTIONS` (test the pool's idle connections and drop the dead
ones). It builds the parameters, turns rows into :class:`Actum` / :class:`Chronicum` and psycopg
errors into Chronica errors. :class:`chronica_postgres.PostgresStore` and
:class:`chronica_postgres.AsyncPostgresStore` only perform the operations.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, cast

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
    StoreError,
)
from chronica_core.idle import CHECK_IDLE_AFTER, DEFAULT_CHECK_IDLE_AFTER, check_idle_after_option
from chronica_core.options import flag_option
from chronica_core.plans import Plan
from chronica_postgres.schema import (
    ACTA_IDEMPOTENCY_INDEX,
    ACTA_TO_CHRONICA_KEY,
    CHRONICA_PRIMARY_KEY,
    LATEST_VERSION,
    Statements,
)

__all__ = [
    "DISCARD_BROKEN_CONNECTIONS",
    "Operation",
    "Options",
    "Plans",
    "Rows",
    "Statement",
]

Rows = list[tuple[Any, ...]]
"""What performing an operation sends back into the plan: the rows (``[]`` when none)."""


@dataclass(frozen=True, slots=True)
class Statement:
    """Run ``sql`` with ``params`` (``None``: no parameters, several statements allowed)."""

    sql: bytes
    params: tuple[Any, ...] | None = None


class _DiscardBrokenConnections:
    """Test the idle connections of the pool and replace the broken ones (after a lost connection)."""

    def __repr__(self) -> str:
        return "DISCARD_BROKEN_CONNECTIONS"


DISCARD_BROKEN_CONNECTIONS: Final = _DiscardBrokenConnections()
"""The operation a plan yields once it saw a connection die (a server restart kills them all)."""

Operation = Statement | _DiscardBrokenConnections
"""What a plan of this package yields."""

_KINDS = {kind.value: kind for kind in ActumKind}
_ACTOR_KINDS = {kind.value: kind for kind in ActorKind}
_NOT_MIGRATED_HINT = (
    "; the schema is not migrated: run `chronica migrate --store URL`"
    " or open the store with auto_migrate=True"
)


def _as_number(name: str, value: object, kind: type[int] | type[float], least: float) -> Any:
    try:
        number = kind(cast(Any, value))
    except (TypeError, ValueError):
        raise InvalidOption("postgres", name, f"expected a number, got {value!r}") from None
    if number < least:
        raise InvalidOption("postgres", name, f"must be at least {least}, got {number}")
    return number


@dataclass(frozen=True, slots=True)
class Options:
    """The options of a PostgreSQL store (all may be given as strings, as on the command line).

    Attributes:
        schema: the schema holding the tables (default ``public``); several apps can share a
            database, each in its own schema.
        auto_migrate: create or upgrade the schema when the store opens (default ``True``);
            with ``False`` run ``chronica migrate --store URL`` (or :func:`chronica_postgres.migrate`).
        min_size: connections the pool keeps open (default 1).
        max_size: connections the pool may open at most (default 20).
        connect_timeout: seconds to wait for a new connection to the server (default 10).
        pool_timeout: seconds a call waits for a free pooled connection before ``StoreError``
            (default 30).
        check_idle_after: seconds a pooled connection may sit idle and still be used without
            a check (default 60, from 0 to 86400; see :mod:`chronica_core.idle`); one idle longer,
            or closed by the server meanwhile, is checked (one round trip) and replaced if dead.
    """

    schema: str = "public"
    auto_migrate: bool = True
    min_size: int = 1
    max_size: int = 20
    connect_timeout: float = 10.0
    pool_timeout: float = 30.0
    check_idle_after: float = DEFAULT_CHECK_IDLE_AFTER

    @classmethod
    def parse(cls, options: Mapping[str, object]) -> Options:
        """Return the options given by name.

        Raises:
            chronica_core.InvalidOption: an unknown option (the message lists the known ones) or
                a malformed value; its ``backend`` is ``"postgres"``, its ``option`` the name.
        """
        defaults = cls()
        unknown = sorted(set(options) - set(cls.__slots__))
        if unknown:
            known = ", ".join(cls.__slots__)
            raise InvalidOption("postgres", unknown[0], f"unknown option (known: {known})")
        schema = str(options.get("schema", defaults.schema))
        if not schema or "\x00" in schema:
            raise InvalidOption("postgres", "schema", "must be a non-empty name without NUL")
        min_size = _as_number("min_size", options.get("min_size", defaults.min_size), int, 0)
        max_size = _as_number("max_size", options.get("max_size", max(defaults.max_size, min_size)), int, 1)
        if max_size < min_size:
            raise InvalidOption(
                "postgres", "max_size", f"must be at least min_size ({min_size}), got {max_size}"
            )
        return cls(
            schema=schema,
            auto_migrate=flag_option(
                "postgres", "auto_migrate", options.get("auto_migrate", defaults.auto_migrate)
            ),
            min_size=min_size,
            max_size=max_size,
            connect_timeout=_as_number(
                "connect_timeout", options.get("connect_timeout", defaults.connect_timeout), float, 1
            ),
            pool_timeout=_as_number(
                "pool_timeout", options.get("pool_timeout", defaults.pool_timeout), float, 0
            ),
            check_idle_after=check_idle_after_option(
                "postgres", options.get(CHECK_IDLE_AFTER, defaults.check_idle_after)
            ),
        )

    def connect_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``psycopg.connect`` / ``AsyncConnection.connect``.

        Autocommit, and ``connect_timeout`` in whole seconds (libpq's unit; it treats less than 2 as 2).
        """
        return {"autocommit": True, "connect_timeout": max(2, round(self.connect_timeout))}

    def pool_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``psycopg_pool.ConnectionPool`` / ``AsyncConnectionPool``."""
        return {
            "min_size": self.min_size,
            "max_size": self.max_size,
            "timeout": self.pool_timeout,
            "kwargs": self.connect_arguments(),
            "name": f"chronica-postgres {self.schema}",
        }


def _utc(moment: datetime) -> datetime:
    """``moment`` in UTC (already so on the store's own connections, which run in UTC)."""
    return moment if moment.tzinfo is UTC else moment.astimezone(UTC)


def _content_parameters(content: str) -> tuple[str | None, bytes | None]:
    """``(text, None)``, or ``(None, UTF-8 bytes)`` for content holding NUL (``text`` cannot)."""
    if "\x00" in content:
        return None, content.encode()
    return content, None


def _stored(actum: Actum, at: datetime) -> Actum:
    """``actum`` as recorded at ``at`` (built directly: ``dataclasses.replace`` costs twice as much)."""
    return Actum(
        actum.chronicum_id, actum.kind, actum.actor_kind, actum.actor, actum.content, actum.id, _utc(at)
    )


def _actum(chronicum_id: str, row: tuple[Any, ...]) -> Actum:
    """Build an actum from ``(seq, id, kind, actor_kind, actor, content, content_bytes, at)``."""
    _, actum_id, kind, actor_kind, actor, content, content_bytes, at = row
    if content is None:
        content = bytes(content_bytes).decode()
    if at.tzinfo is not UTC:
        at = at.astimezone(UTC)
    return Actum(chronicum_id, _KINDS[kind], _ACTOR_KINDS[actor_kind], actor, content, actum_id, at)


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


def connection_lost(error: Exception) -> bool:
    """Whether ``error`` says the connection died (the server restarted, the backend was killed)."""
    if not isinstance(error, psycopg.OperationalError) or isinstance(error, PoolTimeout):
        return False
    state = error.sqlstate
    return state is None or state.startswith(("08", "57P"))


def translate(error: psycopg.Error, operation: str, chronicum_id: str) -> ChronicaError:
    """The Chronica error for a psycopg ``error`` raised while doing ``operation``.

    A violated foreign key to ``chronica`` is ``ChronicumNotFound``, a taken chronicum id
    ``ChronicumExists``; anything else ``StoreError("postgres: <operation>", detail)``.
    """
    constraint = error.diag.constraint_name
    if isinstance(error, errors.ForeignKeyViolation) and constraint == ACTA_TO_CHRONICA_KEY:
        return ChronicumNotFound(chronicum_id)
    if isinstance(error, errors.UniqueViolation) and constraint == CHRONICA_PRIMARY_KEY:
        return ChronicumExists(chronicum_id)
    detail = str(error).strip() or type(error).__name__
    if isinstance(error, errors.UndefinedTable | errors.InvalidSchemaName):
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
    """

    def __init__(self, statements: Statements) -> None:
        self.statements = statements

    def create(self, chronicum: Chronicum) -> Plan[Operation, None]:
        """Insert ``chronicum`` as given. Raises ``ChronicumExists``, ``StoreError``."""
        statement = Statement(
            self.statements.create,
            (chronicum.id, chronicum.owner_id, chronicum.started_at, chronicum.last_actum_at),
        )
        rows = yield from self._write(statement, "create chronicum", chronicum.id)
        if not rows:
            raise ChronicumExists(chronicum.id)

    def get(self, chronicum_id: str) -> Plan[Operation, Chronicum]:
        """Read a chronicum. Raises ``ChronicumNotFound``, ``StoreError``."""
        _refuse_nul(chronicum_id)
        rows = yield from self._read(
            Statement(self.statements.get, (chronicum_id,)), "get chronicum", chronicum_id
        )
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        owner_id, started_at, last_actum_at = rows[0]
        return Chronicum(
            chronicum_id, owner_id, _utc(started_at), None if last_actum_at is None else _utc(last_actum_at)
        )

    def record(self, actum: Actum) -> Plan[Operation, Actum]:
        """Append ``actum`` in one statement. Raises ``ChronicumNotFound``, ``StoreError``."""
        _refuse_nul(actum.chronicum_id)
        statement = Statement(self.statements.record, _record_parameters(actum, None))
        rows = yield from self._write(statement, "record actum", actum.chronicum_id)
        if not rows:
            raise ChronicumNotFound(actum.chronicum_id)
        at = rows[0][-1]
        return _stored(actum, at)

    def record_idempotent(self, actum: Actum, key: str) -> Plan[Operation, Actum]:
        """Append ``actum`` unless ``key`` was used in its chronicum; else return the stored one.

        One statement in the steady state; a writer that lost a race on the same key (its
        statement fails on the unique index once the winner commits) reads the winner's actum
        with a second. Raises ``ChronicumNotFound``, ``StoreError``.
        """
        chronicum_id = actum.chronicum_id
        _refuse_nul(chronicum_id)
        statement = Statement(
            self.statements.record_idempotent, (chronicum_id, key, *_record_parameters(actum, key))
        )
        try:
            rows = yield from self._again_if_lost(statement)  # the key makes a repeat land once
        except errors.UniqueViolation as error:
            if error.diag.constraint_name != ACTA_IDEMPOTENCY_INDEX:
                raise translate(error, "record actum", chronicum_id) from error
            keyed = Statement(self.statements.read_keyed, (chronicum_id, key))
            rows = yield from self._read(keyed, "record actum", chronicum_id)
            if not rows:  # nothing is ever deleted, so the winner's row is there
                raise StoreError(
                    "postgres: record actum", f"the actum stored with key {key!r} vanished"
                ) from error
            return _actum(chronicum_id, rows[0])
        except psycopg.Error as error:
            yield from self._discard_if_lost(error)
            raise translate(error, "record actum", chronicum_id) from error
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        inserted, *_, at = rows[0]
        if not inserted:
            return _actum(chronicum_id, rows[0][1:])
        return _stored(actum, at)

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
        rows = yield from self._read(Statement(sql, tuple(parameters)), "read acta", chronicum_id)
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        if rows[0][0] is None:  # the chronicum exists; no actum matched
            return []
        return [_actum(chronicum_id, row) for row in rows]

    def migrate(self) -> Plan[Operation, int]:
        """Create or upgrade the schema; return its version (:data:`LATEST_VERSION`).

        Reads the version first (no lock, no privilege needed when it is current); otherwise runs
        the migration script, which takes an advisory lock so concurrent migrators take turns.
        Raises ``StoreError`` (also when the schema is newer than this package).
        """
        version = yield from self._version()
        if version < LATEST_VERSION:
            yield from self._write(Statement(self.statements.migrate), "migrate", "")
            version = yield from self._version()
        if version != LATEST_VERSION:
            raise StoreError(
                "postgres: migrate",
                f"schema {self.statements.schema!r} is at version {version}, but this chronica-postgres "
                f"knows versions up to {LATEST_VERSION}; upgrade chronica-postgres",
            )
        return version

    def _version(self) -> Plan[Operation, int]:
        try:
            rows = yield Statement(self.statements.read_version, ())
        except (errors.UndefinedTable, errors.InvalidSchemaName):
            return 0
        except psycopg.Error as error:
            yield from self._discard_if_lost(error)
            raise translate(error, "migrate", "") from error
        version: int = rows[0][0]
        return version

    def _write(self, statement: Statement, operation: str, chronicum_id: str) -> Plan[Operation, Rows]:
        """Perform ``statement`` once: a write whose fate is unknown after a lost connection."""
        try:
            rows: Rows = yield statement
        except psycopg.Error as error:
            yield from self._discard_if_lost(error)
            raise translate(error, operation, chronicum_id) from error
        return rows

    def _read(self, statement: Statement, operation: str, chronicum_id: str) -> Plan[Operation, Rows]:
        """Perform ``statement``; after a lost connection drop the dead ones and try once more."""
        try:
            rows: Rows = yield from self._again_if_lost(statement)
        except psycopg.Error as error:
            yield from self._discard_if_lost(error)
            raise translate(error, operation, chronicum_id) from error
        return rows

    @staticmethod
    def _again_if_lost(statement: Statement) -> Plan[Operation, Rows]:
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
        else:
            return rows
        yield DISCARD_BROKEN_CONNECTIONS
        rows = yield statement
        return rows

    @staticmethod
    def _discard_if_lost(error: Exception) -> Plan[Operation, None]:
        if connection_lost(error):
            yield DISCARD_BROKEN_CONNECTIONS


def _record_parameters(actum: Actum, key: str | None) -> tuple[Any, ...]:
    """Parameters of the insert: chronicum id, id, kind, actor kind, actor, content (two), key."""
    text, encoded = _content_parameters(actum.content)
    return (
        actum.chronicum_id,
        actum.id,
        str(actum.kind),
        str(actum.actor_kind),
        actum.actor,
        text,
        encoded,
        key,
    )
