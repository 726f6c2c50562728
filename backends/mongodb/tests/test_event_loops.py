"""One asyncio store, many event loops: a client per loop, each closed with its loop.

The scenario is :func:`chronica_conformance.loop_scenario.run_loop_scenario` (a fresh
interpreter under ``-X dev``, whose stderr must stay empty: pymongo's "Unclosed AsyncMongoClient"
included). The mongoeco wire server's ``serverStatus`` reports one connection whatever is open, so
the connections are counted at the client's end: the scenario process's established TCP sockets
to the server's port (Linux's ``/proc``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from chronica_conformance.loop_scenario import run_loop_scenario

COUNTER = """
import contextlib, os

def connections() -> int:
    port = int(ARGUMENTS[0])
    inodes = set()
    for descriptor in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{descriptor}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            for row in rows.readlines()[1:]:
                fields = row.split()
                remote, state, inode = fields[2], fields[3], fields[9]
                if inode in inodes and state == "01" and int(remote.rsplit(":", 1)[1], 16) == port:
                    count += 1
    return count
"""


def test_each_loop_has_its_own_client_closed_with_the_loop_and_at_close(
    mongodb_server_url: str, database: str
) -> None:
    parts = urlsplit(mongodb_server_url)
    path_and_query = f"/{database}" + (f"?{parts.query}" if parts.query else "")
    url = f"{parts.scheme}://{parts.netloc}{path_and_query}"
    counts = run_loop_scenario(url, COUNTER, str(parts.port or 27017))
    assert counts.store_type == "AsyncMongoStore"
    assert all(count >= 1 for count in counts.during), counts  # each loop's own client
    assert counts.after == [0, 0, 0], counts  # closed when its loop closed
    assert all(count >= 2 for count in counts.both), counts  # two clients at once
    assert counts.after_threads == 0, counts
    assert counts.other_loop_open >= 1, counts
    assert counts.after_close == 0, counts  # the other loop's client closed, in that loop
    assert counts.closed_error == "mongodb: async store: the store is closed"
