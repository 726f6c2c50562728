"""The fork and long-session examples run as written (on memory://; backend environments on theirs)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
STORE = os.environ.get("CHRONICA_EXAMPLE_STORE", "memory://")
_READ_BACK = re.compile(
    r"chronicum ([0-9a-f]{32}): chronica acta \1 --owner (\S+)(?: --as-written)? --store \S+"
)


def run(example: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / example), STORE], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_fork_and_compare_answers_one_question_two_ways() -> None:
    lines = run("fork_and_compare.py")
    assert lines[:3] == [
        "source: Where should we eat on Friday? / Kemang: Rumah Teduh, quiet, at 7.",
        "fork: Where should we eat on Friday? / Senopati: Kayu Manis, livelier, at 8.",
        "the fork branched off at: Where should we eat on Friday?",
    ]
    read_back = [_READ_BACK.fullmatch(line) for line in lines[3:5]]
    assert all(read_back) and len(read_back) == 2
    assert {match.group(2) for match in read_back if match} == {"example-forks"}


def test_long_session_keeps_its_window_within_the_budget_and_the_record_whole() -> None:
    lines = run("long_session.py")
    window = re.fullmatch(r"window: (\d+) acta, (\d+) characters", lines[0])
    assert window is not None
    assert int(window.group(2)) <= 400  # the example's budget
    assert lines[1].startswith("first in the window: [summary of ")
    assert lines[2] == "record: 16 acta, 4 of them summaries"  # twelve turns and every summary kept
    assert _READ_BACK.fullmatch(lines[3])
    assert lines[4].startswith("left behind in ")
