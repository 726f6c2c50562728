"""A three-node MariaDB Galera cluster of the tests' own: free loopback ports, a temporary folder.

Built from the machine's MariaDB (Debian's ``mariadb-server``: ``mariadb-install-db`` and
``/usr/sbin/mariadbd``) and Galera (``galera-4``: ``/usr/lib/galera/libgalera_smm.so``). Each node
gets its own data folder (``mariadb-install-db``), client port, group-communication port and IST
port; the first bootstraps the cluster (``--wsrep-new-cluster``), the other two join it and
receive its state by ``rsync`` SST on a port of their own. The servers run as the ``mysql`` user
when the tests run as root. Never touches the machine's own MariaDB; :meth:`GaleraCluster.stop`
stops the nodes by their PIDs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql
from postgres_cluster import free_port

__all__ = ["PROVIDER", "SERVER", "GaleraCluster", "missing", "start_cluster"]

SERVER = Path("/usr/sbin/mariadbd")
PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")
NODES = 3
START_TIMEOUT = 120.0
"""Seconds a node may take to join and be synced before the start fails."""


def missing() -> str | None:
    """What the cluster needs and this machine lacks (Debian's package to install), or ``None``."""
    for path, package in ((SERVER, "mariadb-server"), (PROVIDER, "galera-4")):
        if not path.exists():
            return f"{path} (Debian's {package})"
    for tool in ("mariadb-install-db", "rsync"):
        if shutil.which(tool) is None:
            return f"{tool} (Debian's {'mariadb-server' if tool.startswith('mariadb') else tool})"
    return None


@dataclass
class Node:
    """One node: its folder, client port, and the process running it."""

    folder: Path
    port: int
    gcomm_port: int
    ist_port: int
    sst_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def url(self, database: str) -> str:
        """A chronica-sqlalchemy URL of ``database`` on this node."""
        return f"mariadb+pymysql://root@127.0.0.1:{self.port}/{database}"

    def connect(self) -> pymysql.connections.Connection[pymysql.cursors.Cursor]:
        """An autocommit connection as root."""
        return pymysql.connect(
            host="127.0.0.1", port=self.port, user="root", autocommit=True, connect_timeout=5
        )

    def status(self, name: str) -> str | None:
        """A ``SHOW STATUS`` value of the node, ``None`` while it does not answer."""
        try:
            with self.connect() as connection, connection.cursor() as cursor:
                cursor.execute("SHOW STATUS LIKE %s", (name,))
                row = cursor.fetchone()
        except pymysql.MySQLError:
            return None
        return None if row is None else str(row[1])


@dataclass
class GaleraCluster:
    """Three nodes in one temporary folder."""

    root: Path
    nodes: list[Node] = field(default_factory=list)

    def urls(self, database: str) -> list[str]:
        """The URL of ``database`` on each node."""
        return [node.url(database) for node in self.nodes]

    def log(self, node: Node) -> str:
        """The node's error log (its last lines), for a failure's message."""
        with contextlib.suppress(OSError):
            return "\n".join((node.folder / "error.log").read_text(errors="replace").splitlines()[-40:])
        return ""

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL after 30 s) by its PID, and remove the folder."""
        for node in reversed(self.nodes):
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def _as_mysql() -> list[str]:
    return ["--user=mysql"] if os.geteuid() == 0 else []


def _start(cluster: GaleraCluster, node: Node, bootstrap: bool) -> None:
    peers = ",".join(f"127.0.0.1:{other.gcomm_port}" for other in cluster.nodes)
    command = [
        str(SERVER),
        "--no-defaults",
        *_as_mysql(),
        f"--datadir={node.data}",
        f"--port={node.port}",
        "--bind-address=127.0.0.1",
        f"--socket={node.folder / 'mariadb.sock'}",
        f"--pid-file={node.folder / 'mariadb.pid'}",
        f"--log-error={node.folder / 'error.log'}",
        "--innodb-buffer-pool-size=32M",
        "--innodb-log-file-size=16M",
        "--innodb-flush-log-at-trx-commit=0",
        "--max-connections=100",
        "--binlog-format=ROW",
        "--default-storage-engine=InnoDB",
        "--innodb-autoinc-lock-mode=2",
        "--wsrep-on=ON",
        f"--wsrep-provider={PROVIDER}",
        "--wsrep-cluster-name=chronica-test",
        f"--wsrep-cluster-address=gcomm://{'' if bootstrap else peers}",
        f"--wsrep-node-address=127.0.0.1:{node.gcomm_port}",
        f"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{node.gcomm_port};"
        f"ist.recv_addr=127.0.0.1:{node.ist_port};gcache.size=32M",
        "--wsrep-sst-method=rsync",
        f"--wsrep-sst-receive-address=127.0.0.1:{node.sst_port}",
        *(["--wsrep-new-cluster"] if bootstrap else []),
    ]
    node.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_TIMEOUT
    while node.status("wsrep_local_state_comment") != "Synced":
        if node.process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"Galera node on port {node.port} did not become synced:\n{cluster.log(node)}")
        time.sleep(0.2)


def start_cluster() -> GaleraCluster:
    """Start three nodes in a temporary folder of their own; return them synced, the cluster of 3.

    Raises ``RuntimeError`` with a node's log when a step fails (after stopping what it started).
    """
    cluster = GaleraCluster(Path(tempfile.mkdtemp(prefix="chronica-galera-")))
    try:
        for index in range(NODES):
            folder = cluster.root / f"node{index + 1}"
            folder.mkdir()
            if os.geteuid() == 0:
                for owned in (cluster.root, folder):
                    shutil.chown(owned, "mysql", "mysql")
            node = Node(folder, free_port(), free_port(), free_port(), free_port())
            cluster.nodes.append(node)
            done = subprocess.run(
                ["mariadb-install-db", "--no-defaults", *_as_mysql(), f"--datadir={node.data}",
                 "--auth-root-authentication-method=normal", "--skip-test-db"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(f"mariadb-install-db failed:\n{done.stdout}\n{done.stderr}")
        for index, node in enumerate(cluster.nodes):
            _start(cluster, node, bootstrap=index == 0)
        size = cluster.nodes[0].status("wsrep_cluster_size")
        if size != str(NODES):
            raise RuntimeError(f"the cluster has {size} nodes, not {NODES}")
    except BaseException:
        cluster.stop()
        raise
    return cluster
