"""Run the conformance suite from Python or the ``chronica conformance`` CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["run"]


def run(urls: Sequence[str], pytest_args: Sequence[str] = (), *, only: str | None = None) -> int:
    """Run the whole suite against each store URL in a fresh interpreter (``python -m pytest``).

    The run gets its own process so that pytest rewrites the suite's assertions (a failure shows
    pytest's diff of the values) even when the caller has already imported the suite. Its output
    goes to this process's standard output and standard error as it is written.

    Args:
        urls: store URLs (``memory://``, ``postgresql://...``); empty runs every installed backend
            that needs no server.
        pytest_args: further pytest arguments, e.g. ``["-q", "-x"]``.
        only: ``"sync"`` or ``"async"`` to run that flavour of every case only (pytest's
            ``--chronica-sync-only`` / ``--chronica-async-only``); ``None`` runs both.

    Returns:
        pytest's exit code: 0 only when every case passed (1 some failed, 2 interrupted, 4 a usage
        error such as a URL no installed backend handles, 5 nothing was collected).

    Raises:
        ValueError: ``only`` is neither ``None``, ``"sync"`` nor ``"async"``.
    """
    if only not in (None, "sync", "async"):
        raise ValueError(f"only must be None, 'sync' or 'async', not {only!r}")
    from chronica_conformance.plugin import suite_module_path

    args = [suite_module_path(), "-p", "no:cacheprovider"]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        args += ["-p", "chronica_conformance.plugin"]
    for url in urls:
        args += ["--chronica-store", url]
    if only is not None:
        args.append(f"--chronica-{only}-only")
    command = [sys.executable, "-m", "pytest", *args, *pytest_args]
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.run(command, check=False).returncode
