"""``chronica follow``: prints acta as they are recorded, like ``tail -f``, and ends cleanly on Ctrl-C.

Run as a subprocess the way a user runs it, stopped with a real SIGINT. The memory store lives in
one process, so the subprocess is a small script: it records into its memory store when told to
on standard input (standing in for another agent) while ``chronica follow`` runs on that store.
"""

from __future__ import annotations

import json
import os
import pty
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
FROM_NOW_SCRIPT = SCRIPT.replace(', "--after", first.id', "")

GUARD_SECONDS = 30.0
"""How long the test waits for a line before it fails as hung (a guard, not a measurement)."""


def _follow(*arguments: str, script: str = SCRIPT) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, "follow", "dinner", "--owner", "ardian", *arguments],
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
        first = _line(process.stdout).split(None, 5)
        assert first[0] == "1" and len(first[1]) == 32  # each line shows the actum's id
        assert first[2:] == ["message", "agent", "search", "Rumah Teduh has one."]
        _tell(process, "thought: hold the table first")
        _tell(process, "Booked for Friday.")
        second = _line(process.stdout).split(None, 5)
        assert second[2:] == ["thought", "agent", "booking", "thought: hold the table first"]
        third = _line(process.stdout).split(None, 5)
        assert [third[0], *third[2:]] == ["3", "message", "agent", "booking", "Booked for Friday."]
        assert len({first[1], second[1], third[1]}) == 3
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
    assert process.returncode == 3  # as for the actum --before or --at names
    assert process.stderr == (  # the flag typed, not the argument's name
        f"chronica: ActumNotFound: --after: actum {'0' * 32!r} not found in chronicum 'dinner'\n"
    )


def test_follow_last_prints_the_newest_first_like_tail_then_what_comes() -> None:
    process = _follow("--last", "1", "--kinds", "message", script=FROM_NOW_SCRIPT)
    try:
        newest = _line(process.stdout).split(None, 5)
        assert [newest[0], *newest[2:]] == ["1", "message", "agent", "search", "Rumah Teduh has one."]
        _tell(process, "thought: not printed")
        _tell(process, "Booked.")
        then = _line(process.stdout).split(None, 5)
        assert [then[0], *then[2:]] == ["2", "message", "agent", "booking", "Booked."]
    finally:
        code, stderr = _interrupt(process)
    assert (code, stderr) == (130, "")


def test_follow_with_after_and_last_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    arguments = ["follow", "dinner", "--owner", "ardian", "--after", "0" * 32, "--last", "2"]
    assert main([*arguments, "--store", "memory://"]) == 2
    assert capsys.readouterr().err == "chronica follow: give --after or --last, not both\n"


def test_follow_on_a_terminal_says_what_it_follows_on_standard_error() -> None:
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", FROM_NOW_SCRIPT, "follow", "dinner", "--owner", "ardian"],
        stdin=subprocess.PIPE,
        stdout=terminal,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(terminal)
    try:
        assert process.stderr is not None
        assert process.stderr.readline() == "chronica: following dinner; Ctrl-C to stop\n"
        _tell(process, "Booked.")
        seen = b""
        while b"Booked." not in seen:  # the line reaches the terminal, not standard error
            seen += os.read(controller, 1024)
    finally:
        code, stderr = _interrupt(process)
        os.close(controller)
    assert (code, stderr) == (130, "")
