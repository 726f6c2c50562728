"""Which pooled connections must be checked before use: those idle too long, or closed by the server.

A server may close a connection that sits idle in the pool (PostgreSQL's ``idle_session_timeout``,
a proxy that drops idle connections). :class:`IdleConnections` remembers, for every connection
the store borrowed or opened, since when it is idle and how long it may stay so
(:func:`chronica_core.idle.idle_limit`: the ``check_idle_after`` option, or half the server's
``idle_session_timeout`` when shorter). :meth:`IdleConnections.stale` then says, without a round
trip, whether a borrowed connection needs checking first: it sat idle longer than that, the
server already sent something on it (PostgreSQL sends its reason before it closes an idle
connection; a closed socket reads as end of file), or the store never saw it (a pool given by the
caller). A busy pool is never checked.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import psycopg

from chronica_core.idle import SERVER_IDLE_TIMEOUT_SQL, idle_limit, socket_readable
from chronica_core.plan_cache import GENERIC_PLANS_SQL
from chronica_postgres.schema import SET_UTC

__all__ = ["CONFIGURE_SQL", "CONFIGURE_UNPREPARED_SQL", "IdleConnections", "idle_timeout_seconds"]

CONFIGURE_SQL = b"; ".join(
    (SET_UTC, SERVER_IDLE_TIMEOUT_SQL["postgresql"].encode(), GENERIC_PLANS_SQL.encode())
)
"""Run once on each new connection of a pool the store opens (one round trip): answer in UTC, say
the server's idle timeout in seconds (the second result), and keep one generic plan per prepared
statement (:data:`chronica_core.plan_cache.GENERIC_PLANS_SQL`: without it, PostgreSQL would plan
every context-window read again once the tables have statistics)."""

CONFIGURE_UNPREPARED_SQL = b"; ".join((SET_UTC, SERVER_IDLE_TIMEOUT_SQL["postgresql"].encode()))
""":data:`CONFIGURE_SQL` without the plan cache setting, for a pool whose connections prepare
nothing: the setting is of no use to them, and behind a transaction pooler it would stay on the
server connection for the pooler's other clients (the pooler restores their time zone, which it
tracks, but not that)."""


class IdleConnections:
    """Since when each connection is idle, and how long it may stay so before it is checked.

    Args:
        check_after: the ``check_idle_after`` option, in seconds.
    """

    def __init__(self, check_after: float) -> None:
        self.check_after = check_after
        # Per connection: [idle since (time.monotonic()), the limit in seconds]. A list, updated
        # in place: each return of a connection costs one lookup, not a new weak reference.
        self._idle: weakref.WeakKeyDictionary[Any, list[float]] = weakref.WeakKeyDictionary()

    def opened(self, connection: Any, server_idle_timeout: float | None) -> None:
        """Remember a new ``connection`` whose server closes it after ``server_idle_timeout`` idle seconds."""
        self._idle[connection] = [time.monotonic(), idle_limit(self.check_after, server_idle_timeout)]

    def returned(self, connection: Any) -> None:
        """Note that ``connection`` goes back to the pool now (idle from now on)."""
        known = self._idle.get(connection)
        if known is None:
            self._idle[connection] = [time.monotonic(), self.check_after]
        else:
            known[0] = time.monotonic()

    def stale(self, connection: Any) -> bool:
        """Whether ``connection`` must be checked (one round trip) before it is used.

        True when it sat idle longer than its limit, when the server sent something on it while
        it was idle (or closed it), or when the store never saw it.
        """
        known = self._idle.get(connection)
        if known is None:
            return True
        since, limit = known
        return time.monotonic() - since >= limit or _readable(connection)


def _readable(connection: Any) -> bool:
    """Whether an idle connection's socket has something to read: a message, or its end."""
    try:
        fileno = connection.pgconn.socket
    except psycopg.Error:
        return True  # closed: let the check find out
    return socket_readable(fileno)


def idle_timeout_seconds(row: tuple[Any, ...] | None) -> float | None:
    """The server's idle timeout in the second result of :data:`CONFIGURE_SQL`: seconds, or ``None``."""
    return None if row is None or row[0] is None else float(row[0])
