"""The README's examples run as written (on memory://; the backend environments run them on theirs)."""

from __future__ import annotations

import ast
import os
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


def test_quickstart() -> None:
    assert run("quickstart.py") == [
        "ardian: A quiet table for four?",
        "search: Rumah Teduh has one.",
        "rafa: ChronicumNotFound",
    ]


def test_follow_sees_each_message_once_and_resumes() -> None:
    assert run("follow.py") == [
        "booking sees search: Rumah Teduh has one.",
        "booking sees ardian: Rumah Teduh, please.",
        "booking stopped; it resumes after the last message it saw",
        "booking sees ardian: Under Ardian.",
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


DOCS = EXAMPLES.parent / "docs"


def python_block(page: Path, containing: str) -> str:
    """The page's Python code block that contains ``containing``."""
    blocks = page.read_text().split("```python\n")[1:]
    [block] = [block.split("```", 1)[0] for block in blocks if containing in block]
    return block


def test_the_docs_show_the_capabilities_example_as_it_runs() -> None:
    example = (EXAMPLES / "capabilities.py").read_text()
    imports = example.split("from __future__ import annotations\n\n", 1)[1].split("url = sys.argv", 1)[0]
    body = example.split('url = sys.argv[1] if len(sys.argv) > 1 else "memory://"\n', 1)[1]
    body = body.replace(
        "with open_store(url) as store:", 'with open_store("memory://") as store:  # or any bundled store'
    )
    page = DOCS / "how-to" / "capabilities.md"
    assert python_block(page, "record_acta") == imports.replace("import sys\n", "") + body


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
