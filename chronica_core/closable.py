"""Refusing work once closed: the one check every store of this distribution makes after ``close``."""

from __future__ import annotations

from typing import Any, ClassVar

from chronica_core.errors import StoreError
from chronica_core.plans import Plan

__all__ = ["Closable"]


class Closable:
    """A store that refuses work once closed: its ``close`` calls :meth:`_mark_closed`.

    Every operation then raises ``StoreError("<backend_name>: store", "the store is closed")``
    (``"<backend_name>: async store"`` for an asyncio store), whatever it would have done, and
    writes nothing. Closing again is harmless.
    """

    backend_name: ClassVar[str] = "store"
    """The ``where`` prefix of the store's own errors, e.g. ``"postgres"``."""
    _closed: bool = False

    def _mark_closed(self) -> None:
        """Refuse every later operation (``close`` calls it)."""
        self._closed = True

    def _refuse_if_closed(self, plan: Plan[Any, Any] | None, where: str) -> None:
        """Raise ``StoreError(where, "the store is closed")`` (closing ``plan``) if it is."""
        if self._closed:
            if plan is not None:
                plan.close()
            raise StoreError(where, "the store is closed")
