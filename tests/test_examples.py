"""The README's examples run as written (on memory://; the backend environments run them on theirs)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
STORE = os.environ.get("CHRONICA_EXAMPLE_STORE", "memory://")


def run(example: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / example), STORE], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_quickstart() -> None:
    assert run("quickstart.py") == [
        "ardian: A quiet table for four?",
        "search: Rumah Teduh has one.",
        "rafa: ChronicumNotFound",
    ]


def test_three_agents_share_one_chronicum() -> None:
    lines = run("three_agents.py")
    prefix = "the chronicum holds 4 acta: "
    assert lines[-1].startswith(prefix)
    actors = ast.literal_eval(lines[-1].removeprefix(prefix))
    assert actors[0] == "ardian"
    assert sorted(actors[1:]) == ["booking", "concierge", "search"]
    reads = {line.split()[0]: int(line.split()[2]) for line in lines[:-1]}
    assert set(reads) == {"concierge", "search", "booking"}
    assert all(1 <= count <= 3 for count in reads.values())


def test_batches_listing_erasure_and_the_json_form() -> None:
    assert run("capabilities.py") == [
        "3 acta in one batch; the retry stored nothing new: True",
        "ardian has 2 chronica; rafa has 0",
        "['actor', 'actor_kind', 'at', 'chronicum_id', 'content', 'id', 'kind']",
        "erased 3 acta",
        "dinner: ChronicumNotFound",
        "dinner again: ['Starting over.']",
        "rafa writing to it: ChronicumNotFound",
        "erased all of ardian's: 2 chronica",
    ]
