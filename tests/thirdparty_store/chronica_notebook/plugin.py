"""A complete minimal Chronica backend: a notebook of acta kept in one process.

Copy this file into your own distribution, point the ``chronica`` entry-point group at it, and
``pytest --chronica-store notebook://`` runs the conformance suite against it.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from chronica_core import (
    ActaQuery,
    Actum,
    Backend,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    Closable,
    IdempotentStore,
    hookimpl,
)

_WHERE = "notebook: store"


class NotebookStore(IdempotentStore, Closable):
    """Keeps every chronicum in a dict behind one lock; a store only saves and reads.

    Once closed, every operation raises ``StoreError("notebook: store", "the store is closed")``.
    """

    backend_name = "notebook"

    def __init__(self, url: str = "notebook://", **options: Any) -> None:
        self._lock = threading.Lock()
        self._chronica: dict[str, Chronicum] = {}
        self._acta: dict[str, list[Actum]] = {}
        self._keys: dict[tuple[str, str], Actum] = {}

    def create(self, chronicum: Chronicum) -> None:
        """Save ``chronicum``; raise ``ChronicumExists`` if the id is taken."""
        with self._lock:
            self._refuse_if_closed(None, _WHERE)
            if chronicum.id in self._chronica:
                raise ChronicumExists(chronicum.id)
            self._chronica[chronicum.id] = chronicum
            self._acta[chronicum.id] = []

    def get(self, chronicum_id: str) -> Chronicum:
        """Return the chronicum; raise ``ChronicumNotFound`` if there is none."""
        with self._lock:
            self._refuse_if_closed(None, _WHERE)
            if chronicum_id not in self._chronica:
                raise ChronicumNotFound(chronicum_id)
            return self._chronica[chronicum_id]

    def record(self, actum: Actum) -> Actum:
        """Append ``actum`` with ``at`` set; raise ``ChronicumNotFound`` if its chronicum is missing."""
        with self._lock:
            return self._append(actum)

    def record_idempotent(self, actum: Actum, key: str) -> Actum:
        """Append ``actum`` once per ``key`` and chronicum; a repeat returns the first actum."""
        with self._lock:
            first = self._keys.get((actum.chronicum_id, key))
            if first is None:
                first = self._keys[(actum.chronicum_id, key)] = self._append(actum)
            return first

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """Filter by kinds and actor kinds, then keep the last ``query.last_n``, oldest first."""
        with self._lock:
            self._refuse_if_closed(None, _WHERE)
            if chronicum_id not in self._acta:
                raise ChronicumNotFound(chronicum_id)
            kept = [
                actum
                for actum in self._acta[chronicum_id]
                if (query.actum_kinds is None or actum.kind in query.actum_kinds)
                and (query.actor_kinds is None or actum.actor_kind in query.actor_kinds)
            ]
        return kept[-query.last_n :] if query.last_n > 0 else kept

    def close(self) -> None:
        """Refuse every later operation (closing again is harmless)."""
        self._mark_closed()

    def _append(self, actum: Actum) -> Actum:
        """Append under the lock: ``at`` is now, never earlier than the chronicum's last ``at``."""
        self._refuse_if_closed(None, _WHERE)
        if actum.chronicum_id not in self._chronica:
            raise ChronicumNotFound(actum.chronicum_id)
        last = self._chronica[actum.chronicum_id].last_actum_at
        now = datetime.now(UTC)
        stored = replace(actum, at=now if last is None else max(now, last))
        self._acta[actum.chronicum_id].append(stored)
        self._chronica[actum.chronicum_id] = replace(
            self._chronica[actum.chronicum_id], last_actum_at=stored.at
        )
        return stored


@hookimpl
def chronica_backends() -> list[Backend]:
    """Tell Chronica that ``notebook://`` URLs open a :class:`NotebookStore`."""
    return [
        Backend(
            name="notebook",
            schemes=("notebook",),
            idempotent=True,
            open=NotebookStore,
            install="chronica-notebook",
            needs_server=False,
            example_url="notebook://",
        )
    ]
