"""Whether the ``restart`` test may restart the test server: only this machine's own cluster.

The test restarts the server with ``pg_ctlcluster``; it must never cut off a server it does not
own. It may run only when the test URL's host is local (``127.0.0.1``, ``localhost``, ``::1`` or a
socket directory) and an online ``pg_ctlcluster`` cluster, which this user may control, listens on
the URL's port. conftest.py deselects it otherwise.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Mapping

import psycopg
from psycopg.conninfo import conninfo_to_dict

__all__ = ["LOCAL_HOSTS", "Cluster", "cluster_on_port", "local_port", "restartable_cluster"]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""Host names and addresses that are this machine (a socket directory, starting ``/``, is too)."""

Cluster = tuple[str, str]
"""A server ``pg_ctlcluster VERSION NAME restart`` restarts: ``(VERSION, NAME)``."""


def local_port(url: str, environment: Mapping[str, str]) -> str:
    """The port of the server ``url`` names, when that server is on this machine.

    Args:
        url: a libpq URL or ``key=value`` string.
        environment: the variables libpq falls back on (``PGHOST``, ``PGHOSTADDR``, ``PGPORT``).

    Returns:
        The port as libpq would use it (``"5432"`` when none is given).

    Raises:
        LookupError: saying why the server is not (or may not be) this machine's.
    """
    try:
        parameters = conninfo_to_dict(url)
    except psycopg.Error as error:
        raise LookupError(f"its URL does not parse ({str(error).strip()})") from error
    hosts = str(parameters.get("host") or environment.get("PGHOST", "")).split(",")
    addresses = str(parameters.get("hostaddr") or environment.get("PGHOSTADDR", "")).split(",")
    if len(hosts) > 1 or len(addresses) > 1:
        raise LookupError("its URL names several hosts")
    host, address = hosts[0], addresses[0]
    if address and address not in LOCAL_HOSTS:
        raise LookupError(f"its address {address!r} is not local")
    if host and host not in LOCAL_HOSTS and not host.startswith(("/", "@")):
        raise LookupError(f"its host {host!r} is not local")
    return str(parameters.get("port") or environment.get("PGPORT") or "5432")


def _uid(user: str) -> int | None:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def cluster_on_port(port: str, listing: str, user_id: int) -> Cluster | str:
    """The online cluster listening on ``port`` that user ``user_id`` may restart, or why none.

    Args:
        port: the server's port.
        listing: the output of ``pg_lsclusters --no-header`` (version, name, port, status,
            owner, data directory, log file on each line).
        user_id: who would run ``pg_ctlcluster`` (root, or the cluster's owner, may).
    """
    for line in listing.splitlines():
        version, name, cluster_port, status, owner, *_ = [*line.split(), "", "", "", "", ""]
        if cluster_port == port and status.startswith("online"):
            if user_id not in {0, _uid(owner)}:
                return f"only root or {owner} may restart cluster {version}/{name}"
            return version, name
    return f"no online pg_ctlcluster cluster listens on port {port}"


def restartable_cluster(url: str) -> Cluster | str:
    """The local cluster serving ``url``, or why the restart test must not touch that server."""
    try:
        port = local_port(url, os.environ)
    except LookupError as reason:
        return f"the server at the test URL is not surely this machine's own: {reason}"
    if shutil.which("pg_ctlcluster") is None or shutil.which("pg_lsclusters") is None:
        return "pg_ctlcluster is not installed"
    listing = subprocess.run(
        ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=False, timeout=30
    )
    return cluster_on_port(port, listing.stdout, os.geteuid())
