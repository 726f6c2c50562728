"""The raw baseline for ``memory://``: a plain list per chronicum, appended to and scanned backwards."""

from __future__ import annotations

from collections.abc import Sequence

from chronica_core import Actum, ActumKind

__all__ = ["RawBaseline"]


class RawBaseline:
    """A dict of plain lists: what the in-memory store costs without locks, rules or ``at``.

    Args:
        url: ``memory://``; ignored.
        options: ignored.
    """

    name = "list"
    thread_safe = True
    fills_store = False

    def __init__(self, url: str = "memory://", **options: str) -> None:
        self._acta: dict[str, list[Actum]] = {}

    def prepare(self, chronicum_id: str, owner_id: str) -> None:
        """Start an empty list for the chronicum."""
        self._acta.setdefault(chronicum_id, [])

    def fill(self, chronicum_id: str, acta: Sequence[Actum]) -> None:
        """Extend the chronicum's list with ``acta``."""
        self._acta[chronicum_id].extend(acta)

    def append(self, actum: Actum) -> None:
        """Append ``actum`` to its chronicum's list."""
        self._acta[actum.chronicum_id].append(actum)

    def last_messages(self, chronicum_id: str, n: int) -> list[Actum]:
        """Scan backwards, stop at ``n`` messages, return them oldest first."""
        message = ActumKind.MESSAGE
        window: list[Actum] = []
        for actum in reversed(self._acta[chronicum_id]):
            if actum.kind is message:
                window.append(actum)
                if len(window) == n:
                    break
        window.reverse()
        return window

    def close(self) -> None:
        """Nothing to release."""
