"""Which driver errors are conflicts: the database rolled the try back, so it may go again.

- PostgreSQL (psycopg): SQLSTATE 40001 (``could not serialize access``, at SERIALIZABLE or
  REPEATABLE READ) and 40P01 (a deadlock's victim); the server rolls the whole transaction back,
  whether the error comes from a statement or from ``COMMIT``.
- MariaDB/MySQL (PyMySQL, asyncmy): 1213 (``Deadlock found``; also what a Galera node answers
  when certification refuses a transaction that conflicts with one committed through another
  node), after which InnoDB has rolled the whole transaction back; and 1205 (``Lock wait timeout
  exceeded``), after which InnoDB rolls back only the statement that waited (unless
  ``innodb_rollback_on_timeout``) and leaves the transaction open. 1205 is a conflict here
  because this backend never commits after a failed statement: every write of MariaDB's is one
  transaction, which the failure ends with a rollback before anything else runs on the
  connection, so nothing of the try is committed either way.
- SQLite: none (a writer waits for the file's lock; ``database is locked`` is not retried).

The store raises :class:`~chronica_core.StoreConflict` for these (see :func:`.steps.translated`),
and ``Chronicarius`` tries the operation again (see :mod:`chronica_core.conflicts`).
"""

from __future__ import annotations

from typing import Final

from sqlalchemy.exc import DBAPIError, SQLAlchemyError

__all__ = ["MYSQL_CONFLICT_CODES", "POSTGRESQL_CONFLICT_STATES", "conflicted"]

POSTGRESQL_CONFLICT_STATES: Final = frozenset({"40001", "40P01"})
"""serialization_failure and deadlock_detected."""
MYSQL_CONFLICT_CODES: Final = frozenset({1205, 1213})
"""ER_LOCK_WAIT_TIMEOUT and ER_LOCK_DEADLOCK."""
_MYSQL_DRIVERS: Final = ("pymysql", "asyncmy", "MySQLdb", "mariadb")
"""The packages whose exceptions carry MariaDB's error code as their first argument."""


def conflicted(error: SQLAlchemyError) -> bool:
    """Whether the database rolled back ``error``'s try for a conflict with a concurrent transaction."""
    if not isinstance(error, DBAPIError) or error.orig is None:
        return False
    driver_error = error.orig
    state = getattr(driver_error, "sqlstate", None)
    if isinstance(state, str):
        return state in POSTGRESQL_CONFLICT_STATES
    if type(driver_error).__module__.split(".")[0] not in _MYSQL_DRIVERS:
        return False
    code = driver_error.args[0] if driver_error.args else None
    return isinstance(code, int) and code in MYSQL_CONFLICT_CODES
