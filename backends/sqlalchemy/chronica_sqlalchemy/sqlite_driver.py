"""SQLite statements run by the standard library's driver itself, compiled once by SQLAlchemy.

SQLAlchemy's execution of a statement (its execution context, events, result object, row
processing) costs several times what SQLite takes to run a short one. On ``pysqlite`` the hot
statements of a write (moving the chronicum's counter, inserting the actum) are compiled once
into a :class:`DriverStatement` and run on the pooled connection's ``sqlite3.Connection``: their
text, and their parameters put in order and converted by the same bind processors SQLAlchemy
would apply. The transaction stays SQLAlchemy's (it begins with ``BEGIN IMMEDIATE`` in the
writer's turn and commits or rolls back as any other), and a failure is the ``DBAPIError``
SQLAlchemy would have raised, so the plans translate it as they translate every other. A write
spends its turn on the file's lock mostly in SQLite then, not in Python.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.base import Executable

__all__ = ["BEGIN_IMMEDIATE", "DriverRun", "DriverStatement", "begin_immediate", "driver_rows"]

BEGIN_IMMEDIATE = "BEGIN IMMEDIATE"
"""How a writing connection begins: it waits for the write lock up front (under the busy timeout)."""


@dataclass(frozen=True)
class DriverStatement:
    """A statement as SQLite's own driver runs it: its text, and how its parameters are bound.

    Attributes:
        text: the statement's SQL, with ``?`` placeholders.
        names: the parameter of each placeholder, in order.
        processors: each placeholder's bind processor (``None``: the value goes as it is), as
            SQLAlchemy's type of that parameter gives it on the dialect.
        dialect: the dialect it was compiled for (it reads the driver's errors).
    """

    text: str
    names: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]
    dialect: Dialect

    @classmethod
    def compiled(
        cls, statement: Executable, dialect: Dialect, column_keys: Sequence[str] | None = None
    ) -> DriverStatement | None:
        """Compile ``statement`` for ``dialect``; ``None`` when its text is not fixed before execution.

        Args:
            statement: a Core statement whose parameters are all named bind parameters.
            dialect: a ``pysqlite`` dialect.
            column_keys: for an ``INSERT`` without values of its own, the columns the parameters
                name (as SQLAlchemy compiles it for an execution with those parameters).

        A statement that renders a parameter into its text at execution time, or fixes a value
        itself, is not handed to the driver (``None``: SQLAlchemy runs it).
        """
        compiled: Any = cast(Any, statement).compile(
            dialect=dialect, column_keys=None if column_keys is None else list(column_keys)
        )
        if compiled.positiontup is None or compiled.literal_execute_params or compiled.post_compile_params:
            return None
        names = tuple(compiled.positiontup)
        binds = compiled.binds
        if any(_fixes_a_value(binds[name]) for name in names):
            return None
        processors = tuple(binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names)
        return cls(compiled.string, names, processors, dialect)

    def values(self, parameters: dict[str, Any]) -> list[Any]:
        """The placeholders' values from ``parameters`` (``KeyError`` for a missing one), bound."""
        return [
            parameters[name] if process is None else process(parameters[name])
            for name, process in zip(self.names, self.processors, strict=True)
        ]

    def rows(self, driver_connection: Any, parameters: dict[str, Any]) -> list[Any]:
        """Run the statement on ``driver_connection`` (a ``sqlite3.Connection``); every row it gives.

        Raises:
            sqlalchemy.exc.DBAPIError: the driver's error wrapped as SQLAlchemy would wrap it
                (``IntegrityError`` for a constraint, ``OperationalError`` for "database is
                locked"...), marked as a lost connection when the dialect reads it as one.
        """
        values = self.values(parameters)
        try:
            return driver_rows(driver_connection, self.text, values)
        except sqlite3.Error as error:
            lost = self.dialect.is_disconnect(cast(Any, error), None, None)
            raise DBAPIError.instance(
                self.text, values, error, sqlite3.Error, connection_invalidated=lost
            ) from error


@dataclass(frozen=True)
class DriverRun:
    """One run of a :class:`DriverStatement` with its parameters: a plan's driver-call argument.

    Called with the driver's connection, it returns the rows. The statement and its parameters
    stay visible in the plan's step (plans can be inspected and rewritten, as the conformance
    suite's ``RedirectedPlans`` does).
    """

    statement: DriverStatement
    parameters: dict[str, Any]

    def __call__(self, driver_connection: Any) -> list[Any]:
        """The rows; raises as :meth:`DriverStatement.rows`."""
        return self.statement.rows(driver_connection, self.parameters)


def begin_immediate(driver_connection: sqlite3.Connection, dialect: Dialect) -> None:
    """Send ``BEGIN IMMEDIATE`` on ``driver_connection``, the driver's own call.

    Raises ``DBAPIError`` as :meth:`DriverStatement.rows` does (``OperationalError`` "database
    is locked" when another process held the lock past the busy timeout).
    """
    DriverStatement(BEGIN_IMMEDIATE, (), (), dialect).rows(driver_connection, {})


def _fixes_a_value(bind: Any) -> bool:
    """Whether ``bind`` carries a value of its own (given when the statement was built)."""
    return bool(bind.callable is not None or (bind.value is not None and not bind.required))


def driver_rows(driver_connection: sqlite3.Connection, text: str, values: list[Any]) -> list[Any]:
    """Every row ``text`` gives with ``values`` on ``driver_connection`` (the driver's own call)."""
    return driver_connection.execute(text, values).fetchall()
