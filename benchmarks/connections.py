"""Server connections: how many this process holds, and the budget a run may not pass.

The database servers of a test machine are shared (PostgreSQL serves 100 connections to
everybody), so a harness counts the connections it holds and refuses to start a row that could
pass its budget (``--max-connections``). A row declares what it may add (its writers plus
:data:`FEW`, for a listener or a store's second pool); :class:`Budget` checks that against what
this process holds now, and the row's count, taken once its writers are warm, is printed beside it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_PORTS",
    "FEW",
    "MAX_CONNECTIONS",
    "Budget",
    "BudgetExceeded",
    "held_connections",
    "server_port",
]

MAX_CONNECTIONS = 60
"""The default budget: well under the shared server's 100, with room for other workers' tests."""

FEW = 4
"""What a row may hold beyond one connection a writer (a listener, a read pool, a check)."""

DEFAULT_PORTS = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mariadb": 3306, "mongodb": 27017}
"""Per URL scheme (before any ``+driver``), the server's port when the URL names none. A backend
for another server adds its scheme here."""


def server_port(url: str) -> int | None:
    """The TCP port of the server a store URL talks to; ``None`` for a store with no server."""
    parts = urlsplit(url.replace("+srv", ""))
    scheme = parts.scheme.partition("+")[0].lower()
    if scheme not in DEFAULT_PORTS:
        return None
    try:
        port = parts.port
    except ValueError:  # several hosts (a replica set): the first port named, else the default
        port = None
    return port or DEFAULT_PORTS[scheme]


def held_connections(url: str) -> int | None:
    """This process's established TCP connections to the server of ``url``.

    Reads the socket inodes of ``/proc/self/fd`` and the connections of ``/proc/net/tcp`` and
    ``tcp6``, keeping the established ones (state ``01``) whose remote port is the server's.
    Returns ``None`` when the store has no server or there is no ``/proc`` to read.
    """
    port = server_port(url)
    if port is None or not os.path.isdir("/proc/self/fd"):
        return None
    inodes = set()
    for descriptor in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{descriptor}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as rows:
            next(rows)  # the header
            for row in rows:
                fields = row.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if fields[3] == "01" and remote_port == port and fields[9] in inodes:
                    count += 1
    return count


class BudgetExceeded(RuntimeError):
    """A row was not started: it could pass the run's connection budget (the message says how)."""


@dataclass(slots=True)
class Budget:
    """The most server connections this process may hold while a row runs.

    Attributes:
        url: the store URL whose server is counted.
        most: the budget (``--max-connections``).
    """

    url: str
    most: int = MAX_CONNECTIONS

    def describe(self) -> str:
        """The budget as printed at the start of a run."""
        if server_port(self.url) is None:
            return "connection budget: none needed (no server)"
        return (
            f"connection budget: {self.most} server connections (--max-connections);"
            f" a row may add its writers + {FEW}"
        )

    def admit(self, row: str, writers: int) -> int | None:
        """Check that row ``row``, adding up to ``writers`` + :data:`FEW`, stays within the budget.

        Returns the connections held now (``None``: no server, nothing to check).

        Raises:
            BudgetExceeded: what is held now plus what the row may add passes :attr:`most`.
        """
        held = held_connections(self.url)
        if held is None:
            return None
        wanted = held + writers + FEW
        if wanted > self.most:
            raise BudgetExceeded(
                f"{row}: not started: {held} connections held + {writers} writers + {FEW} = {wanted}"
                f" would pass the budget of {self.most} (--max-connections)"
            )
        return held
