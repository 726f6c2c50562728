"""Reads of the asyncio store on SQLite, each on a connection its worker thread keeps.

:class:`chronica_sqlalchemy.AsyncThreadedSQLAlchemyStore` runs every operation whole on one of
its worker threads. A context window on ``pysqlite`` is one statement run by the driver itself
(:class:`chronica_sqlalchemy.driver_statements.DriverStatement`); taking a pooled connection through a
SQLAlchemy ``Connection`` and giving it back around it cost about a third of the whole read. Here
each worker thread keeps one pooled connection for those reads instead (a file's reads never
wait on its writers in WAL mode, so a kept connection holds no lock between them): the same plan
runs on it, with the same errors, the same retry on a lost connection, and the same checks of
the rows. A connection on which a step failed is ended, as
:func:`chronica_sqlalchemy.plans.execute_plan` ends one, and the next read takes a new one.
Writes and every other operation still take their connection from the pool for the operation.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import PoolProxiedConnection

from chronica_core.errors import ChronicaError, StoreError
from chronica_core.plans import Plan, run_plan
from chronica_sqlalchemy.driver_statements import DriverRun
from chronica_sqlalchemy.plans import CONNECT, DRIVER_CALL, DROP_CONNECTION, RECONNECT, Step

__all__ = ["HeldReads"]

Result = TypeVar("Result")


class HeldReads:
    """One pooled connection per worker thread, kept for the reads that run on SQLite's driver.

    Args:
        engine: the store's blocking engine (``pysqlite``).
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._local = threading.local()
        self._guard = threading.Lock()
        self._held: set[PoolProxiedConnection] = set()

    def run(self, plan: Plan[Step, Result]) -> Result:
        """Run ``plan``, a read of driver calls only, on the calling thread's kept connection.

        Returns the plan's result. A failure to connect is thrown into the plan as
        ``StoreError("sqlalchemy: connect", ...)``, as
        :func:`~chronica_sqlalchemy.plans.execute_plan` throws it.

        Raises:
            TypeError: the plan asked for something else than a read by the driver (a plan that
                is no such read must go to ``execute_plan``); nothing was run for that step.
        """
        failed = False

        def perform(step: Step) -> Any:
            nonlocal failed
            if step.method in (RECONNECT.method, DROP_CONNECTION.method):
                self._end()
                failed = False
                return None
            if step.method != DRIVER_CALL or step.write:
                raise TypeError(f"a held read performs reads by the driver only, not {step.method!r}")
            connection = self._connection()
            call = step.args[0]
            if isinstance(call, DriverRun):
                call.echo(self._engine)
            try:
                return call(connection.driver_connection)
            except SQLAlchemyError:
                failed = True
                raise

        try:
            return run_plan(plan, perform)
        finally:
            if failed:
                self._end()

    def close(self) -> None:
        """Give every kept connection back to the pool (after the worker threads are done)."""
        with self._guard:
            held, self._held = self._held, set()
        for connection in held:
            with contextlib.suppress(SQLAlchemyError):
                connection.close()

    def _connection(self) -> PoolProxiedConnection:
        connection: PoolProxiedConnection | None = getattr(self._local, "connection", None)
        if connection is not None:
            return connection
        try:
            connection = self._engine.raw_connection()
        except ChronicaError:
            raise
        except Exception as error:  # reported as execute_plan reports it, whatever was raised
            cause = error.orig if isinstance(error, DBAPIError) and error.orig is not None else error
            raise StoreError(CONNECT, f"{type(cause).__name__}: {cause}".strip()) from error
        self._local.connection = connection
        with self._guard:
            self._held.add(connection)
        return connection

    def _end(self) -> None:
        """End the calling thread's kept connection, if any: the pool replaces it."""
        connection: PoolProxiedConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            return
        self._local.connection = None
        with self._guard:
            self._held.discard(connection)
        with contextlib.suppress(SQLAlchemyError):
            connection.invalidate()
        with contextlib.suppress(SQLAlchemyError):
            connection.close()
