"""When a pooled connection has sat idle long enough that it must be checked before it is used.

A database server (PostgreSQL's ``idle_session_timeout``, MariaDB/MySQL's ``wait_timeout``), a
proxy or a firewall may close a connection that stays idle. A server backend borrows each pooled
connection for one operation; a connection that sat idle in the pool for less than
:func:`idle_limit` seconds is used as it is (no extra round trip), a longer idle one is checked
first (one round trip) and replaced when it turns out dead. Every server backend reads its
``check_idle_after`` option with :func:`check_idle_after_option` and asks the server its own idle
timeout when it opens a connection, with the statement of :data:`SERVER_IDLE_TIMEOUT_SQL`.
A connection the server closed (its idle timeout, an administrator's kill, a proxy that closes the
socket) is seen without a round trip, whatever its idle time, by :func:`socket_readable`: an idle
connection's socket has nothing to read unless the server sent its reason or closed it.
"""

from __future__ import annotations

import math
import select
import socket

from chronica_core.errors import InvalidOption

__all__ = [
    "CHECK_IDLE_AFTER",
    "DEFAULT_CHECK_IDLE_AFTER",
    "MAX_CHECK_IDLE_AFTER",
    "SERVER_IDLE_TIMEOUT_SQL",
    "check_idle_after_option",
    "idle_limit",
    "socket_readable",
]

CHECK_IDLE_AFTER = "check_idle_after"
"""The option's name: seconds a pooled connection may sit idle and still be used unchecked."""

DEFAULT_CHECK_IDLE_AFTER = 60.0
"""Its default, in seconds: below the idle timeouts of common proxies and load balancers."""

MAX_CHECK_IDLE_AFTER = 86_400.0
"""Its largest value, in seconds (one day)."""

SERVER_IDLE_TIMEOUT_SQL = {
    "postgresql": (
        "SELECT extract(epoch FROM current_setting('idle_session_timeout', true)::interval)::float8"
    ),
    "mysql": "SELECT @@SESSION.wait_timeout",
}
"""Per database, a query whose one value is the server's idle timeout for this session, in
seconds (0 or ``NULL``: none, e.g. PostgreSQL before 14)."""


def check_idle_after_option(backend: str, value: object) -> float:
    """Read the ``check_idle_after`` option of ``backend``: seconds, a number or its text.

    Args:
        backend: the backend's name, for the error (``"postgres"``).
        value: a number of seconds from 0 (check every borrowed connection) to
            :data:`MAX_CHECK_IDLE_AFTER`, or its text.

    Returns:
        The number of seconds.

    Raises:
        InvalidOption: ``value`` is not a number (a bool included), not finite, or out of bounds;
            the message names the option and its bounds.
    """
    try:
        if isinstance(value, bool):
            raise TypeError(value)
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        seconds = math.nan
    if not 0 <= seconds <= MAX_CHECK_IDLE_AFTER:  # NaN fails both comparisons
        raise InvalidOption(
            backend,
            CHECK_IDLE_AFTER,
            f"expected a number of seconds from 0 to {MAX_CHECK_IDLE_AFTER:g}, got {value!r}",
        )
    return seconds


def idle_limit(check_idle_after: float, server_idle_timeout: float | None) -> float:
    """Seconds a connection may sit idle in the pool before it is checked when next borrowed.

    Args:
        check_idle_after: the ``check_idle_after`` option, in seconds.
        server_idle_timeout: the server's idle timeout for the connection, in seconds, as read
            when it opened (``None`` or 0: the server closes no idle connection).

    Returns:
        ``check_idle_after``, or half the server's timeout when that is shorter (the server
        counts from the end of the last statement, a little before the pool does).
    """
    if server_idle_timeout is None or server_idle_timeout <= 0 or math.isnan(server_idle_timeout):
        return check_idle_after
    return min(check_idle_after, server_idle_timeout / 2)


def socket_readable(connection_socket: socket.socket | int | None) -> bool:
    """Whether an idle connection's socket has something to read: a message, or its end (closed).

    No round trip: one ``select`` that does not wait. Nothing arrives on an
    idle database connection unless the server sent its reason before closing it (PostgreSQL) or
    closed it (end of file). A proxy or firewall that drops a connection without closing the
    socket cannot be seen this way.

    Args:
        connection_socket: the socket, or its file descriptor, as the driver reports it;
            ``None`` when the driver has none (closed).

    Returns:
        True when something can be read, or when there is no usable socket (so the caller checks
        the connection); False when the socket is quiet.
    """
    if connection_socket is None:
        return True
    try:
        ready, _, _ = select.select([connection_socket], [], [], 0)
    except (OSError, ValueError, TypeError):
        return True  # closed or no descriptor: let the check find out
    return bool(ready)
