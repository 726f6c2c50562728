"""What a store does in a child process made by ``os.fork()`` after the store was opened.

gunicorn ``--preload``, Celery's prefork pool and ``multiprocessing`` with the ``fork`` start
method copy a process with its open stores. The child's copy of a driver's pool holds the parent's
sockets: a query sent on one interleaves with the parent's on the wire (each process reading the
other's answers, or waiting for ever), and closing it ends the parent's session. Its threads (pool
workers, a follower's listener) do not exist in the child, and a lock one of them held stays held.
The drivers ask for connections of the child's own (psycopg: a pool per process; SQLAlchemy's
"Using Connection Pools with Multiprocessing or os.fork()": ``engine.dispose(close=False)``;
pymongo's FAQ: a ``MongoClient`` per process).

A store registers with :func:`renew_after_fork` what its copy does in the child: drop what it
inherited without closing it (the parent still uses those sockets), forget its threads, and make
new locks. Connections are opened on the next use, not in the hook: the hook runs right after
``fork()`` in the child's only thread, before anything else, also in a child that never uses the
store (or execs soon, as ``subprocess`` with ``preexec_fn`` does).

An event loop does not survive a fork: the child runs a loop of its own (``asyncio.run()``), in
which an asyncio store opens its own resources (:class:`chronica_core.loops.PerLoop` forgets the
parent's loops in the child, unclosed). A child that goes on running the parent's loop (a fork
inside a coroutine) shares its selector with the parent, which asyncio does not support.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["keep_inherited", "renew_after_fork"]

Owner = TypeVar("Owner")

_log = logging.getLogger("chronica")

_RENEWALS: weakref.WeakKeyDictionary[Any, list[Callable[[Any], None]]] = weakref.WeakKeyDictionary()
"""Per living owner (a store, a per-loop table), what to call on it in a forked child."""


def renew_after_fork(owner: Owner, renew: Callable[[Owner], None]) -> None:
    """Call ``renew(owner)`` in every child process forked from this one while ``owner`` lives.

    Args:
        owner: the object whose copy is renewed (held weakly: registering keeps nothing alive).
        renew: called with the child's copy of ``owner``, in the child, right after ``fork()``,
            in registration order; it must do no I/O and start no thread (see the module). It
            should not raise: what it raises is logged on the ``chronica`` logger and the next
            hook still runs.
    """
    _RENEWALS.setdefault(owner, []).append(renew)


_INHERITED: list[object] = []
"""What children of this process inherited and must never finalize (see :func:`keep_inherited`)."""


def keep_inherited(inherited: object) -> None:
    """Keep ``inherited`` alive for the rest of this (forked) process, so that nothing finalizes it.

    A hook calls it with what it drops: the finalizer of a parent's client may close its sockets
    through the parent's event loop, whose selector (an epoll instance) the child shares with the
    parent, and so stop the parent's loop from hearing its own sockets.

    Args:
        inherited: any object the child inherited and stops using.
    """
    _INHERITED.append(inherited)


def _renew_in_child() -> None:
    for owner, renewals in list(_RENEWALS.items()):
        for renew in renewals:
            try:
                renew(owner)
            except Exception:  # noqa: BLE001 - logged; the other stores' hooks must still run
                _log.exception("renewing %s after fork failed", type(owner).__name__)


os.register_at_fork(after_in_child=_renew_in_child)
