"""A psycopg that finds no libpq says what to install, instead of an ImportError traceback.

chronica-postgres depends on plain ``psycopg``: without its ``binary`` (or ``c``) extra and
without a system libpq, ``import psycopg`` raises ``ImportError: no pq wrapper available``. The
import is made to fail that way in a fresh interpreter (no server needed).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

CLONE = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent(
    """
    import sys

    class NoLibpq:
        def find_spec(self, name, path=None, target=None):
            if name == "psycopg.pq":
                raise ImportError(
                    "no pq wrapper available.\\nAttempts:\\n"
                    "- couldn't import psycopg 'c' implementation: No module named 'psycopg_c'\\n"
                    "- couldn't import psycopg 'binary' implementation: No module named 'psycopg_binary'\\n"
                    "- couldn't import psycopg 'python' implementation: libpq library not found"
                )
            return None

    sys.meta_path.insert(0, NoLibpq())
    from chronica_core import BackendUnavailable, open_async_store, open_store

    for opener in (open_store, open_async_store):
        try:
            opener("postgresql://app:s3cret@127.0.0.1:5432/test")
        except BackendUnavailable as error:
            print(f"{type(error.__cause__).__name__}: {error}")
    """
)


def test_no_libpq_is_backend_unavailable_naming_the_binary_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    line = (
        "ImportError: backend 'postgres' cannot load psycopg (no pq wrapper available.): psycopg needs "
        f"libpq; pip install '{CLONE}/backends/postgres[binary]' brings one"
    )
    assert done.stdout.splitlines() == [line, line]
