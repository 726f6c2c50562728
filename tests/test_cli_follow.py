"""``chronica follow``: prints acta as they are recorded, like ``tail -f``, and ends cleanly on Ctrl-C.

Run as a subprocess the way a user runs it, stopped with a real SIGINT. The memory store lives in
one process, so the subprocess is a small script: it records into its memory store when told to
on standard input (standing in for another agent) while ``chronica follow`` runs on that store.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import IO

import pytest

from chronica_core.cli import main

SCRIPT = """
import signal, sys, threading
# A process started in the background by a non-interactive shell (a CI job, say) inherits SIGINT
# ignored; a terminal's Ctrl-C reaches `chronica follow` with Python's own handler.
signal.signal(signal.SIGINT, signal.default_int_handler)
from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, MemoryStore
from chronica_core import cli

store = MemoryStore()
chronicarius = Chronicarius(store)
def say(actor_kind, actor, content, kind=ActumKind.MESSAGE):
    return chronicarius.record_actum("ardian", Actum("dinner", kind, actor_kind, actor, content))
first = say(ActorKind.HUMAN, "ardian", "A quiet table for four?")
say(ActorKind.AGENT, "search", "Rumah Teduh has one.")
# the command follows this process's memory store (named, so that no other default store is
# chosen, such as a SQLite file that is not there, which a read never opens)
cli._opened_store = lambda arguments: store

def write():
    for line in sys.stdin:
        kind = ActumKind.THOUGHT if line.startswith("thought:") else ActumKind.MESSAGE
        say(ActorKind.AGENT, "booking", line.strip(), kind)

threading.Thread(target=write, daemon=True).start()
sys.exit(cli.main(sys.argv[1:] + ["--store", "memory://", "--after", first.id]))
"""

UNKNOWN_AFTER_SCRIPT = SCRIPT.replace('"--after", first.id', '"--after", "0" * 32')

GUARD_SECONDS = 30.0
"""How long the test waits for a line before it fails as hung (a guard, not a measurement)."""


def _follow(*arguments: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "follow", "dinner", "--owner", "ardian", *arguments],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )


def _line(stream: IO[str] | None) -> str:
    assert stream is not None
    return stream.readline().rstrip("\n")


def _tell(process: subprocess.Popen[str], text: str) -> None:
    assert process.stdin is not None
    process.stdin.write(text + "\n")
    process.stdin.flush()


def _interrupt(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=GUARD_SECONDS)
    return process.returncode, stderr


def test_follow_prints_new_acta_as_they_come_and_ends_on_ctrl_c() -> None:
    process = _follow()
    try:
        first = _line(process.stdout).split(None, 4)
        assert first == ["1", "message", "agent", "search", "Rumah Teduh has one."]
        _tell(process, "thought: hold the table first")
        _tell(process, "Booked for Friday.")
        second = _line(process.stdout).split(None, 4)
        assert second[1:] == ["thought", "agent", "booking", "thought: hold the table first"]
        third = _line(process.stdout).split(None, 4)
        assert third == ["3", "message", "agent", "booking", "Booked for Friday."]
    finally:
        code, stderr = _interrupt(process)
    assert code == 130
    assert "Traceback" not in stderr
    assert stderr == ""


def test_follow_json_lines_and_kinds() -> None:
    process = _follow("--json", "--kinds", "message", "--actor-kinds", "agent")
    try:
        first = json.loads(_line(process.stdout))
        assert (first["actor"], first["content"]) == ("search", "Rumah Teduh has one.")
        _tell(process, "thought: not printed")
        _tell(process, "Booked.")
        second = json.loads(_line(process.stdout))
        assert (second["kind"], second["actor"], second["content"]) == ("message", "booking", "Booked.")
        assert sorted(second) == ["actor", "actor_kind", "at", "chronicum_id", "content", "id", "kind"]
    finally:
        code, stderr = _interrupt(process)
    assert (code, stderr) == (130, "")


def test_follow_of_another_owners_chronicum_is_not_found_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["follow", "dinner", "--owner", "rafa", "--store", "memory://"]) == 3
    assert "ChronicumNotFound" in capsys.readouterr().err


def test_follow_after_an_unknown_actum_names_after(capsys: pytest.CaptureFixture[str]) -> None:
    process = subprocess.run(
        [sys.executable, "-c", UNKNOWN_AFTER_SCRIPT, "follow", "dinner", "--owner", "ardian"],
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    assert process.returncode == 4
    assert process.stderr == (  # the flag typed, as for --kinds, not the argument's name
        "chronica: InvalidQuery: invalid query: --after: chronicum 'dinner' holds no actum with "
        f"the id {'0' * 32!r}\n"
    )
