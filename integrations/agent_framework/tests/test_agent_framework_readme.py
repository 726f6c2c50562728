"""The README's complete program runs as written and prints what the README shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```(?P<language>\w*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


def test_the_readme_program_prints_what_the_readme_shows() -> None:
    fenced = [(match["language"], match["body"]) for match in FENCE.finditer(README)]
    position = max(index for index, (language, _) in enumerate(fenced) if language == "python")
    program, (language, shown) = fenced[position][1], fenced[position + 1]
    assert language == "text"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(program, "README.md", "exec"), {"__name__": "readme"})
    assert printed.getvalue() == shown
