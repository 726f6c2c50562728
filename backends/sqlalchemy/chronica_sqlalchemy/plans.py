"""Every store operation written once, as a plan that does no I/O (see :mod:`chronica_core.plans`).

A plan yields :class:`Step` values (execute a statement, commit, roll back) and receives each
step's outcome (a SQLAlchemy ``CursorResult`` for ``execute``). It builds the statements' parameters,
turns rows into :class:`Actum` and :class:`Chronicum`, and turns SQLAlchemy errors into Chronica
errors. :func:`execute_plan` performs the steps on one connection of a blocking ``Engine``; the
asyncio store runs that same function inside SQLAlchemy's greenlet bridge on its ``AsyncEngine``.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import (
    Connection,
    CursorResult,
    Dialect,
    Engine,
    Executable,
    Integer,
    String,
    bindparam,
    column,
    func,
    insert,
    null,
    select,
    table,
    true,
    union_all,
    update,
)
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.schema import CreateSchema, CreateTable
from sqlalchemy.sql.elements import BindParameter

from chronica_core.errors import ChronicaError, ChronicumExists, ChronicumNotFound, StoreError
from chronica_core.model import ActaQuery, ActorKind, Actum, ActumKind, Chronicum
from chronica_core.plans import Plan, run_plan
from chronica_sqlalchemy.schema import SCHEMA_VERSION, Tables, is_mysql

__all__ = [
    "COMMIT",
    "DROP_CONNECTION",
    "RECONNECT",
    "ROLLBACK",
    "WRITE_OPTION",
    "Plans",
    "Step",
    "actum_row",
    "execute_plan",
]

Result = TypeVar("Result")

WRITE_OPTION = "chronica_write"
"""Execution option marking a connection that writes (SQLite then begins with ``BEGIN IMMEDIATE``)."""

_COMPONENT = "chronica"
_LOCK_TIMEOUT_SECONDS = 60
_KINDS = {kind.value: kind for kind in ActumKind}
_ACTOR_KINDS = {actor_kind.value: actor_kind for actor_kind in ActorKind}


class Step(NamedTuple):
    """One thing to do on the plan's connection: call its ``method`` with ``args``.

    Attributes:
        method: ``"execute"``, ``"commit"`` or ``"rollback"``.
        args: the arguments, e.g. ``(statement, parameters)`` for ``execute``.
        write: whether the connection must be a writing one (only the first step's flag counts).
    """

    method: str
    args: tuple[Any, ...] = ()
    write: bool = False


COMMIT = Step("commit")
ROLLBACK = Step("rollback")
RECONNECT = Step("reconnect")
"""Give back the plan's connection (SQLAlchemy found it lost) and take a new one at the next step."""
DROP_CONNECTION = Step("drop")
"""End the plan's connection's session (what it holds on the server goes with it); the pool
replaces the connection."""


def _execute(statement: Executable, parameters: dict[str, Any] | None = None, *, write: bool = False) -> Step:
    return Step("execute", (statement, parameters or {}), write)


def execute_plan(engine: Engine, plan: Plan[Step, Result]) -> Result:
    """Run ``plan`` on one connection of ``engine`` (taken at the first step, returned at the end).

    Runs as plain blocking code; the asyncio store calls it through SQLAlchemy's greenlet bridge
    with its ``AsyncEngine.sync_engine``. A failure to connect is thrown into the plan like any
    other step's failure, so the plan's error translation covers it. :data:`RECONNECT` gives the
    connection back and :data:`DROP_CONNECTION` ends it; the next step takes a new one.

    A connection on which a step failed with anything but a constraint violation is ended, not
    given back: the database may still hold its transaction open (SQLite keeps it after a failed
    ``COMMIT``; SQLAlchemy then forgets it, and the pool does not roll back on return), or a lock.
    Giving the connection back never raises: if that fails (the server is gone), the pool drops
    it, and the plan's result or error stands. Returns the plan's result.
    """
    held: list[Connection] = []
    failed: list[Connection] = []

    def perform(step: Step) -> Any:
        if step.method in (RECONNECT.method, DROP_CONNECTION.method):
            if held:
                connection = held.pop()
                _release(connection, drop=step is DROP_CONNECTION or connection in failed)
            return None
        if not held:
            held.append(engine.connect())
            if step.write:
                held[0].execution_options(**{WRITE_OPTION: True})
        try:
            return getattr(held[0], step.method)(*step.args)
        except IntegrityError:  # a statement refused: the connection and its transaction are sound
            raise
        except SQLAlchemyError:
            failed.append(held[0])
            raise

    try:
        return run_plan(plan, perform)
    finally:
        if held:
            _release(held[0], drop=held[0] in failed)


def _release(connection: Connection, *, drop: bool = False) -> None:
    """Give ``connection`` back to its pool (``drop``: end it instead); if that fails, end it."""
    if drop:
        with contextlib.suppress(SQLAlchemyError):
            connection.invalidate()
    try:
        connection.close()
    except SQLAlchemyError:
        with contextlib.suppress(SQLAlchemyError):
            connection.invalidate()
            connection.close()


def _again_if_disconnected(make: Callable[[], Plan[Step, Result]]) -> Plan[Step, Result]:
    """Run the plan ``make()`` gives; after a lost connection, once more on a new one.

    Only for plans safe to repeat: reads, and keyed writes (the repeat finds the actum the first
    try stored, if it did). A connection is lost when SQLAlchemy says so (``connection_invalidated``:
    the dialect recognised a disconnect). The error of the second try propagates.
    """
    try:
        return (yield from make())
    except DBAPIError as error:
        if not error.connection_invalidated:
            raise
    yield RECONNECT
    return (yield from make())


def _detail(error: SQLAlchemyError) -> str:
    """The driver's own message, without SQLAlchemy's echo of the statement and its parameters."""
    if isinstance(error, DBAPIError) and error.orig is not None:
        return f"{type(error.orig).__name__}: {error.orig}".strip()
    return f"{type(error).__name__}: {error}"


def _translated(operation: str, plan: Plan[Step, Result]) -> Plan[Step, Result]:
    """Run ``plan``, turning any SQLAlchemy error into ``StoreError("sqlalchemy: <operation>", ...)``."""
    try:
        return (yield from plan)
    except ChronicaError:
        raise
    except SQLAlchemyError as error:
        raise StoreError(f"sqlalchemy: {operation}", _detail(error)) from error


def actum_row(actum: Actum, seq: int, at: datetime, key: str | None = None) -> dict[str, Any]:
    """The parameters of :attr:`Plans.insert_actum_statement` for ``actum`` at ``seq``."""
    return {
        "chronicum_id": actum.chronicum_id,
        "seq": seq,
        "id": actum.id,
        "kind": actum.kind.value,
        "actor_kind": actum.actor_kind.value,
        "actor": actum.actor,
        "content": actum.content,
        "at": at,
        "idempotency_key": key,
    }


def _slots(name: str, count: int) -> list[BindParameter[str]]:
    return [bindparam(f"{name}_{index}", type_=String()) for index in range(count)]


def _padded(name: str, values: list[str], count: int) -> dict[str, str]:
    """``values`` in ``count`` parameters ``name_0``..., the last value repeated (``IN`` ignores it)."""
    values = values[:count]
    return {f"{name}_{index}": values[min(index, len(values) - 1)] for index in range(count)}


class Plans:
    """The statements of one store, built once for its dialect and tables, and its operations as plans.

    The statements of ``record`` and of a context window are public (``advance_statement``,
    ``counter``, ``insert_actum_statement``, :meth:`window`) so that benchmarks can time SQLAlchemy
    Core running exactly them.

    Args:
        tables: the table definitions (see :class:`chronica_sqlalchemy.schema.Tables`).
        dialect: the engine's dialect; decides how the per-chronicum counter is read back and how
            migrations are locked.
        schema: the schema (database, on MariaDB/MySQL) holding the tables, created if missing;
            ``None`` for the connection's default.
    """

    def __init__(self, tables: Tables, dialect: Dialect, schema: str | None = None) -> None:
        self.tables = tables
        self.dialect_name = "mysql" if is_mysql(dialect) else dialect.name
        self.schema = schema
        chronica, acta = tables.chronica, tables.acta
        self._insert_chronicum = insert(chronica)
        self._select_chronicum = select(
            chronica.c.id, chronica.c.owner_id, chronica.c.started_at, chronica.c.last_actum_at
        ).where(chronica.c.id == bindparam("id"))
        advance = (
            update(chronica)
            .where(chronica.c.id == bindparam("chronicum_id"))
            .values(last_actum_at=bindparam("at"))
        )
        if dialect.update_returning:
            self.counter = "returning"
            self.advance_statement: Executable = advance.values(last_seq=chronica.c.last_seq + 1).returning(
                chronica.c.last_seq
            )
        elif self.dialect_name == "mysql":
            # One round trip: LAST_INSERT_ID(expr) hands the new value to the client as lastrowid.
            self.counter = "lastrowid"
            self.advance_statement = advance.values(last_seq=func.last_insert_id(chronica.c.last_seq + 1))
        else:
            self.counter = "select"
            self.advance_statement = advance.values(last_seq=chronica.c.last_seq + 1)
        self._select_counter = select(chronica.c.last_seq).where(chronica.c.id == bindparam("chronicum_id"))
        self.insert_actum_statement = insert(acta)
        self._actum_columns = (
            acta.c.id,
            acta.c.kind,
            acta.c.actor_kind,
            acta.c.actor,
            acta.c.content,
            acta.c.at,
        )
        self._select_keyed = select(*self._actum_columns).where(
            acta.c.chronicum_id == bindparam("chronicum_id"),
            acta.c.idempotency_key == bindparam("idempotency_key"),
        )
        self._windows: dict[tuple[bool, bool, bool], Executable] = {}
        self._lock_key = self._migration_lock_key()

    # --- the store's operations -------------------------------------------------------------

    def create(self, chronicum: Chronicum) -> Plan[Step, None]:
        """Save ``chronicum``; ``ChronicumExists`` if the primary key is taken (read back to be sure)."""
        return _translated("create chronicum", self._create(chronicum))

    def get(self, chronicum_id: str) -> Plan[Step, Chronicum]:
        """Return the chronicum; ``ChronicumNotFound`` if there is none."""
        return _translated("get chronicum", _again_if_disconnected(lambda: self._get(chronicum_id)))

    def record(self, actum: Actum) -> Plan[Step, Actum]:
        """Append ``actum`` at the chronicum's next ``seq``; ``ChronicumNotFound`` if there is none."""
        return _translated("record actum", self._record(actum, None))

    def record_idempotent(self, actum: Actum, key: str) -> Plan[Step, Actum]:
        """Append ``actum`` under ``key``, or return the actum the key already holds in the chronicum."""
        return _translated("record actum", _again_if_disconnected(lambda: self._record(actum, key)))

    def acta(self, chronicum_id: str, query: ActaQuery) -> Plan[Step, list[Actum]]:
        """Return the context window in one query; ``ChronicumNotFound`` if the chronicum is missing."""
        return _translated("get acta", _again_if_disconnected(lambda: self._acta(chronicum_id, query)))

    def migrate(self) -> Plan[Step, None]:
        """Create the tables, or bring them to :data:`SCHEMA_VERSION`, under a lock (see :meth:`_migrate`)."""
        return _translated("migrate", self._migrate())

    # --- the plans --------------------------------------------------------------------------

    def _create(self, chronicum: Chronicum) -> Plan[Step, None]:
        row = {
            "id": chronicum.id,
            "owner_id": chronicum.owner_id,
            "started_at": chronicum.started_at,
            "last_actum_at": chronicum.last_actum_at,
            "last_seq": 0,
        }
        try:
            yield _execute(self._insert_chronicum, row, write=True)
            yield COMMIT
        except IntegrityError:
            yield ROLLBACK
            existing: CursorResult[Any] = yield _execute(self._select_chronicum, {"id": chronicum.id})
            if existing.first() is not None:
                raise ChronicumExists(chronicum.id) from None
            raise

    def _get(self, chronicum_id: str) -> Plan[Step, Chronicum]:
        result: CursorResult[Any] = yield _execute(self._select_chronicum, {"id": chronicum_id})
        row: Any = result.first()
        if row is None:
            raise ChronicumNotFound(chronicum_id)
        return Chronicum(id=row[0], owner_id=row[1], started_at=row[2], last_actum_at=row[3])

    def _advance_counter(self, chronicum_id: str, at: datetime) -> Plan[Step, int | None]:
        """Move the chronicum's counter and ``last_actum_at``; return the new ``seq`` (``None``: missing).

        The update also locks the chronicum's row until commit, so the writers of one chronicum
        take their turns: that turn is the actum's place in the chronicum.
        """
        result: CursorResult[Any] = yield _execute(
            self.advance_statement, {"chronicum_id": chronicum_id, "at": at}, write=True
        )
        if self.counter == "returning":
            row = result.first()
            return None if row is None else int(row[0])
        if result.rowcount == 0:
            return None
        if self.counter == "lastrowid":
            return int(result.lastrowid)
        counter: CursorResult[Any] = yield _execute(self._select_counter, {"chronicum_id": chronicum_id})
        return int(counter.scalar_one())

    def _record(self, actum: Actum, key: str | None) -> Plan[Step, Actum]:
        at = datetime.now(UTC)
        try:
            seq = yield from self._advance_counter(actum.chronicum_id, at)
            if seq is None:
                raise ChronicumNotFound(actum.chronicum_id)
            yield _execute(self.insert_actum_statement, actum_row(actum, seq, at, key))
            yield COMMIT
        except IntegrityError:
            if key is None:
                raise
            # Another write holds the key: discard ours and read theirs back (a fresh transaction).
            yield ROLLBACK
            keyed: CursorResult[Any] = yield _execute(
                self._select_keyed, {"chronicum_id": actum.chronicum_id, "idempotency_key": key}
            )
            first = keyed.first()
            if first is None:
                raise
            return self._actum(actum.chronicum_id, first, 0)
        return replace(actum, at=at)

    def _acta(self, chronicum_id: str, query: ActaQuery) -> Plan[Step, list[Actum]]:
        statement, parameters = self.window_for(chronicum_id, query)
        result: CursorResult[Any] = yield _execute(statement, parameters)
        rows: list[Any] = list(result.all())
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        return self._window_acta(chronicum_id, rows)

    def window_for(self, chronicum_id: str, query: ActaQuery) -> tuple[Executable, dict[str, Any]]:
        """Return the context-window statement for ``query`` and its parameters."""
        parameters: dict[str, Any] = {"chronicum_id": chronicum_id}
        if query.actum_kinds:
            parameters.update(_padded("actum_kind", [kind.value for kind in query.actum_kinds], len(_KINDS)))
        if query.actor_kinds:
            values = [actor_kind.value for actor_kind in query.actor_kinds]
            parameters.update(_padded("actor_kind", values, len(_ACTOR_KINDS)))
        if query.last_n > 0:
            parameters["last_n"] = query.last_n
        shape = (bool(query.actum_kinds), bool(query.actor_kinds), query.last_n > 0)
        return self.window(*shape), parameters

    def window(self, by_kind: bool, by_actor_kind: bool, limited: bool) -> Executable:
        """The one query of a context window, built once per shape.

        Its parameters (see :meth:`window_for`): ``chronicum_id``; ``actum_kind_0`` to
        ``actum_kind_3`` and ``actor_kind_0`` to ``actor_kind_2`` (the wanted values, the last one
        repeated to fill every slot: a fixed number of parameters keeps the SQL text, and so its
        compiled form, the same for every query of a shape); ``last_n``.

        Its rows are ``(chronicum id, seq, id, kind, actor kind, actor, content, at)``: the acta
        that pass the filters (the newest ``last_n`` of them by ``seq``, read backwards along the
        primary key), plus one row with a ``NULL`` ``seq`` for the chronicum itself. No row at all
        means the chronicum is missing; only the ``NULL`` row means it has no matching acta.
        On SQLite and PostgreSQL the chronicum's row is outer-joined to the limited acta, in
        order. MariaDB/MySQL would materialise that derived table (with its ``LONGTEXT``) in an
        on-disk temporary table, so there the two are a ``UNION ALL`` and the rows are put in
        order by :meth:`_window_acta`.
        """
        shape = (by_kind, by_actor_kind, limited)
        statement = self._windows.get(shape)
        if statement is not None:
            return statement
        chronica, acta = self.tables.chronica, self.tables.acta
        recent = select(acta.c.chronicum_id, acta.c.seq, *self._actum_columns).where(
            acta.c.chronicum_id == bindparam("chronicum_id")
        )
        if by_kind:
            recent = recent.where(acta.c.kind.in_(_slots("actum_kind", len(_KINDS))))
        if by_actor_kind:
            recent = recent.where(acta.c.actor_kind.in_(_slots("actor_kind", len(_ACTOR_KINDS))))
        if limited:
            recent = recent.order_by(acta.c.seq.desc()).limit(bindparam("last_n", type_=Integer()))
        if self.dialect_name == "mysql":
            itself = select(chronica.c.id, *(null() for _ in range(len(self._actum_columns) + 1))).where(
                chronica.c.id == bindparam("chronicum_id")
            )
            statement = union_all(recent, itself)
        else:
            window = recent.subquery("recent")
            statement = (
                select(chronica.c.id, *list(window.c)[1:])
                .select_from(chronica.outerjoin(window, true()))
                .where(chronica.c.id == bindparam("chronicum_id"))
                .order_by(window.c.seq)
            )
        self._windows[shape] = statement
        return statement

    @staticmethod
    def _actum(chronicum_id: str, row: Any, offset: int) -> Actum:
        """Turn ``row[offset:]`` (id, kind, actor kind, actor, content, at) into an actum."""
        actum_id, kind, actor_kind, actor, content, at = row[offset : offset + 6]
        return Actum(chronicum_id, _KINDS[kind], _ACTOR_KINDS[actor_kind], actor, content, actum_id, at)

    def _window_acta(self, chronicum_id: str, rows: list[Any]) -> list[Actum]:
        """Turn the rows of :meth:`window` into acta (a row without ``seq`` stands for none)."""
        kinds, actor_kinds = _KINDS, _ACTOR_KINDS
        if self.dialect_name == "mysql":
            rows = sorted((row for row in rows if row[1] is not None), key=itemgetter(1))
        return [
            Actum(chronicum_id, kinds[kind], actor_kinds[actor_kind], actor, content, actum_id, at)
            for _, seq, actum_id, kind, actor_kind, actor, content, at in rows
            if seq is not None
        ]

    # --- migration --------------------------------------------------------------------------

    def _migrate(self) -> Plan[Step, None]:
        """Bring the tables to :data:`SCHEMA_VERSION`, safe with many processes starting at once.

        Serialised per database (and schema): SQLite by ``BEGIN IMMEDIATE`` (its DDL is
        transactional), PostgreSQL by a transaction-scoped advisory lock, MariaDB/MySQL by
        ``GET_LOCK`` (its DDL commits by itself, so the lock is held by the session and
        released at the end). Every ``CREATE`` also says ``IF NOT EXISTS``.
        """
        locked = yield from self._lock()
        try:
            yield from self._create_tables()
        except GeneratorExit:
            raise
        except BaseException:
            if locked:
                yield from self._release_lock()
            raise
        if locked:
            failed = yield from self._release_lock()
            if failed is not None:
                raise failed

    def _release_lock(self) -> Plan[Step, SQLAlchemyError | None]:
        """Release the migration lock; if that fails, end the session, and the lock with it.

        A connection must not go back to the pool holding the lock: every later migration would
        wait for it. Returns the error of the release (``None`` when it went well).
        """
        try:
            yield from self._unlock()
        except SQLAlchemyError as error:
            yield DROP_CONNECTION
            return error
        return None

    def _create_tables(self) -> Plan[Step, None]:
        tables = self.tables
        if not (yield from self._versions_table_exists()):
            if self.schema is not None and self.dialect_name in ("postgresql", "mysql"):
                yield _execute(CreateSchema(self.schema, if_not_exists=True), write=True)
            yield _execute(CreateTable(tables.versions, if_not_exists=True), write=True)
        result: CursorResult[Any] = yield _execute(
            select(tables.versions.c.version).where(tables.versions.c.component == _COMPONENT)
        )
        version = result.scalar()
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                "sqlalchemy: migrate",
                f"the database is at schema version {version}, newer than this chronica-sqlalchemy "
                f"knows ({SCHEMA_VERSION}); upgrade chronica-sqlalchemy",
            )
        if version is None:
            yield _execute(CreateTable(tables.chronica, if_not_exists=True))
            yield _execute(CreateTable(tables.acta, if_not_exists=True))
            yield _execute(insert(tables.versions), {"component": _COMPONENT, "version": SCHEMA_VERSION})
        yield COMMIT

    def _versions_table_exists(self) -> Plan[Step, bool]:
        """On MariaDB/MySQL, whether the versions table exists (elsewhere ``False``: just create it).

        There, ``CREATE ... IF NOT EXISTS`` of something that exists raises a warning, which
        asyncmy logs on every open; so MariaDB/MySQL looks before it creates.
        """
        if self.dialect_name != "mysql":
            return False
        database = self.schema if self.schema is not None else func.database()
        information = table(
            "tables", column("table_schema"), column("table_name"), schema="information_schema"
        )
        result: CursorResult[Any] = yield _execute(
            select(func.count())
            .select_from(information)
            .where(
                information.c.table_schema == database, information.c.table_name == self.tables.versions.name
            )
        )
        return bool(result.scalar())

    def _lock(self) -> Plan[Step, bool]:
        """Take the migration lock; return whether it must be released by :meth:`_unlock`."""
        if self.dialect_name == "postgresql":
            yield _execute(select(func.pg_advisory_xact_lock(self._lock_key)), write=True)
        elif self.dialect_name == "mysql":
            result: CursorResult[Any] = yield _execute(
                select(func.get_lock(self._lock_name(), _LOCK_TIMEOUT_SECONDS)), write=True
            )
            taken = result.scalar()
            if taken is None and self.schema is None:  # GET_LOCK(NULL, ...): DATABASE() is NULL
                raise StoreError(
                    "sqlalchemy: migrate",
                    "no database selected: name one in the URL (mariadb+pymysql://host/DATABASE) "
                    "or give the schema option",
                )
            if taken != 1:
                raise StoreError(
                    "sqlalchemy: migrate",
                    f"could not take the migration lock within {_LOCK_TIMEOUT_SECONDS} seconds",
                )
            return True
        return False

    def _unlock(self) -> Plan[Step, None]:
        yield _execute(select(func.release_lock(self._lock_name())))

    def _lock_name(self) -> Any:
        """A MariaDB/MySQL lock name (server-wide, at most 64 characters), one per database."""
        database = self.schema if self.schema is not None else func.database()
        return func.concat("chronica:", func.sha1(func.concat("chronica-sqlalchemy:", database)))

    def _migration_lock_key(self) -> int:
        """A signed 64-bit advisory lock key, one per schema (the database is implied)."""
        digest = hashlib.sha256(f"chronica-sqlalchemy:migrate:{self.schema or ''}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)
