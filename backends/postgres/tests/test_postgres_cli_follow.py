"""``chronica follow`` on PostgreSQL, stopped by Ctrl-C (a real SIGINT): exit code 130, never a traceback.

Whenever the signal lands (while the store opens, while it follows, while it closes its pool and
its listener), the command ends quietly. Each try runs the command in a process of its own.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from chronica_postgres import PostgresStore

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius

RUNNER = (
    "import signal, sys\n"
    # started with SIGINT ignored (see _follow), it takes Python's own handler, as a command run
    # from a terminal has, once the command is imported: a signal before that is not counted
    "from chronica_core.cli import main\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "sys.exit(main())\n"
)
GUARD_SECONDS = 30.0
"""How long a try may take before it fails as hung (a guard, not a measurement)."""


@pytest.fixture
def url(postgres_url: str, fresh_schema: str) -> str:
    separator = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{separator}schema={fresh_schema}"
    with PostgresStore(url) as store:
        Chronicarius(store).record_actum(
            "ardian", Actum("dinner", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "A quiet table?")
        )
    return url


def _follow(url: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-c", RUNNER, "follow", "dinner", "--owner", "ardian", "--last", "1"]
    return subprocess.Popen(
        [*command, "--store", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # kept across exec
    )


@pytest.mark.parametrize("pause", [0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 1.5])
def test_ctrl_c_while_following_ends_quietly(url: str, pause: float) -> None:
    process = _follow(url)
    assert process.stdout is not None
    assert process.stdout.readline().endswith("A quiet table?\n")  # following now
    time.sleep(pause)  # the signal lands at a different moment of the wait each time
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=GUARD_SECONDS)
    assert (process.returncode, stderr) == (130, ""), stderr


@pytest.mark.parametrize("every", [0.05, 0.1, 0.2])
def test_ctrl_c_pressed_again_and_again_from_the_start_ends_quietly(url: str, every: float) -> None:
    process = _follow(url)
    deadline = time.monotonic() + GUARD_SECONDS
    while process.poll() is None:  # while it opens the store, follows, and closes the store
        assert time.monotonic() < deadline, "chronica follow did not end on Ctrl-C"
        process.send_signal(signal.SIGINT)
        time.sleep(every)
    _, stderr = process.communicate(timeout=GUARD_SECONDS)
    assert (process.returncode, stderr) == (130, ""), stderr
