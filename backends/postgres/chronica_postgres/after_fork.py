"""A blocking :class:`~chronica_postgres.PostgresStore` in a process forked after it opened.

The child's copy of the store's pool holds the parent's sockets and the parent's (absent) worker
threads: used there, a query could read another process's answer, or wait for ever. Right after
the fork (:func:`chronica_core.after_fork.renew_after_fork`) the copy is only marked inherited and
the follower's listener forgotten; the first operation in the child then opens a pool of the
child's own, the inherited one left unclosed (closing it would end the parent's sessions; psycopg
never closes a connection of another process when it is freed). A pool given by the caller cannot
be replaced: the child's operations refuse with a ``StoreError``. The asyncio store's pools belong
to event loops, which do not survive a fork (see :class:`chronica_core.loops.PerLoop`): the child's
loops open pools of their own.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from chronica_core.errors import StoreError

if TYPE_CHECKING:
    from chronica_postgres.store import AsyncPostgresStore, PostgresStore

__all__ = ["GIVEN_POOL_REFUSAL", "forget_parent", "forget_parent_listeners", "own_pool"]

GIVEN_POOL_REFUSAL = (
    "the store was opened with a pool of the caller's before this process was forked, and a pool "
    "cannot serve two processes: open a store (or give a pool) per process, after the fork"
)


def forget_parent(store: PostgresStore) -> None:
    """In the child, right after the fork: mark the pool inherited, forget the listener, new locks."""
    store._inherited_pool = True
    store._opening_own_pool = threading.Lock()
    store._listener = None


def forget_parent_listeners(store: AsyncPostgresStore) -> None:
    """In the child of an asyncio store: forget the parent's loops' listeners (those loops never run here)."""
    store._listeners = None


def own_pool(store: PostgresStore) -> None:
    """In the child, on the first operation: open the child's own pool in place of the inherited one.

    Raises:
        StoreError: ``"postgres: store"`` when the pool was the caller's (see
            :data:`GIVEN_POOL_REFUSAL`).
    """
    with store._opening_own_pool:
        if not store._inherited_pool:
            return
        if not store._owns_pool:
            raise StoreError("postgres: store", GIVEN_POOL_REFUSAL)
        store._pool = store._open_pool()
        store._inherited_pool = False
