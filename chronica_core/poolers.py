"""Connection poolers before PostgreSQL (PgBouncer, hosted poolers): the options and how one is found.

A transaction pooler (PgBouncer's ``pool_mode = transaction``, what hosted PostgreSQL poolers
run) hands each transaction of a client connection to whichever server connection is free. What
a session keeps does not follow the client: psycopg's prepared statements (it prepares a
statement once it has run five times on a connection) are then missing, or already there, on
the server connection the next transaction gets (``prepared statement "_pg3_0" does not exist``),
and a ``LISTEN`` hears nothing once its transaction is over.

A pooler can be found: it answers the client's handshake itself, with a backend process id of
its own, so the id the handshake gave (``connection.info.backend_pid``) differs from the one the
server names (``SELECT pg_backend_pid()``). Its mode cannot be: a session-mode pooler keeps one
server connection per client, as a transaction-mode one may by chance, and nothing in the
protocol says which it runs. So a store that finds a pooler treats it as a transaction pooler.

The two options of both PostgreSQL backends (in the URL's query, or given as options):

- ``prepared_statements``: ``auto`` (the default) keeps psycopg's preparing on, unless a pooler
  is found when the store connects; ``true`` keeps it on; ``false`` turns it off
  (``prepare_threshold=None``: every statement is sent with its parameters and planned again).
- ``listen``: a URL followers listen on (``LISTEN``), straight to the server or through a
  session-mode pooler, used as it is. Without it, a store that finds a pooler where it would
  listen reads instead, a few times a second (each backend's README says how often).
"""

from __future__ import annotations

from chronica_core.errors import InvalidOption
from chronica_core.options import flag_option

__all__ = [
    "AUTO",
    "BACKEND_PID_SQL",
    "LISTEN",
    "PREPARED_STATEMENTS",
    "listen_option",
    "pooler_between",
    "prepared_statements_option",
]

PREPARED_STATEMENTS = "prepared_statements"
"""The option's name: whether psycopg prepares statements (``auto``, ``true`` or ``false``)."""

LISTEN = "listen"
"""The option's name: the URL followers listen on, instead of the store's own."""

AUTO = "auto"
"""``prepared_statements=auto``: on, unless a pooler is found."""

BACKEND_PID_SQL = "SELECT pg_backend_pid()"
"""The server process answering: compared with the handshake's to find a pooler."""


def prepared_statements_option(backend: str, value: object) -> bool | None:
    """Read the ``prepared_statements`` option: ``None`` for ``auto`` (or ``None``), else the flag.

    Args:
        backend: the backend's name, for the error (``"postgres"``).
        value: ``None``, ``"auto"`` (any case), or what :func:`chronica_core.options.flag_option`
            reads (``True``/``False``, ``"true"``/``"false"``, ``"on"``/``"off"``...).

    Raises:
        InvalidOption: anything else (the message names ``auto``, ``true`` and ``false``).
    """
    if value is None or (isinstance(value, str) and value.strip().lower() == AUTO):
        return None
    try:
        return flag_option(backend, PREPARED_STATEMENTS, value)
    except InvalidOption as error:
        raise InvalidOption(
            backend, PREPARED_STATEMENTS, f"expected auto, true or false, got {value!r}"
        ) from error


def listen_option(backend: str, value: object) -> str | None:
    """Read the ``listen`` option: the URL as given, ``None`` when absent.

    Raises:
        InvalidOption: not a non-empty string.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidOption(backend, LISTEN, "expected a URL of the server to listen on")
    return value


def pooler_between(handshake_pid: int, server_pid: object) -> bool:
    """Whether a pooler answered the handshake: its process id is not the server's.

    Args:
        handshake_pid: the backend process id the connection's handshake gave
            (psycopg's ``connection.info.backend_pid``).
        server_pid: what :data:`BACKEND_PID_SQL` answered on that connection.
    """
    return server_pid != handshake_pid
