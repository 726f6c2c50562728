"""The driver's faults for the conformance suite's driver-failure group (``chronica.driver_faults``).

Loaded only by the conformance suite (chronica-conformance), which the group needs: the suite
runs the group on this backend's URLs with :class:`SQLAlchemyFaults`, as the backend's own tests do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from chronica_conformance import FailureKind, Injection
from sqlalchemy import Dialect, Engine, event

__all__ = ["SQLAlchemyFaults", "dbapi_failure"]


_FAILURES: dict[str, dict[FailureKind, tuple[Any, ...]]] = {
    "mysql": {
        "connection_reset": (2013, "Lost connection to MySQL server during query"),
        "server_gone": (2006, "MySQL server has gone away"),
        "statement_timeout": (1969, "Query execution was interrupted (max_statement_time exceeded)"),
    },
    "postgresql": {
        "connection_reset": ("consuming input failed: server closed the connection unexpectedly",),
        "server_gone": ("terminating connection due to administrator command",),
        "statement_timeout": ("canceling statement due to statement timeout",),
    },
    "sqlite": {
        "connection_reset": ("disk I/O error",),
        "server_gone": ("unable to open database file",),
        "statement_timeout": ("database is locked",),
    },
}
"""The driver's words for each failure, per database (MariaDB's error codes first)."""


def dbapi_failure(dialect: Dialect, kind: FailureKind) -> Exception:
    """The DBAPI driver's own exception for ``kind`` (psycopg's ``QueryCanceled`` for a timeout)."""
    name = "mysql" if dialect.name in ("mysql", "mariadb") else dialect.name
    if name == "postgresql" and kind == "statement_timeout":
        import psycopg

        return psycopg.errors.QueryCanceled(*_FAILURES[name][kind])
    error_class: type[Exception] = dialect.loaded_dbapi.OperationalError
    return error_class(*_FAILURES[name][kind])


class SQLAlchemyFaults:
    """Makes the DBAPI calls of a chronica-sqlalchemy store fail (see ``DriverFaults``).

    An in-memory SQLite database skips the group (a failure leaves nothing to go on with); a file
    runs it. While an injection is active, every statement (the dialect's ``do_execute`` events), commit
    and rollback on the store's engines (its ``engine``, and on MariaDB its ``read_engine``)
    counts as a driver call (a rollback SQLAlchemy
    skips in autocommit does not); a failing one raises the DBAPI
    driver's exception for the kind, and on a server, for a reset or a gone server, first closes
    the DBAPI connection, as the server would have.
    """

    @contextlib.contextmanager
    def inject(
        self, store: Any, kind: FailureKind, *, after: int = 0, times: int | None = None
    ) -> Iterator[Injection]:
        """Make ``store``'s driver fail while the context is open (see ``DriverFaults.inject``).

        ``times``: how many calls fail after the first ``after`` (``None``: every later one).
        """
        """Make ``store``'s driver fail while the context is open (see ``DriverFaults.inject``).

        ``times``: how many calls fail after the first ``after`` (``None``: every later one).
        """
        injection = Injection(kind, after, times)
        engines: list[Engine] = [
            getattr(engine, "sync_engine", engine)
            for engine in (store.engine, getattr(store, "read_engine", None))
            if engine is not None
        ]
        dialect = engines[0].dialect
        server = dialect.name != "sqlite"
        url = engines[0].url
        if not server and (url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"):
            pytest.skip(
                "an in-memory SQLite database lives in its one connection, which a driver failure "
                "leaves unusable (nothing survives it); run the group on a file: sqlite:///path.db"
            )

        def fail(dbapi_connection: Any) -> None:
            failing = injection.next_call()
            if failing is None:
                return
            error = injection.raised_now(dbapi_failure(dialect, failing))
            if server and failing != "statement_timeout":  # the driver's own connection, not the pool's proxy
                getattr(dbapi_connection, "dbapi_connection", dbapi_connection).close()
            raise error

        def on_execute(cursor: Any, statement: Any, parameters: Any, context: Any) -> bool:
            fail(context.root_connection.connection.dbapi_connection)
            return False  # not handled here: the dialect executes it

        def on_execute_no_params(cursor: Any, statement: Any, context: Any) -> bool:
            return on_execute(cursor, statement, None, context)

        def commit_of(real_commit: Callable[[Any], None]) -> Callable[[Any], None]:
            def commit(dbapi_connection: Any) -> None:
                fail(dbapi_connection)
                real_commit(dbapi_connection)

            return commit

        def rollback_of(engine: Engine) -> Callable[[Any], None]:
            real_rollback, autocommit = engine.dialect.do_rollback, engine.dialect.skip_autocommit_rollback

            def rollback(dbapi_connection: Any) -> None:
                if autocommit and engine.dialect.detect_autocommit_setting(dbapi_connection):
                    return  # skipped by SQLAlchemy, sent to no driver (see skip_autocommit_rollback)
                fail(dbapi_connection)
                real_rollback(dbapi_connection)

            return rollback

        listeners: list[tuple[str, Callable[..., Any]]] = [
            ("do_execute", on_execute),
            ("do_executemany", on_execute),
            ("do_execute_no_params", on_execute_no_params),
        ]
        for engine in engines:
            for name, listener in listeners:
                event.listen(engine, name, listener)
        try:
            with pytest.MonkeyPatch.context() as patch:
                for engine in engines:
                    patch.setattr(engine.dialect, "do_commit", commit_of(engine.dialect.do_commit))
                    patch.setattr(engine.dialect, "do_rollback", rollback_of(engine))
                yield injection
        finally:
            for engine in engines:
                for name, listener in listeners:
                    event.remove(engine, name, listener)
