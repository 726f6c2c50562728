"""The README's complete program runs as is and prints what the README says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


def test_the_complete_program_runs_and_prints_what_the_readme_says() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## A complete program") :]
    program = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    printed = re.search(r"```text\n(.*?)```", section, re.DOTALL)
    assert program is not None and printed is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(program.group(1), str(README), "exec"), {"__name__": "__main__"})
    assert out.getvalue() == printed.group(1)
