"""A MongoDB to test against: ``CHRONICA_TEST_MONGODB_URL`` if set, else the mongoeco wire server.

No MongoDB server can be installed on the project's machines, so by default the tests drive the
real pymongo driver over a real socket against ``mongoeco``'s wire server (an emulator; see the
package README for what it cannot do). mongoeco needs Python 3.13, so it runs in a virtual
environment of its own, created here on first use (``pip install mongoeco[wire]`` from PyPI) under
``~/.cache/chronica/`` (or ``$CHRONICA_MONGOECO_VENV``), and is started on 127.0.0.1 at a port the
operating system picks, for the whole session.

Without a server (no URL, and mongoeco cannot be set up) the tests skip naming the variable to
set; with ``CI=true`` they fail instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

import pytest
from chronica_mongodb import AsyncMongoStore, MongoStore
from chronica_mongodb.faults import PymongoFaults
from pymongo import MongoClient

URL_VARIABLE = "CHRONICA_TEST_MONGODB_URL"
MONGOECO_REQUIREMENT = "mongoeco[wire]==4.11.0"
SERVER_SCRIPT = Path(__file__).with_name("mongoeco_server.py")
START_TIMEOUT_SECONDS = 60
INSTALL_TIMEOUT_SECONDS = 900


class MongoecoUnavailable(Exception):
    """The mongoeco wire server could not be set up or started here."""


def no_server(reason: str) -> NoReturn:
    """Skip (or, with ``CI=true``, fail) a test that needs a MongoDB, naming the variable to set."""
    message = f"{reason}; set {URL_VARIABLE}=mongodb://host:port to test against a MongoDB"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _python_313() -> str:
    """Find a Python 3.13 interpreter for mongoeco (``$CHRONICA_MONGOECO_PYTHON`` first)."""
    candidates = [os.environ.get("CHRONICA_MONGOECO_PYTHON"), shutil.which("python3.13")]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=30, check=True)
        candidates += sorted(glob.glob(f"{root.stdout.strip()}/versions/3.13*/bin/python3.13"))
    candidates += ["/usr/bin/python3.13", "/usr/local/bin/python3.13"]
    for candidate in candidates:
        if not candidate:
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 13)"],
                capture_output=True,
                timeout=30,
                check=True,
            )
            return candidate
    raise MongoecoUnavailable("no Python 3.13 found for mongoeco (set CHRONICA_MONGOECO_PYTHON)")


def _mongoeco_python() -> Path:
    """Return the Python of mongoeco's own virtual environment, creating it if needed."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "chronica"
    venv = Path(os.environ.get("CHRONICA_MONGOECO_VENV") or cache / "mongoeco-4.11.0")
    python = venv / "bin" / "python"
    ready = venv / ".chronica-ready"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{venv}.lock", "w") as lock:  # one creator at a time, across processes
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():
            return python
        shutil.rmtree(venv, ignore_errors=True)
        steps = [
            [_python_313(), "-m", "venv", str(venv)],
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                MONGOECO_REQUIREMENT,
            ],
        ]
        for step in steps:
            try:
                subprocess.run(
                    step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SECONDS, check=True
                )
            except (OSError, subprocess.SubprocessError) as error:
                output = getattr(error, "stderr", "") or ""
                raise MongoecoUnavailable(f"could not set up mongoeco: {error} {output[-2000:]}") from error
        ready.touch()
    return python


class MongoecoServer:
    """The mongoeco wire server in a child process; stops when :meth:`stop` closes its stdin."""

    def __init__(self) -> None:
        self._log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self._process = subprocess.Popen(
            [str(_mongoeco_python()), str(SERVER_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        try:
            self.port = self._read_port()
        except BaseException:
            self.stop()
            raise
        self.url = f"mongodb://127.0.0.1:{self.port}/?directConnection=true"

    def _read_port(self) -> int:
        assert self._process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            if selector.select(timeout=START_TIMEOUT_SECONDS):
                line = self._process.stdout.readline().strip()
                if line.isdigit():
                    return int(line)
        self._log.seek(0)
        raise MongoecoUnavailable(
            f"mongoeco did not start: {self._log.read()[-2000:].decode(errors='replace')}"
        )

    def stop(self) -> None:
        """Stop the server (closing stdin asks it to; it is killed if it does not within 10 s)."""
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._log.close()


@pytest.fixture(scope="session")
def mongodb_server_url() -> Iterator[str]:
    """The URL of a MongoDB server for the whole session (without a database in its path)."""
    url = os.environ.get(URL_VARIABLE)
    if url:
        yield url
        return
    try:
        server = MongoecoServer()
    except (MongoecoUnavailable, OSError) as error:
        no_server(f"no MongoDB to test against ({error})")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def admin_client(mongodb_server_url: str) -> Iterator[MongoClient[dict[str, Any]]]:
    """A client of the test server for the fixtures' own housekeeping (dropping databases)."""
    client: MongoClient[dict[str, Any]]
    with MongoClient(mongodb_server_url, serverSelectionTimeoutMS=10_000) as client:
        yield client


@pytest.fixture
def fresh_database(admin_client: MongoClient[dict[str, Any]]) -> Iterator[Callable[[], str]]:
    """A factory of fresh database names; each one is dropped after the test."""
    created: list[str] = []

    def make() -> str:
        name = f"chronica_test_{uuid.uuid4().hex[:12]}"
        created.append(name)
        return name

    yield make
    for name in created:
        admin_client.drop_database(name)


@pytest.fixture
def database(fresh_database: Callable[[], str]) -> str:
    """The test's own fresh database (dropped afterwards): the stores below use it."""
    return fresh_database()


@pytest.fixture
def store(mongodb_server_url: str, database: str) -> Iterator[MongoStore]:
    """A blocking store on the test's fresh database."""
    with MongoStore(mongodb_server_url, database=database) as opened:
        yield opened


@pytest.fixture
def async_store(mongodb_server_url: str, database: str) -> AsyncMongoStore:
    """A fresh asyncio store, built without a loop; the test's own loop uses and closes it."""
    return AsyncMongoStore(mongodb_server_url, database=database)


def pytest_report_header() -> str:
    target = os.environ.get(URL_VARIABLE) or f"the mongoeco wire server ({MONGOECO_REQUIREMENT}, Python 3.13)"
    return f"chronica-mongodb: testing against {target}; driver Python {sys.version.split()[0]}"


@pytest.fixture
def chronica_driver_faults() -> PymongoFaults:
    """Driver failures for the conformance suite's driver-failure group."""
    return PymongoFaults()
