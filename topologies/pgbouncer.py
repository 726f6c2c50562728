"""A PgBouncer of the tests' own in transaction mode: a free loopback port, a temporary folder.

Debian's ``pgbouncer`` binary, with a configuration written here (never the machine's
``/etc/pgbouncer``), pooling the connections to one PostgreSQL server (by default the machine's,
``127.0.0.1:5432``, user ``postgres``, trust) in ``pool_mode = transaction``, as hosted poolers
run. It runs as the ``postgres`` user when the tests run as root (PgBouncer refuses root);
:meth:`Bouncer.stop` stops it by its PID and removes the folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from postgres_cluster import free_port

__all__ = ["Bouncer", "binary", "start_bouncer"]

_START_SECONDS = 30.0
"""How long :func:`start_bouncer` waits for PgBouncer to answer before it gives up."""


def binary() -> str | None:
    """The path of the ``pgbouncer`` executable, ``None`` when it is not installed."""
    return shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )


@dataclass
class Bouncer:
    """A running PgBouncer: its folder, its port and its process."""

    root: Path
    port: int
    process: subprocess.Popen[bytes]

    def url(self, database: str = "test") -> str:
        """A libpq URL of ``database`` through the pooler."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        """What PgBouncer logged so far."""
        with contextlib.suppress(FileNotFoundError):
            return (self.root / "pgbouncer.log").read_text(errors="replace")
        return ""

    def stop(self) -> None:
        """Stop PgBouncer (SIGINT by PID: its safe shutdown, then SIGKILL) and remove the folder."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def start_bouncer(server_host: str = "127.0.0.1", server_port: int = 5432) -> Bouncer:
    """Start PgBouncer in transaction mode before the server at ``server_host:server_port``.

    Every database name is passed through to the server under the same name, as user
    ``postgres`` (trust on the pooler too). Returns it once it answers a query.

    Raises:
        RuntimeError: PgBouncer is not installed, exited, or did not answer within 30 s (with its
            log; what was started is stopped first).
    """
    executable = binary()
    if executable is None:
        raise RuntimeError("pgbouncer is not installed (Debian's pgbouncer package)")
    root = Path(tempfile.mkdtemp(prefix="chronica-pgbouncer-"))
    port = free_port()
    (root / "userlist.txt").write_text('"postgres" ""\n')
    (root / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server_host} port={server_port} user=postgres\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {root / 'userlist.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 10\nmax_client_conn = 500\n"
        f"logfile = {root / 'pgbouncer.log'}\npidfile = {root / 'pgbouncer.pid'}\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
    )
    command = [executable, str(root / "pgbouncer.ini")]
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        for name in ("userlist.txt", "pgbouncer.ini"):
            shutil.chown(root / name, "postgres", "postgres")
        command = [executable, "-u", "postgres", str(root / "pgbouncer.ini")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    bouncer = Bouncer(root, port, process)
    deadline = time.monotonic() + _START_SECONDS
    while True:
        try:
            with psycopg.connect(bouncer.url(), connect_timeout=2, autocommit=True) as probe:
                probe.execute("SELECT 1")
            return bouncer
        except psycopg.Error as error:
            if process.poll() is not None or time.monotonic() > deadline:
                log = bouncer.log()
                bouncer.stop()
                raise RuntimeError(f"pgbouncer did not start ({error}):\n{log}") from error
            time.sleep(0.1)
