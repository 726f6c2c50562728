"""A PostgreSQL primary and a standby of the tests' own: free loopback ports, a temporary folder.

Built from the machine's PostgreSQL binaries (Debian's ``/usr/lib/postgresql/<version>/bin``):
``initdb`` for the primary, ``pg_basebackup -R`` for the standby, streaming replication, the
standby synchronous (``synchronous_standby_names``) unless asked otherwise. The servers run as
the ``postgres`` user when the tests run as root (PostgreSQL refuses to run as root). Never
touches the machine's own cluster; :meth:`PostgresPair.stop` stops both servers by their PIDs.
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
from dataclasses import dataclass
from pathlib import Path

import psycopg

__all__ = ["PostgresPair", "binaries", "free_port", "start_pair"]

STANDBY_NAME = "standby1"
"""The standby's ``application_name``, which ``synchronous_standby_names`` names."""


def binaries() -> Path | None:
    """The folder of the newest installed PostgreSQL's server binaries, ``None`` when none is."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _as_server_user(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@dataclass
class PostgresPair:
    """A primary and its standby: their folders and ports."""

    bin: Path
    root: Path
    primary_port: int
    standby_port: int

    @property
    def primary(self) -> Path:
        """The primary's data folder."""
        return self.root / "primary"

    @property
    def standby(self) -> Path:
        """The standby's data folder."""
        return self.root / "standby"

    def conninfo(self, port: int) -> str:
        """A libpq URL of the ``postgres`` database on ``port``."""
        return f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def run(self, *command: str) -> None:
        """Run a PostgreSQL binary as the server's user; raise with its output if it fails."""
        done = subprocess.run(
            _as_server_user([str(self.bin / command[0]), *command[1:]]),
            capture_output=True,
            text=True,
            check=False,
            cwd=self.root,
        )
        if done.returncode != 0:
            output = f"{done.stdout}\n{done.stderr}"
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{output}")

    def pid(self, folder: Path) -> int | None:
        """The postmaster's PID of the server in ``folder``, ``None`` when it is not running."""
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            pid = int((folder / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
            return pid
        return None

    def kill_primary(self) -> None:
        """SIGKILL the primary's postmaster (its backends end on their own once they see it gone)."""
        pid = self.pid(self.primary)
        if pid is None:
            raise RuntimeError("the primary is not running")
        os.kill(pid, signal.SIGKILL)

    def promote_standby(self) -> None:
        """Promote the standby; return once it accepts writes."""
        self.run("pg_ctl", "promote", "-w", "-D", str(self.standby))

    def wait_sync(self, timeout: float = 60) -> None:
        """Wait until the primary reports its standby streaming, synchronous."""
        deadline = time.monotonic() + timeout
        while True:
            with psycopg.connect(self.conninfo(self.primary_port), autocommit=True) as admin:
                row = admin.execute(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s", (STANDBY_NAME,)
                ).fetchone()
            if row is not None and row[0] == "sync":
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby did not become synchronous: {row}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop both servers (fast, then SIGKILL by PID) and remove the folder."""
        for folder in (self.standby, self.primary):
            if self.pid(folder) is not None:
                with contextlib.suppress(RuntimeError):
                    self.run("pg_ctl", "stop", "-m", "immediate", "-w", "-t", "30", "-D", str(folder))
            pid = self.pid(folder)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


def _configure(folder: Path, port: int, extra: str) -> None:
    settings = (
        f"\nport = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{folder.parent}'\n"
        "max_connections = 100\nshared_buffers = 16MB\nwal_level = replica\nmax_wal_senders = 5\n"
        f"{extra}"
    )
    with (folder / "postgresql.conf").open("a") as conf:
        conf.write(settings)


def start_pair(synchronous: bool = True) -> PostgresPair:
    """Start a primary and a streaming standby in a temporary folder of their own; return them running.

    Raises ``RuntimeError`` with the server's output when a step fails (after stopping what it
    started).
    """
    bin = binaries()
    if bin is None:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
    root = Path(tempfile.mkdtemp(prefix="chronica-pg-pair-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    pair = PostgresPair(bin, root, free_port(), free_port())
    try:
        pair.run("initdb", "-D", str(pair.primary), "-U", "postgres", "-A", "trust", "--no-sync")
        names = f"synchronous_standby_names = '{STANDBY_NAME}'\n" if synchronous else ""
        _configure(pair.primary, pair.primary_port, names)
        pair.run("pg_ctl", "start", "-w", "-D", str(pair.primary), "-l", str(root / "primary.log"))
        pair.run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(pair.primary_port), "-U", "postgres",
            "-D", str(pair.standby), "-X", "stream", "-R",
        )  # fmt: skip
        with (pair.standby / "postgresql.auto.conf").open("a") as conf:
            conf.write(
                f"primary_conninfo = 'host=127.0.0.1 port={pair.primary_port} user=postgres "
                f"application_name={STANDBY_NAME}'\n"
            )
        # Promoted, the standby is a primary alone: it must not wait for a synchronous standby of
        # its own (the primary's setting came with the base backup), as a failover manager such as
        # Patroni would reconfigure it.
        _configure(pair.standby, pair.standby_port, "synchronous_standby_names = ''\n")
        pair.run("pg_ctl", "start", "-w", "-D", str(pair.standby), "-l", str(root / "standby.log"))
        if synchronous:
            pair.wait_sync()
    except BaseException:
        pair.stop()
        raise
    return pair
