"""The raw baseline for ``memory://``: a plain list per chronicum, appended to and scanned backwards.

The floor is what the in-memory store costs without locks, rules, ids or ``at``. The lists live
in this module, shared by the loader and every column instance (the store has tables of its own,
so the harness fills it through ``record_actum`` as well).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chronica_core import Actum, ActumKind

__all__ = ["COLUMNS", "FLOOR", "Loader"]

FLOOR = "a Python list per chronicum: append, and a backwards scan that stops at n messages"

_LISTS: dict[str, list[Actum]] = {}


class Loader:
    """Starts and extends the lists (the store is filled by the harness itself)."""

    fills_store = False

    def __init__(self, url: str = "memory://", **options: str) -> None:
        """Nothing to open: ``url`` and ``options`` are ignored."""

    def prepare(self, chronicum_id: str, owner_id: str) -> None:
        """Start an empty list for the chronicum."""
        _LISTS.setdefault(chronicum_id, [])

    def fill(self, chronicum_id: str, acta: Sequence[Actum]) -> None:
        """Extend the chronicum's list with ``acta``."""
        _LISTS[chronicum_id].extend(acta)

    def close(self) -> None:
        """Nothing to release."""


class Floor:
    """Append to the chronicum's list; scan it backwards for the window."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        self._lists = _LISTS

    def append(self, actum: Actum) -> None:
        """Append ``actum`` to its chronicum's list."""
        self._lists[actum.chronicum_id].append(actum)

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """Scan backwards, stop at ``n`` messages, return them oldest first."""
        message = ActumKind.MESSAGE
        window: list[Actum] = []
        for actum in reversed(self._lists[chronicum_id]):
            if actum.kind is message:
                window.append(actum)
                if len(window) == n:
                    break
        window.reverse()
        return window

    def close(self) -> None:
        """Nothing to release."""


COLUMNS: dict[str, type[Any]] = {"floor": Floor}
