"""MkDocs hooks: the docstrings' Sphinx roles shown as code.

The docstrings name code with Sphinx roles (``:class:`Chronicarius```), which mkdocstrings shows
as they are; on every page the role is dropped and the name stays in code style.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj):(?=<code>)")


def on_page_content(html: str, **_: Any) -> str:
    """Drop the Sphinx role before each name the docstrings mark with one."""
    return ROLE.sub("", html)
