"""The README and the pages it sends a reader to: the status line, the paths it names, the backend
example the documentation shows as it is installed in the tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
VERSION = (ROOT / "chronica_core" / "VERSION").read_text().strip()
# A file of the repository named in code style, from its root: `docs/tutorial.md`, `CHANGELOG.md`.
_TOP = "docs|examples|integrations|backends|conformance|benchmarks|tests|chronica_core|\\.ci"
_NAMED_FILE = re.compile(rf"`((?:(?:{_TOP})/[\w./-]+|[A-Z]+)\.(?:md|py))`")


def test_the_status_line_says_the_version_the_licence_and_where_to_install_from() -> None:
    [status] = [line for line in README.splitlines()[:12] if line.startswith("**Status:**")]
    assert f"version {VERSION}," in status
    assert "not on a package index yet" in status
    following = README.split(status, 1)[1].splitlines()[1]
    assert "Apache-2.0" in following


def test_the_readme_sends_a_newcomer_to_the_tutorial_and_the_backend_guide_early() -> None:
    opening = "\n".join(README.splitlines()[:20])
    assert "`docs/tutorial.md`" in opening
    assert "`docs/how-to/pick-a-backend.md`" in opening


def test_the_two_commands_are_there_as_written() -> None:
    assert (
        "python3 -m venv .venv && .venv/bin/pip install . ./backends/sqlalchemy && .venv/bin/chronica demo"
        in README
    )
    assert "python3 -m venv .venv && .venv/bin/pip install tox && .venv/bin/tox" in README


PAGES = sorted(str(page.relative_to(ROOT)) for page in ROOT.glob("docs/**/*.md"))
DOCUMENTS = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", *PAGES]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_file_a_document_names_exists(document: str) -> None:
    named = set(_NAMED_FILE.findall((ROOT / document).read_text()))
    missing = {path for path in named if not (ROOT / path).is_file()}
    assert missing == set()


def test_the_backend_the_docs_show_is_the_one_the_tests_install() -> None:
    page = (ROOT / "docs" / "how-to" / "write-a-backend.md").read_text()
    shown = page.split("`chronica_notebook/plugin.py`:\n\n```python\n", 1)[1].split("```", 1)[0]
    installed = (ROOT / "tests" / "thirdparty_store" / "chronica_notebook" / "plugin.py").read_text()
    assert installed.split("from __future__ import annotations\n\n", 1)[1] == shown
