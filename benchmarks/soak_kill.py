"""The soak run's connection kill: the server ends every connection this process holds to it.

What an operator's ``pg_terminate_backend`` or a failover does to a long-running agent server.
The server finds the connections by this process's local TCP ports (read from ``/proc``), so a
store need not name its sessions; each server's own statement lives in its own function.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from urllib.parse import urlsplit

from benchmarks.connections import server_port

__all__ = ["KillFailed", "kill_connections", "local_ports"]


class KillFailed(Exception):
    """The server could not be asked to end the connections (its driver's error is chained)."""


def local_ports(server: int) -> set[int]:
    """This process's local ports of established TCP connections to port ``server`` (IPv4 and IPv6)."""
    inodes = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
                if state == "01" and inode in inodes and int(remote.rsplit(":", 1)[1], 16) == server:
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def _postgresql(url: str, ports: set[int]) -> int:
    import psycopg  # the benchmark's extra: only a PostgreSQL run needs it

    parts = urlsplit(url)
    conninfo = f"postgresql://{parts.netloc}{parts.path}"
    try:
        with psycopg.connect(conninfo, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE client_port = ANY(%s) AND pid <> pg_backend_pid()",
                (sorted(ports),),
            ).fetchall()
    except psycopg.Error as error:
        raise KillFailed(f"PostgreSQL: {error}") from error
    return sum(1 for (ended,) in rows if ended)


def _mysql(url: str, ports: set[int]) -> int:
    import sqlalchemy  # the benchmark's extra: a MariaDB/MySQL store URL is a SQLAlchemy URL

    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.NullPool)
    ended = 0
    try:
        with engine.connect() as admin:
            rows = admin.execute(
                sqlalchemy.text(
                    "SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()"
                )
            ).all()
            for thread_id, host in rows:
                port = str(host).rpartition(":")[2]  # "127.0.0.1:54321"; "localhost" over a socket
                if port.isdigit() and int(port) in ports:
                    try:
                        admin.execute(sqlalchemy.text(f"KILL CONNECTION {int(thread_id)}"))
                        ended += 1
                    except sqlalchemy.exc.OperationalError:  # 1094: it ended meanwhile
                        continue
    except sqlalchemy.exc.SQLAlchemyError as error:
        raise KillFailed(f"MariaDB/MySQL: {error}") from error
    finally:
        engine.dispose()
    return ended


_KILLERS: dict[str, Callable[[str, set[int]], int]] = {
    "postgresql": _postgresql,
    "postgres": _postgresql,
    "mysql": _mysql,
    "mariadb": _mysql,
}


def kill_connections(url: str) -> int:
    """Have the server of ``url`` end this process's connections; return how many it ended.

    ``0`` for a store with no server or a server this module cannot ask (MongoDB, Redis). Raises
    :class:`KillFailed` when the server cannot be asked.
    """
    scheme = urlsplit(url).scheme.partition("+")[0].lower()
    port = server_port(url)
    if port is None or scheme not in _KILLERS:
        return 0
    ports = local_ports(port)
    return _KILLERS[scheme](url, ports) if ports else 0
