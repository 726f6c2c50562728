"""Runs a plan on one SQLAlchemy connection: a ``Connection``, or an ``AsyncConnection``'s ``run_sync``.

The plan's first step says which connection it needs (:meth:`Connections.source`): a write takes
the SQLite file's writer turn first (:mod:`.sqlite_writers`) and begins with ``BEGIN IMMEDIATE``
there; the isolation level is switched where the plan's autocommit flag and the engine's own
level differ. A failure to connect, or to get the turn, is thrown into the plan at
its first step, so its error translation covers it. A step that fails with anything but a
refused constraint or a conflict (:mod:`.conflicts`; closing the connection rolls its
transaction back) ends the connection (the pool replaces it): the database may still hold its
transaction or a lock. Giving a connection back never raises.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from chronica_core.errors import ChronicaError, StoreError
from chronica_core.plans import Plan
from chronica_sqlalchemy.conflicts import conflicted
from chronica_sqlalchemy.dialects import store_dialect_class
from chronica_sqlalchemy.sqlite_writers import take_turn, take_turn_async
from chronica_sqlalchemy.steps import CALL, CONNECT, Step, detail

__all__ = ["DEFAULT_LEVEL", "Connections", "execute", "execute_async", "run_on"]

Result = TypeVar("Result")
AnyEngine = TypeVar("AnyEngine", Engine, AsyncEngine)

DEFAULT_LEVEL = "default"
"""In :attr:`Connections.levels`: the connection's ``default_isolation_level`` (the server's own)."""


@dataclass(frozen=True)
class Connections(Generic[AnyEngine]):
    """Where a store's plans take their connection, and how each is set up.

    Attributes:
        engine: the store's engine.
        reads: an engine whose connections are in autocommit (MariaDB/MySQL's read engine): a
            plan that asks for autocommit and does not write takes its connection there, as it is.
        levels: the isolation level a connection of ``engine`` is set to, by the plan's
            autocommit flag (``"AUTOCOMMIT"``, :data:`DEFAULT_LEVEL`); absent: left as lent.
        begin_writes: the statement a writing plan begins with (SQLite: ``BEGIN IMMEDIATE``, so
            that it waits for the write lock up front instead of failing to upgrade a read lock).
    """

    engine: AnyEngine
    reads: AnyEngine | None = None
    levels: Mapping[bool, str] = field(default_factory=dict)
    begin_writes: str | None = None

    def on_reads(self, step: Step) -> bool:
        """Whether the plan beginning with ``step`` runs on :attr:`reads`."""
        return self.reads is not None and step.autocommit and not step.write

    def source(self, step: Step) -> AnyEngine:
        """The engine the plan beginning with ``step`` takes its connection from."""
        return self.reads if self.reads is not None and self.on_reads(step) else self.engine

    def prepare(self, connection: Connection, step: Step) -> str | None:
        """Set ``connection``'s level for the plan beginning with ``step``; return a statement to run first.

        Switching the level costs no round trip on psycopg.
        """
        level = self.levels.get(step.autocommit)
        if level is not None and not self.on_reads(step):
            default = level == DEFAULT_LEVEL
            connection.execution_options(
                isolation_level=connection.default_isolation_level if default else level
            )
        return self.begin_writes if step.write else None


def _perform(connection: Connection, step: Step) -> Any:
    if step.method == CALL:
        return step.args[0](connection)
    try:
        return getattr(connection, step.method)(*step.args)
    except IntegrityError:
        raise  # a statement refused: the connection and its transaction are sound
    except SQLAlchemyError as error:
        if not conflicted(error):  # a conflict: the connection is sound, its transaction rolled back
            with contextlib.suppress(SQLAlchemyError):
                connection.invalidate()
        raise


def run_on(
    connection: Connection, connections: Connections[Any], plan: Plan[Step, Result], step: Step
) -> Result:
    """Run ``plan``, whose first step ``step`` it yielded already, to its end on ``connection``."""
    begin = connections.prepare(connection, step)
    while True:
        try:
            if begin is not None:
                statement, begin = begin, None
                _perform(connection, Step("exec_driver_sql", (statement,)))
            outcome, error = _perform(connection, step), None
        except Exception as failure:  # noqa: BLE001 - handed to the plan, which decides
            outcome, error = None, failure
        try:
            step = plan.throw(error) if error is not None else plan.send(outcome)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def _thrown(plan: Plan[Step, Result], error: BaseException) -> Result:
    """Throw ``error`` (no connection could be had) into ``plan``; it translates it, or ends."""
    try:
        plan.throw(error)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    plan.close()
    raise error


def _connect(engine: Engine) -> Connection:
    """A connection of ``engine``; any failure is ``StoreError("sqlalchemy: connect", ...)``.

    Labelled by what failed, not by the operation that wanted the connection. Drivers refuse
    connect arguments they cannot use with whatever exception they like: all are translated.
    """
    try:
        return engine.connect()
    except ChronicaError:
        raise
    except Exception as error:
        raise _connect_failed(engine, error) from error


async def _connect_async(engine: AsyncEngine) -> AsyncConnection:
    """:func:`_connect` for an ``AsyncEngine``."""
    connection = engine.connect()
    try:
        await connection.start()
    except ChronicaError:
        raise
    except Exception as error:
        raise _connect_failed(engine.sync_engine, error) from error
    return connection


def _connect_failed(engine: Engine, error: Exception) -> StoreError:
    where = store_dialect_class(engine.dialect.name).connect_problem(engine.url)
    return StoreError(CONNECT, detail(error) + ("" if where is None else f" ({where})"))


def execute(connections: Connections[Engine], plan: Plan[Step, Result]) -> Result:
    """Run ``plan`` on one connection of ``connections``' blocking engine; return its result."""
    try:
        step = next(plan)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    turn = None
    try:
        try:
            turn = take_turn(connections.engine) if step.write else None
            connection = _connect(connections.source(step))
        except (SQLAlchemyError, ChronicaError) as error:
            return _thrown(plan, error)
        try:
            return run_on(connection, connections, plan, step)
        finally:
            try:
                connection.close()
            except SQLAlchemyError:
                with contextlib.suppress(SQLAlchemyError):
                    connection.invalidate()
    finally:
        if turn is not None:
            turn.give_back()


async def execute_async(connections: Connections[AsyncEngine], plan: Plan[Step, Result]) -> Result:
    """Run ``plan`` on one ``AsyncConnection`` of ``connections``' engine, through ``run_sync``."""
    try:
        step = next(plan)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    turn = None
    try:
        try:
            turn = await take_turn_async(connections.engine.sync_engine) if step.write else None
            connection = await _connect_async(connections.source(step))
        except (SQLAlchemyError, ChronicaError) as error:
            return _thrown(plan, error)
        try:
            return await connection.run_sync(run_on, connections, plan, step)
        finally:
            try:
                await connection.close()
            except SQLAlchemyError:
                with contextlib.suppress(SQLAlchemyError):
                    await connection.invalidate()
    finally:
        if turn is not None:
            turn.give_back()
