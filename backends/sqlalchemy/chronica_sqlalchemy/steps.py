"""What a plan asks of its connection: the steps, and the error handling every plan shares.

A plan (see :mod:`chronica_core.plans`) yields :class:`Step` values; :mod:`.executor` performs
each on one SQLAlchemy ``Connection`` and sends back its outcome (a ``CursorResult`` for
``execute``) or throws in its error. The first step says what connection the plan needs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, Executable
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from chronica_core.errors import ChronicaError, StoreConflict, StoreError
from chronica_core.plans import Plan
from chronica_sqlalchemy.conflicts import conflicted

__all__ = [
    "CALL",
    "COMMIT",
    "CONNECT",
    "DROP_CONNECTION",
    "RECONNECT",
    "ROLLBACK",
    "Step",
    "again_if_disconnected",
    "call",
    "detail",
    "execute",
    "translated",
]

Result = TypeVar("Result")

_log = logging.getLogger("chronica.sqlalchemy")

CONNECT = "sqlalchemy: connect"
"""Where a failure to connect is reported, whichever operation needed the connection."""

CALL = "call"
"""The method of a step whose one argument is called with the plan's ``Connection``."""


class Step(NamedTuple):
    """One thing to do on the plan's connection: its ``Connection`` method ``method`` with ``args``.

    Attributes:
        method: ``"execute"``, ``"commit"``, ``"rollback"``, ``"invalidate"``, or :data:`CALL`.
        args: the arguments, e.g. ``(statement, parameters)`` for ``execute``.
        write: whether the plan writes (SQLite: the connection takes the file's writer turn and
            begins with ``BEGIN IMMEDIATE``). Only the first step's flag counts.
        autocommit: whether the plan's statements each run as their own transaction, in the
            driver's autocommit mode. Only the first step's flag counts.
    """

    method: str
    args: tuple[Any, ...] = ()
    write: bool = False
    autocommit: bool = False


COMMIT = Step("commit")
ROLLBACK = Step("rollback")
RECONNECT = ROLLBACK
"""After SQLAlchemy found the connection lost: end what it began; the next step reconnects."""
DROP_CONNECTION = Step("invalidate")
"""End the connection's session (what it holds on the server goes with it); the pool replaces it."""


def execute(
    statement: Executable, parameters: Any = None, *, write: bool = False, autocommit: bool = False
) -> Step:
    """The step running ``statement`` with ``parameters`` (a dict, or a list of them for executemany)."""
    return Step("execute", (statement, {} if parameters is None else parameters), write, autocommit)


def call(function: Callable[[Connection], Any], *, write: bool = False) -> Step:
    """The step calling ``function`` with the plan's ``Connection`` (for what is no statement)."""
    return Step(CALL, (function,), write)


def detail(error: BaseException) -> str:
    """The driver's own message, without SQLAlchemy's echo of the statement and its parameters."""
    if isinstance(error, DBAPIError) and error.orig is not None:
        return f"{type(error.orig).__name__}: {error.orig}".strip()
    return f"{type(error).__name__}: {error}"


def translated(operation: str, plan: Plan[Step, Result]) -> Plan[Step, Result]:
    """Run ``plan``, turning any SQLAlchemy error into ``StoreError("sqlalchemy: <operation>", ...)``.

    A conflict the database rolled back (:mod:`.conflicts`) becomes ``StoreConflict``.
    """
    try:
        return (yield from plan)
    except ChronicaError:
        raise
    except SQLAlchemyError as error:
        failed = StoreConflict if conflicted(error) else StoreError
        raise failed(f"sqlalchemy: {operation}", detail(error)) from error


def again_if_disconnected(make: Callable[[], Plan[Step, Result]]) -> Plan[Step, Result]:
    """Run the plan ``make()`` gives; after a lost connection, once more on a new one.

    Only for plans safe to repeat: reads, and keyed writes (the repeat finds the actum the first
    try stored, if it did). A connection is lost when SQLAlchemy says so (``connection_invalidated``);
    the second try's error propagates.
    """
    try:
        return (yield from make())
    except DBAPIError as error:
        if not error.connection_invalidated:
            raise
        lost = type(error.orig if error.orig is not None else error).__name__
    _log.warning("lost the connection (%s); trying the read or keyed write once more on a new one", lost)
    yield RECONNECT
    return (yield from make())
