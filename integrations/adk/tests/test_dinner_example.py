"""examples/dinner_across_frameworks.py runs as written: a person on the CLI, the search agent on
pydantic-ai, the concierge on the OpenAI Agents SDK, the booking agent on ADK, one chronicum, on a
SQLite file (as it runs by default) and on PostgreSQL through chronica-postgres (in a fresh schema
the conftest drops)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import fresh_target

from chronica_core import open_store
from chronica_core.capabilities import NATIVE, store_capabilities

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "dinner_across_frameworks.py"

ASKED = "A quiet table for four, Friday 7pm."
SEARCHED = "Rumah Teduh in Kemang has a quiet table at 7pm."
FOUND = "Rumah Teduh has a quiet table at 7pm; booking, please reserve it."
BOOKED = "Booked Rumah Teduh, Friday 7pm, for four."
FIVE = "Actually make it five people"
NOTED = "Noted: five people. Booking, please change it."
CHANGED = "Changed: five."

MODEL_INPUTS = [
    "search's model reads:",
    f"    user: {ASKED}",
    "concierge's model reads:",
    f"    user: {ASKED}",
    f"    assistant: search said: {SEARCHED}",
    "booking's model reads:",
    f"    user: {ASKED}",
    f"    user: search said: {SEARCHED}",
    f"    user: concierge said: {FOUND}",
    "concierge's model reads:",
    f"    user: {ASKED}",
    f"    assistant: search said: {SEARCHED}",
    f"    assistant: {FOUND}",
    f"    assistant: booking said: {BOOKED}",
    f"    user: {FIVE}",
    "booking's model reads:",
    f"    user: {ASKED}",
    f"    user: search said: {SEARCHED}",
    f"    user: concierge said: {FOUND}",
    f"    model: {BOOKED}",
    f"    user: {FIVE}",
    f"    user: concierge said: {NOTED}",
]


@pytest.fixture(params=["sqlite", "postgres"])
def story_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store of the story's own, as a URL the command line opens (its schema in the query)."""
    with fresh_target(str(request.param), tmp_path) as target:
        schema = target.options.get("schema")
        yield target.url if schema is None else f"{target.url}?schema={schema}"


def test_the_dinner_story_across_frameworks(story_url: str) -> None:
    url = story_url
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), url], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    acta_at = lines.index("chronica acta:")
    assert lines[:acta_at] == MODEL_INPUTS  # each model saw the others' messages, as messages, in order
    erased_at = next(n for n, line in enumerate(lines) if line.startswith("erased"))
    acta = [line for line in lines[acta_at + 1 : erased_at] if "message" in line.split()]
    said = [ASKED, SEARCHED, FOUND, BOOKED, FIVE, NOTED, CHANGED]
    writers = ["ardian", "search", "concierge", "booking", "ardian", "concierge", "booking"]
    assert len(acta) == len(said)
    assert all(writer in line.split() for writer, line in zip(writers, acta, strict=True))
    with open_store(url) as store:
        readable = NATIVE in store_capabilities(store)
    if readable:  # what the person reads: text; each framework's own form is kept as its native form
        assert all(line.endswith(f" {text}") for text, line in zip(said, acta, strict=True))
    else:  # a store without native forms keeps each framework's JSON as the content
        assert all(text in line for text, line in zip(said, acta, strict=True))
    assert lines[erased_at] == "erased 2 chronica of owner 'ardian'"  # the conversation, the session's state
    assert "has no chronica" in "\n".join(lines[erased_at + 1 :])
