"""MkDocs hooks: the repository's READMEs as pages, and the docstrings' Sphinx roles as code.

A page holding ``<!-- readme: backends/postgres/README.md -->`` gets that file's text (the path is
relative to the repository root). Links in it to the project's README files become links to the
site's pages for them, since the README files themselves are not part of the site.

The docstrings name code with Sphinx roles (``:class:`Chronicarius```), which mkdocstrings shows
as they are; on every page the role is dropped and the name stays in code style.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r"<!-- readme: (?P<path>[\w./-]+) -->")
ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj):(?=<code>)")
LINK = re.compile(r"\]\((?P<target>[^)#\s]+\.md)(?P<anchor>#[^)\s]*)?\)")

# README of the repository -> page of the site (relative to docs/).
PAGES = {
    "README.md": "index.md",
    "backends/postgres/README.md": "readmes/postgres.md",
    "backends/sqlalchemy/README.md": "readmes/sqlalchemy.md",
    "backends/mongodb/README.md": "readmes/mongodb.md",
    "backends/redis/README.md": "readmes/redis.md",
    "conformance/README.md": "readmes/conformance.md",
    "integrations/openai_agents/README.md": "readmes/openai-agents.md",
    "integrations/adk/README.md": "readmes/adk.md",
    "integrations/pydantic_ai/README.md": "readmes/pydantic-ai.md",
    "docs/contract.md": "contract.md",
}


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Replace each ``readme`` placeholder of ``page`` by the README's text, its links rewritten."""
    return INCLUDE.sub(lambda match: _readme(match["path"], page.file.src_uri), markdown)


def on_page_content(html: str, **_: Any) -> str:
    """Drop the Sphinx role before each name the docstrings mark with one."""
    return ROLE.sub("", html)


def _readme(path: str, page_uri: str) -> str:
    """Return the text of ``path`` with links to README files pointing at their pages."""
    text = (ROOT / path).read_text(encoding="utf-8")

    def rewrite(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), match["target"]))
        if target not in PAGES:
            return match[0]
        relative = posixpath.relpath(PAGES[target], posixpath.dirname(page_uri) or ".")
        return f"]({relative}{match['anchor'] or ''})"

    return LINK.sub(rewrite, text)
