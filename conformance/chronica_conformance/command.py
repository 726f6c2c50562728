"""``chronica conformance URL``: the suite as a subcommand (entry-point group ``chronica.commands``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from chronica_conformance.runner import run
from chronica_core.registry import registry

__all__ = ["main"]

DESCRIPTION = (
    "Run the conformance suite against a store URL and print pytest's summary. A backend that "
    "supplies its driver's faults (every bundled one does) runs the driver-failure group too."
)


def main(argv: Sequence[str]) -> int:
    """Run ``chronica conformance`` with the words after ``conformance``; return pytest's exit code.

    Args:
        argv: ``[--sync-only | --async-only] URL [PYTEST ARGS...]``; ``--sync-only`` and
            ``--async-only`` may also come after the URL.

    Returns:
        pytest's exit code (see :func:`chronica_conformance.run`); 2 for bad usage.

    Raises:
        ChronicaError: no installed backend handles the URL (``UnknownBackend``,
            ``BackendUnavailable``); the ``chronica`` command reports it with exit code 5.
    """
    parser = argparse.ArgumentParser(prog="chronica conformance", description=DESCRIPTION)
    parser.add_argument("--sync-only", action="store_true", help="run only the blocking store's cases")
    parser.add_argument("--async-only", action="store_true", help="run only the asyncio store's cases")
    parser.add_argument("url", help="the store URL to check")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra arguments for pytest")
    arguments = parser.parse_args(list(argv))
    registry().backend_for(arguments.url)
    pytest_args = list(arguments.pytest_args)
    only = [flavour for flavour in ("sync", "async") if getattr(arguments, f"{flavour}_only")]
    for flavour in ("sync", "async"):  # typed after the URL, they land among pytest's arguments
        if f"--{flavour}-only" in pytest_args:
            pytest_args.remove(f"--{flavour}-only")
            only.append(flavour)
    if len(set(only)) > 1:
        print("chronica conformance: give --sync-only or --async-only, not both", file=sys.stderr)
        return 2
    return run([arguments.url], pytest_args, only=only[0] if only else None)
