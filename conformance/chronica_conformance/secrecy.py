"""Checks that a store never shows the password in its URL, for a backend's own tests.

Put :data:`SECRET` in a store URL, as written (it holds a ``/``, so the URL is malformed: the
kind a driver quotes back) or percent-encoded (:data:`ENCODED_SECRET`), in the user information
or in a query parameter; make the store open, fail or succeed; then hand everything that was
shown to :func:`assert_hidden`, which finds the password in any spelling (decoded, encoded,
escaped, or either half of it). What was shown is gathered by:

- :func:`opening_says`: opening the store with ``open_store`` and ``open_async_store`` and reading
  once: every exception raised with those chained to it (as a traceback prints them, and their
  ``str`` and ``repr``), every log record of any logger and every warning;
- :func:`cli_says`: the ``chronica`` command's standard output and standard error for ``demo``,
  ``migrate`` and ``record`` (:data:`CLI_RUNS`), and :func:`conformance_says` for a short
  ``chronica conformance`` run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from chronica_core import open_async_store, open_store
from chronica_core.redaction import linked_exceptions

__all__ = [
    "CLI_RUNS",
    "CONFORMANCE_SAMPLE",
    "ENCODED_SECRET",
    "SECRET",
    "assert_hidden",
    "chronica",
    "cli_says",
    "conformance_says",
    "leaked",
    "opening_says",
    "said_by_error",
]

SECRET = "Sekr3t/Zq9x7"
"""The marker password, as written: its ``/`` makes a URL holding it malformed."""

ENCODED_SECRET = quote(SECRET, safe="")
"""The marker password percent-encoded, as a well-formed URL holds it: ``Sekr3t%2FZq9x7``."""

_FRAGMENTS = ("sekr3t", "zq9x7")
"""Each half of :data:`SECRET`, lowercase: any spelling of the password holds one of them."""

CLI_RUNS: tuple[tuple[str, ...], ...] = (
    ("demo",),
    ("migrate",),
    (
        *("record", "secrecy-check", "--owner", "ardian", "--kind", "message"),
        *("--actor-kind", "human", "--actor", "ardian", "--content", "hello"),
    ),
)
"""The ``chronica`` subcommands that open a store named by ``--store`` (appended by :func:`cli_says`)."""


def leaked(text: str) -> list[str]:
    """The halves of :data:`SECRET` found in ``text`` (case ignored); ``[]`` when it shows none."""
    folded = text.lower()
    return [fragment for fragment in _FRAGMENTS if fragment in folded]


def assert_hidden(text: str, what: str) -> None:
    """Assert that ``text`` (what ``what`` showed) holds no spelling of :data:`SECRET`."""
    found = leaked(text)
    assert not found, f"{what} shows the URL's password ({', '.join(found)} found):\n{text}"


def said_by_error(error: BaseException) -> str:
    """Everything ``error`` can show, as one text.

    That is its traceback as printed (chained exceptions and notes included), and the ``str``
    and ``repr`` of each exception of its chain.
    """
    parts = ["".join(traceback.format_exception(error))]
    for current in linked_exceptions(error):
        parts += [str(current), repr(current)]
    return "\n".join(parts)


class _Collector(logging.Handler):
    def __init__(self, said: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.said = said

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append(self.format(record))


@contextmanager
def _listening() -> Iterator[list[str]]:
    """Gather every log record (any logger, any level) and every warning issued inside."""
    said: list[str] = []
    collector = _Collector(said)
    root = logging.getLogger()
    level = root.level
    root.addHandler(collector)
    root.setLevel(logging.DEBUG)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield said
            finally:
                said += [f"{warning.category.__name__}: {warning.message}" for warning in caught]
    finally:
        root.removeHandler(collector)
        root.setLevel(level)


async def _open_async(url: str, options: dict[str, object], said: list[str]) -> None:
    try:
        store = open_async_store(url, **options)
        try:
            await store.get("secrecy-check")
        finally:
            await store.close()
    except Exception as error:  # noqa: BLE001 - whatever it is, its text is what is checked
        said.append(said_by_error(error))


def opening_says(url: str, **options: object) -> str:
    """Open ``url`` blocking, then asyncio, read a chronicum from each, close; return all that was shown.

    That is each exception raised (any kind: its text is what counts) with its chain, every log
    record and every warning. A store that opens is read (``ChronicumNotFound`` is expected) and
    closed. ``options`` go to both openers.
    """
    with _listening() as said:
        try:
            with open_store(url, **options) as store:
                store.get("secrecy-check")
        except Exception as error:  # noqa: BLE001 - whatever it is, its text is what is checked
            said.append(said_by_error(error))
        asyncio.run(_open_async(url, dict(options), said))
    return "\n".join(said)


def chronica(*arguments: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the ``chronica`` command installed next to this Python, without ``$CHRONICA_STORE``."""
    command = [str(Path(sys.executable).with_name("chronica")), *arguments]
    environment = {key: value for key, value in os.environ.items() if key != "CHRONICA_STORE"}
    return subprocess.run(
        command, capture_output=True, text=True, env=environment, timeout=timeout, check=False
    )


def cli_says(url: str, *options: str) -> str:
    """Run each of :data:`CLI_RUNS` with ``--store url`` (and ``--option`` each of ``options``).

    Returns their exit codes, standard outputs and standard errors, one after the other.
    """
    said: list[str] = []
    for run in CLI_RUNS:
        arguments = [*run, "--store", url, *(item for option in options for item in ("--option", option))]
        result = chronica(*arguments)
        said.append(f"$ chronica {run[0]} -> exit {result.returncode}\n{result.stdout}\n{result.stderr}")
    return "\n".join(said)


CONFORMANCE_SAMPLE = ("-v", "--showlocals", "-k", "test_s1_get_returns_the_stored_owner")
"""The arguments after the URL of :func:`conformance_says`: one case, in each flavour, shown in
full (its test ids listed, and the arguments and locals of every frame of a failure)."""


def conformance_says(url: str) -> str:
    """Run ``chronica conformance url`` on a sample of the suite (:data:`CONFORMANCE_SAMPLE`).

    Returns the exit code, standard output and standard error.
    """
    result = chronica("conformance", url, *CONFORMANCE_SAMPLE)
    return f"$ chronica conformance -> exit {result.returncode}\n{result.stdout}\n{result.stderr}"
