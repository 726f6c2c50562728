"""The driver's faults for the conformance suite's driver-failure group (``chronica.driver_faults``).

Loaded only by the conformance suite (chronica-conformance), which the group needs: the suite
runs the group on ``postgresql://`` with :class:`PsycopgFaults`, as the backend's own tests do.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from chronica_conformance import FailureKind, Injection

from chronica_postgres.store import AsyncPostgresStore, PostgresStore

__all__ = ["PsycopgFaults", "psycopg_failure"]


def psycopg_failure(kind: FailureKind) -> psycopg.Error:
    """Psycopg's own exception for ``kind``, as libpq words it."""
    if kind == "statement_timeout":
        return psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
    if kind == "connection_reset":
        return psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")
    return psycopg.OperationalError(
        'connection to server at "127.0.0.1", port 5432 failed: FATAL:  terminating connection due to '
        "administrator command"
    )


class PsycopgFaults:
    """Makes the statements of a chronica-postgres store fail (see ``DriverFaults``).

    While an injection is active, ``execute`` on a cursor of a connection the store borrowed from
    its pool counts as a driver call (a kept cursor included; ``Connection.execute`` and
    ``AsyncConnection.execute`` go through one too); a failing one raises psycopg's exception for the
    kind, and for a reset or a gone server first closes the connection, as the server would have
    (the pool drops it).
    """

    @contextlib.contextmanager
    def inject(
        self,
        store: PostgresStore | AsyncPostgresStore,
        kind: FailureKind,
        *,
        after: int = 0,
        times: int | None = None,
    ) -> Iterator[Injection]:
        """Make ``store``'s driver fail while the context is open (see ``DriverFaults.inject``).

        ``times``: how many calls fail after the first ``after`` (``None``: every later one).
        """
        injection = Injection(kind, after, times)
        borrowed: weakref.WeakSet[Any] = weakref.WeakSet()
        real_borrow = store._borrow  # the store's own connections only

        def fail(connection: Any) -> psycopg.Error | None:
            if connection not in borrowed:
                return None
            failing = injection.next_call()
            if failing is None:
                return None
            error = psycopg_failure(failing)
            injection.raised_now(error)
            return error

        sync_execute, async_execute = psycopg.Cursor.execute, psycopg.AsyncCursor.execute

        def execute(cursor: Any, *arguments: Any, **keywords: Any) -> Any:
            error = fail(cursor.connection)
            if error is not None:
                if kind != "statement_timeout":
                    cursor.connection.close()
                raise error
            return sync_execute(cursor, *arguments, **keywords)

        async def execute_async(cursor: Any, *arguments: Any, **keywords: Any) -> Any:
            error = fail(cursor.connection)
            if error is not None:
                if kind != "statement_timeout":
                    await cursor.connection.close()
                raise error
            return await async_execute(cursor, *arguments, **keywords)

        def borrow(*arguments: Any) -> Any:
            connection = real_borrow(*arguments)
            borrowed.add(connection)
            return connection

        async def borrow_async(*arguments: Any) -> Any:
            connection = await real_borrow(*arguments)  # type: ignore[misc]
            borrowed.add(connection)
            return connection

        is_async = isinstance(store, AsyncPostgresStore)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(store, "_borrow", borrow_async if is_async else borrow)
            patch.setattr(psycopg.Cursor, "execute", execute)
            patch.setattr(psycopg.AsyncCursor, "execute", execute_async)
            yield injection
