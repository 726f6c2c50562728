"""Redis servers of the tests' own: Debian's ``redis-server`` on free loopback ports, data in a temp dir.

Never the machine's Redis on 6379 (which keeps nothing on disk). Each server runs in the
foreground as a child process and is stopped by its PID (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

SERVER = os.environ.get("CHRONICA_REDIS_SERVER") or shutil.which("redis-server") or "/usr/bin/redis-server"
CLI = os.environ.get("CHRONICA_REDIS_CLI") or shutil.which("redis-cli") or "/usr/bin/redis-cli"
START_SECONDS = 20.0
CLUSTER_SECONDS = 60.0


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 now (the OS picks them)."""
    sockets = []
    try:
        for _ in range(count):
            listening = socket.socket()
            listening.bind(("127.0.0.1", 0))
            sockets.append(listening)
        return [listening.getsockname()[1] for listening in sockets]
    finally:
        for listening in sockets:
            listening.close()


class Server:
    """One ``redis-server`` in a child process, on a free port, its data in ``directory``."""

    def __init__(self, directory: Path, *settings: str, port: int | None = None) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or free_ports(1)[0]
        self.settings = settings
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or start again, on the same port and data) and wait until it answers."""
        command = [
            SERVER,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--daemonize", "no",
            "--logfile", str(self.directory / "server.log"),
            *self.settings,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                with redis.Redis(port=self.port, socket_timeout=1) as client:
                    if client.ping():
                        return
            except redis.exceptions.BusyLoadingError:
                pass
            except redis.exceptions.ConnectionError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"redis-server exited: {self.log()[-2000:]}") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on {self.port} did not answer: {self.log()[-2000:]}")
            time.sleep(0.05)

    def log(self) -> str:
        path = self.directory / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: the server stops at once, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """Stop it by its PID: SIGTERM, then SIGKILL after 10 s."""
        if self.process is None or self.process.poll() is not None:
            return
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()


def standalone(directory: Path, *settings: str) -> Server:
    """A standalone server that keeps an append-only file (``appendonly yes``, no RDB)."""
    return Server(directory, "--appendonly", "yes", "--save", "", *settings)


class Cluster:
    """Six nodes on loopback: three primaries, three replicas, cluster bus on ports of its own."""

    def __init__(self, directory: Path, *settings: str, node_timeout_ms: int = 2000) -> None:
        ports = free_ports(12)
        self.nodes: list[Server] = []
        try:
            for number, (port, bus) in enumerate(zip(ports[:6], ports[6:], strict=True)):
                self.nodes.append(
                    Server(
                        directory / f"node-{number}",
                        "--cluster-enabled", "yes",
                        "--cluster-config-file", "nodes.conf",
                        "--cluster-port", str(bus),
                        "--cluster-node-timeout", str(node_timeout_ms),
                        "--appendonly", "yes",
                        "--save", "",
                        *settings,
                        port=port,
                    )
                )  # fmt: skip
            addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
            subprocess.run(
                [CLI, "--cluster", "create", *addresses, "--cluster-replicas", "1", "--cluster-yes"],
                check=True,
                capture_output=True,
                timeout=CLUSTER_SECONDS,
            )
            self.wait_until_ok()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes[:3])
        return f"redis+cluster://{hosts}"

    def running(self) -> list[Server]:
        return [node for node in self.nodes if node.process is not None and node.process.poll() is None]

    def wait_until_ok(self, timeout: float = CLUSTER_SECONDS, replicated: bool = True) -> None:
        """Until every running node says ``cluster_state:ok`` and, if ``replicated``, every primary
        has a replica online (``WAIT 1`` can then be answered)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = []
            for node in self.running():
                try:
                    with redis.Redis(port=node.port, socket_timeout=1, decode_responses=True) as client:
                        info = client.execute_command("CLUSTER", "INFO")
                        states.append("cluster_state:ok" in str(info))
                        replication = client.info("replication")
                        if replicated and replication["role"] == "master":
                            states.append(replication.get("slave0", {}).get("state") == "online")
                except redis.exceptions.RedisError:
                    states.append(False)
            if states and all(states):
                return
            time.sleep(0.1)
        raise RuntimeError("the cluster did not reach cluster_state:ok with a replica for each primary")

    def primary_of(self, key: str) -> Server:
        """The node that holds ``key``'s slot now."""
        for node in self.running():
            with (
                contextlib.suppress(redis.exceptions.RedisError),
                redis.Redis(port=node.port, socket_timeout=1, decode_responses=True) as client,
            ):
                slot = int(client.execute_command("CLUSTER", "KEYSLOT", key))
                for start, end, primary, *_ in client.execute_command("CLUSTER", "SLOTS"):
                    if int(start) <= slot <= int(end):
                        return next(server for server in self.nodes if server.port == int(primary[1]))
        raise RuntimeError(f"no node holds the slot of {key!r}")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def temporary_directory(label: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"chronica-redis-{label}-"))
