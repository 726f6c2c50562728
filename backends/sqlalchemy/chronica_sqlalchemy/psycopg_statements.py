"""PostgreSQL's hot statements on psycopg's own connection: compiled once by SQLAlchemy, then run by psycopg.

A context-window read, a ``get`` and a single append are each one statement in autocommit, and
SQLAlchemy's execution of a Core statement (its compiled-cache lookup, execution context, events,
result object and row processing) cost the client more CPU than the rest of the operation. On
``postgresql+psycopg://`` (blocking and asyncio) those three statements are compiled by SQLAlchemy
once, for the store's dialect, into their SQL text and bind processors (:class:`DriverStatement`);
each call then runs that text on the pooled connection's psycopg connection, asking for binary
rows, and the plan turns the rows into acta itself (:func:`window_acta`, :func:`chronicum_of`).

What stays SQLAlchemy's: the connection is taken from the engine's pool and given back as for any
operation (its ``checkout`` and ``checkin`` events run: the idle-connection check, the
``operation_timeout`` alarm), and an error the driver raises is handed to the SQLAlchemy
connection's own error handling, so it is wrapped, recognised as a lost connection (which
invalidates the connection), and passed through the engine's ``handle_error`` events exactly as
if SQLAlchemy had run the statement; the plan then reports it as before
(``StoreError("sqlalchemy: <operation>", ...)``).
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy.util
from sqlalchemy import Connection, Dialect, Executable
from sqlalchemy.pool import PoolProxiedConnection

from chronica_core.model import ActorKind, Actum, ActumKind, Chronicum

__all__ = [
    "DriverStatement",
    "chronicum_of",
    "driver_rows",
    "psycopg_rows",
    "runs_on_psycopg",
    "utc",
    "window_acta",
]

_KINDS = {kind.value: kind for kind in ActumKind}
_ACTOR_KINDS = {actor_kind.value: actor_kind for actor_kind in ActorKind}
_await: Callable[[Any], Any] = getattr(sqlalchemy.util, "await_", None) or sqlalchemy.util.await_only
_shown = reprlib.Repr()
_shown.maxstring = 60
_shown.maxother = 60


def runs_on_psycopg(dialect: Dialect) -> bool:
    """Whether ``dialect`` is PostgreSQL on psycopg 3 (blocking or asyncio): the driver these calls know."""
    return dialect.name == "postgresql" and dialect.driver == "psycopg"


@dataclass(frozen=True)
class DriverStatement:
    """One SQLAlchemy statement as psycopg runs it: its SQL text, compiled once, and how to bind it.

    Attributes:
        text: the statement's SQL for the dialect, with psycopg's ``%(name)s`` placeholders (and
            the casts SQLAlchemy renders for psycopg).
        processors: ``(parameter, processor)`` for every parameter whose type converts the value
            before it is sent (content to UTF-8 ``bytes``, a moment to UTC), as SQLAlchemy would.
        fixed: the values of parameters the statement fixes itself (the follow channel).
        awaits: whether the driver is psycopg's asyncio connection (run through SQLAlchemy's
            greenlet bridge).
    """

    text: str
    processors: tuple[tuple[str, Callable[[Any], Any]], ...]
    fixed: dict[str, Any]
    awaits: bool

    @classmethod
    def compiled(cls, statement: Executable, dialect: Dialect) -> DriverStatement | None:
        """Compile ``statement`` for ``dialect``; ``None`` when its text is not fixed (SQLAlchemy runs it).

        A statement whose text SQLAlchemy completes at execution time (an expanding ``IN``, a
        parameter rendered into it) or whose parameter names it had to escape has no fixed text
        with known names to hand to the driver.
        """
        compiled: Any = cast(Any, statement).compile(dialect=dialect)
        if compiled.literal_execute_params or compiled.post_compile_params or compiled.escaped_bind_names:
            return None
        processors: list[tuple[str, Callable[[Any], Any]]] = []
        fixed: dict[str, Any] = {}
        for bind, name in compiled.bind_names.items():  # each parameter under its name in the text
            processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if processor is not None:
                processors.append((name, processor))
            if not bind.required:
                fixed[name] = bind.effective_value
        return cls(compiled.string, tuple(processors), fixed, bool(dialect.is_async))

    def values(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """The values psycopg is sent for ``parameters``: the fixed ones added, every value processed."""
        values = {**self.fixed, **parameters} if self.fixed else dict(parameters)
        for name, process in self.processors:
            values[name] = process(values[name])
        return values


def psycopg_rows(connection: Connection, statement: DriverStatement, parameters: dict[str, Any]) -> list[Any]:
    """Every row ``statement`` gives with ``parameters``, run on ``connection``'s psycopg connection.

    The rows are psycopg's binary rows as tuples (see :func:`driver_rows`). Run it only where the
    connection is in autocommit (an autocommit plan's first step): psycopg would otherwise begin
    a transaction that SQLAlchemy does not know of. With the engine's ``echo`` on, the statement
    and its values are logged on the engine's logger, as SQLAlchemy would.

    Raises:
        sqlalchemy.exc.DBAPIError: the driver's error, wrapped by the SQLAlchemy connection's own
            error handling (lost connections recognised and invalidated, ``handle_error`` events
            run, which may replace it: ``operation_timeout``'s ``OperationTimedOut``).
    """
    values = statement.values(parameters)
    if connection.engine.echo:
        connection.engine.logger.info("%s", statement.text)
        connection.engine.logger.info("[psycopg, compiled once] %s", _shown.repr(values))
    try:
        return driver_rows(connection.connection, statement, values)
    except BaseException as error:  # noqa: BLE001 - SQLAlchemy's handling raises, as its execute's does
        connection._handle_dbapi_exception(error, statement.text, values, None, None)


def driver_rows(
    pooled: PoolProxiedConnection, statement: DriverStatement, values: dict[str, Any]
) -> list[Any]:
    """Run psycopg's own call: ``statement``'s text with ``values`` on ``pooled``'s psycopg connection.

    Asks for binary rows: ``bytea`` as ``bytes``, ``timestamptz`` as an aware ``datetime`` in the
    session's time zone, numbers read without parsing text. Raises what psycopg raises.
    """
    driver: Any = pooled.driver_connection
    if statement.awaits:
        return cast(list[Any], _await(_fetched(driver, statement.text, values)))
    return cast(list[Any], driver.execute(statement.text, values, binary=True).fetchall())


async def _fetched(driver: Any, text: str, values: dict[str, Any]) -> list[Any]:
    """The rows of ``text`` on psycopg's ``AsyncConnection`` ``driver``."""
    cursor = await driver.execute(text, values, binary=True)
    return cast(list[Any], await cursor.fetchall())


def utc(moment: datetime) -> datetime:
    """``moment`` (aware, in the session's time zone) in UTC, as ``UTCDateTime`` reads it."""
    return moment if moment.tzinfo is UTC else moment.astimezone(UTC)


def window_acta(rows: list[Any]) -> list[Actum]:
    """The acta of a context window's rows ``(chronicum id, seq, id, kind, actor kind, actor, content, at)``.

    A row without ``seq`` stands for the chronicum itself, not an actum. Content arrives as the
    ``bytea``'s UTF-8 bytes.
    """
    kinds, actor_kinds = _KINDS, _ACTOR_KINDS
    return [
        Actum(
            chronicum_id,
            kinds[kind],
            actor_kinds[actor_kind],
            actor,
            content.decode("utf-8"),
            actum_id,
            at if at.tzinfo is UTC else at.astimezone(UTC),
        )
        for chronicum_id, seq, actum_id, kind, actor_kind, actor, content, at in rows
        if seq is not None
    ]


def chronicum_of(row: Any) -> Chronicum:
    """The chronicum of a row ``(id, owner id, started at, last actum at)``."""
    last = row[3]
    return Chronicum(
        id=row[0], owner_id=row[1], started_at=utc(row[2]), last_actum_at=None if last is None else utc(last)
    )
