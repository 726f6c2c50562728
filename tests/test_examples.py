"""The README's examples run as written (on memory://; the backend environments run them on theirs)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chronica_core import ActorKind, Actum, ActumKind, CapabilityUnsupported, Chronicarius
from chronica_core.capabilities import store_capabilities

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
STORE = os.environ.get("CHRONICA_EXAMPLE_STORE", "memory://")


def run(example: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / example), STORE], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


MADE = re.compile(r"chronicum ([0-9a-f]{32}): chronica acta \1 --owner (\S+)(?: --as-written)? --store (\S+)")
"""How an example names a chronicum it made, with the command that reads it back."""


def made(lines: list[str], count: int = 1) -> list[str]:
    """The example's own lines, before the ``count`` chronica it names and what it leaves behind."""
    *story, left = lines
    named = [MADE.fullmatch(line) for line in story[-count:]]
    assert all(match is not None and match[3] == STORE for match in named), story[-count:]
    memory = STORE.startswith("memory:")
    assert left.startswith(f"left behind in {STORE}: ")
    assert left.endswith("nothing (memory:// keeps nothing)") == memory
    return story[:-count]


def test_quickstart() -> None:
    assert made(run("quickstart.py")) == [
        "ardian: A quiet table for four?",
        "search: Rumah Teduh has one.",
        "rafa: ChronicumNotFound",
    ]


def test_follow_sees_each_message_once_and_resumes() -> None:
    assert made(run("follow.py")) == [
        "booking sees search: Rumah Teduh has one.",
        "booking sees ardian: Rumah Teduh, please.",
        "booking stopped; it resumes after the last message it saw",
        "booking sees ardian: Under Ardian.",
    ]


def test_three_agents_share_one_chronicum() -> None:
    lines = made(run("three_agents.py"))
    prefix = "the chronicum holds 4 acta: "
    assert lines[-1].startswith(prefix)
    actors = ast.literal_eval(lines[-1].removeprefix(prefix))
    assert actors[0] == "ardian"
    assert sorted(actors[1:]) == ["booking", "concierge", "search"]
    reads = {line.split()[0]: int(line.split()[2]) for line in lines[:-1]}
    assert set(reads) == {"concierge", "search", "booking"}
    assert all(1 <= count <= 3 for count in reads.values())


def test_batches_listing_erasure_and_the_json_form() -> None:
    *lines, named, command, left = run("capabilities.py")
    found = re.fullmatch(r"made chronica (\w{32}) and (\w{32}); both erased, so .*", named)
    assert found is not None
    dinner, lunch = found.groups()
    assert dinner != lunch
    assert command == f"chronica acta {dinner} --owner example-ardian --store {STORE}"
    assert left == "left behind: no acta, only the erased chronica's ids, each with a digest of its owner"
    assert lines == [
        "3 acta in one batch; the retry stored nothing new: True",
        "ardian has 2 chronica; rafa has 0",
        "['actor', 'actor_kind', 'at', 'chronicum_id', 'content', 'id', 'kind']",
        "erased 3 acta",
        "dinner: ChronicumNotFound",
        "dinner again: ['Starting over.']",
        "rafa writing to it: ChronicumNotFound",
        "erased all of ardian's: 2 chronica",
    ]


DOCS = EXAMPLES.parent / "docs"


def python_block(page: Path, containing: str) -> str:
    """The page's Python code block that contains ``containing``."""
    blocks = page.read_text().split("```python\n")[1:]
    [block] = [block.split("```", 1)[0] for block in blocks if containing in block]
    return block


def test_the_docs_show_the_capabilities_example_as_it_runs() -> None:
    example = (EXAMPLES / "capabilities.py").read_text()
    imports = example.split("from __future__ import annotations\n\n", 1)[1].split("url = sys.argv", 1)[0]
    imports = imports.replace("import sys\n", "").replace(
        "from chronica_core.redaction import masked_url\n", ""
    )
    body = example.split('url = sys.argv[1] if len(sys.argv) > 1 else "memory://"\n', 1)[1]
    body = body.split("\n\n    # What the example made", 1)[0] + "\n"  # what the page shows
    body = body.replace(
        "with open_store(url) as store:", 'with open_store("memory://") as store:  # or any bundled store'
    )
    page = DOCS / "how-to" / "capabilities.md"
    assert python_block(page, "record_acta") == imports + body


def test_the_docs_store_with_a_capability_lists() -> None:
    page = DOCS / "how-to" / "write-a-backend.md"
    namespace: dict[str, Any] = {}
    exec(compile(python_block(page, "class ListingNotebookStore"), str(page), "exec"), namespace)
    [backend] = namespace["chronica_backends"]()
    assert backend.capabilities == ("listing",)
    with backend.open("notebook://") as store:
        assert store_capabilities(store) == {"idempotency", "listing"}
        chronicarius = Chronicarius(store)
        for chronicum_id in ("lunch", "dinner", "tea"):
            chronicarius.record_actum(
                "ardian", Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi")
            )
        chronicarius.record_actum("rafa", Actum("rafa-1", ActumKind.MESSAGE, ActorKind.HUMAN, "rafa", "hi"))
        first = chronicarius.list_chronica("ardian", limit=2)
        rest = chronicarius.list_chronica("ardian", limit=2, cursor=first.next_cursor)
        listed = first.chronica + rest.chronica
        assert rest.next_cursor is None
        assert sorted(chronicum.id for chronicum in listed) == ["dinner", "lunch", "tea"]
        assert listed == sorted(
            listed, key=lambda chronicum: (chronicum.started_at, chronicum.id), reverse=True
        )
        with pytest.raises(CapabilityUnsupported) as refused:
            chronicarius.erase_owner("ardian")
        assert refused.value.capability == "erasure"


README = (EXAMPLES.parent / "README.md").read_text()


@pytest.mark.parametrize(
    ("example", "shown"),
    [
        ("quickstart.py", re.compile(r'with open_store\("([^"]+)"\) as store:')),
        ("three_agents.py", re.compile(r'asyncio.run\(main\("([^"]+)"\)\)')),
    ],
)
def test_an_examples_default_store_is_the_one_its_readme_block_shows(
    example: str, shown: re.Pattern[str]
) -> None:
    [url] = shown.findall(README)
    assert f'else "{url}"' in (EXAMPLES / example).read_text()
