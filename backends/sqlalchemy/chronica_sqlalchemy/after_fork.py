"""The stores in a process forked after they opened (see :mod:`chronica_core.after_fork`).

Right after the fork, in the child, SQLAlchemy's own advice for a pool inherited across
``os.fork()`` is followed: each engine of the store's is disposed of with ``close=False``, so that
the child opens connections of its own on next use and never touches (nor closes) the parent's.
An in-memory SQLite database is the exception: its one connection is the database, and the
child's copy of it is the child's own (as with ``memory://``). The follower's watcher thread and
the asyncio store on threads' worker threads do not exist in the child: both are made anew on next
use. The asyncio store's per-loop engines belong to the parent's event loops, which the child never
runs: they are forgotten (:class:`chronica_core.loops.PerLoop`), and a loop of the child's gets
engines of its own.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["forget_parent"]


def forget_parent(store: Any) -> None:
    """In the child, right after the fork: the store's engines renewed, its threads and locks new.

    Args:
        store: a :class:`~chronica_sqlalchemy.SQLAlchemyStore`,
            :class:`~chronica_sqlalchemy.AsyncSQLAlchemyStore` or
            :class:`~chronica_sqlalchemy.AsyncThreadedSQLAlchemyStore`.
    """
    for engine in (getattr(store, "engine", None), getattr(store, "read_engine", None)):
        blocking = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
        if isinstance(blocking, Engine) and not _in_memory(blocking):
            blocking.dispose(close=False)
    store._watcher = None
    if hasattr(store, "_lending"):  # the asyncio store: no loop of the child's uses its engine yet
        store._lending = threading.Lock()
        store._engine_lent = False
    if hasattr(store, "_executor"):  # the asyncio store on threads: the parent's threads are gone
        store._executor = ThreadPoolExecutor(
            max_workers=store.workers, thread_name_prefix="chronica-sqlalchemy"
        )


def _in_memory(engine: Engine) -> bool:
    database = engine.url.database
    return engine.dialect.name == "sqlite" and (
        database in (None, "", ":memory:") or engine.url.query.get("mode") == "memory"
    )
