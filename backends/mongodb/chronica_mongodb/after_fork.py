"""The stores in a process forked after they opened (see :mod:`chronica_core.after_fork`).

pymongo's FAQ asks for a ``MongoClient`` per process: one copied into a child by ``os.fork()``
is reset by pymongo there, with a warning that it may not be entirely fork-safe. Right after the
fork, in the child, a :class:`~chronica_mongodb.MongoStore` that opened its own client marks it
inherited, and its first operation there opens a client of the child's own (the inherited one
is dropped, not closed: it was the parent's). A client given by the caller stays the caller's
(pymongo resets it in the child). Either store forgets the follower's watcher, whose thread does
not exist in the child. The asyncio store's per-loop clients belong to the parent's event loops,
which the child never runs: they are forgotten (:class:`chronica_core.loops.PerLoop`), and a
loop of the child's opens its own.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["forget_parent", "own_client"]


def forget_parent(store: Any) -> None:
    """In the child, right after the fork: forget the watcher; mark a client the store opened inherited.

    Args:
        store: a :class:`~chronica_mongodb.MongoStore` or :class:`~chronica_mongodb.AsyncMongoStore`.
    """
    store._watcher = None
    if hasattr(store, "_inherited_client"):
        store._inherited_client = store._owns_client
        store._opening_own_client = threading.Lock()


def own_client(store: Any) -> None:
    """In the child, on a :class:`~chronica_mongodb.MongoStore`'s first operation: a client of its own."""
    with store._opening_own_client:
        if store._inherited_client:
            store.client = store._new_client()
            store.database = store.client.get_database(
                store.database.name, codec_options=store.database.codec_options
            )
            store._inherited_client = False
