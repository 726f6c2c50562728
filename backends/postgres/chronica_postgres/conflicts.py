"""Which psycopg errors are conflicts: the database rolled the transaction back, try it again.

PostgreSQL answers a transaction that cannot be serialized with concurrent ones (SQLSTATE 40001,
``could not serialize access``: at ``default_transaction_isolation`` SERIALIZABLE or REPEATABLE
READ) or that it chose as a deadlock's victim (40P01) by rolling it back, whether the error comes
from a statement or from ``COMMIT``. Every operation of the store is one autocommitted statement or
one transaction, so after either error nothing of it was written: the store raises
:class:`~chronica_core.StoreConflict` and ``Chronicarius`` tries the operation again (see
:mod:`chronica_core.conflicts`), an unkeyed append too.
"""

from __future__ import annotations

from typing import Final

import psycopg

__all__ = ["CONFLICT_STATES", "conflicted"]

CONFLICT_STATES: Final = frozenset({"40001", "40P01"})
"""serialization_failure and deadlock_detected."""


def conflicted(error: psycopg.Error) -> bool:
    """Whether the server rolled back ``error``'s transaction for a conflict with a concurrent one."""
    return error.sqlstate in CONFLICT_STATES
