"""The documentation's Python examples run as written, and print what the page says they print.

Each page's ```python blocks are one session, run top to bottom in one namespace; a ```text
block right after a ```python block is what that block prints. A page's examples run on the
store URL the page names (``memory://`` in the tutorial).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = ["tutorial.md", "index.md", "how-to/frameworks.md", "how-to/history.md", "how-to/governance.md"]
FENCE = re.compile(r"^```(?P<language>\w*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(page: str) -> list[tuple[str, str]]:
    """Return the page's fenced blocks, in order, as (language, text)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [(match["language"], match["body"]) for match in FENCE.finditer(text)]


def test_the_pages_have_examples() -> None:
    languages = [language for language, _ in blocks("tutorial.md")]
    assert languages.count("python") >= 6
    assert languages.count("text") >= 6


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run_and_print_what_the_page_shows(page: str) -> None:
    fenced = blocks(page)
    namespace: dict[str, object] = {"__name__": f"docs_{Path(page).stem}"}
    ran = 0
    for position, (language, body) in enumerate(fenced):
        if language != "python":
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(body, f"{page}, block {position + 1}", "exec"), namespace)
        ran += 1
        following = fenced[position + 1] if position + 1 < len(fenced) else None
        if following is not None and following[0] == "text":
            assert printed.getvalue() == following[1], f"{page}, block {position + 1}"
    if page == "tutorial.md":
        assert ran >= 6
