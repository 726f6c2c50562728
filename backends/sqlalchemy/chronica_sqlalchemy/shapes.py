"""The native, retention and history capabilities of the stores: each method runs its plan of :mod:`.plans`.

:class:`ShapedStore` is the blocking stores' mixin, :class:`AsyncShapedStore` the asyncio
stores'; both come before the planned store in the class's bases, whose ``_run_if_open`` they use.
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from chronica_core.history import Layout, Located, Segment, WindowReads, WindowRows
from chronica_core.model import ActaQuery, Actum, Chronicum
from chronica_core.plans import Plan
from chronica_core.store import ListingPosition
from chronica_sqlalchemy.plans import Plans

__all__ = ["AsyncShapedStore", "ShapedStore"]

Result = TypeVar("Result")


class ShapedStore:
    """``keeps_native``, ``idle_chronica``, ``erase_idle`` and the history methods of a blocking store."""

    plans: Plans

    if TYPE_CHECKING:  # the planned store's own

        def _run_if_open(self, plan: Plan[Any, Result]) -> Result: ...

    def keeps_native(self) -> bool:
        """Return ``True``: acta keep their native form (see :class:`chronica_core.NativeStore`)."""
        return True

    def own_acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """The chronicum's own acta as :meth:`acta` reads them, whatever its history holds (for followers)."""
        return self._run_if_open(self.plans.acta(chronicum_id, query, own=True))

    def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> list[Chronicum]:
        """See :meth:`chronica_core.RetentionStore.idle_chronica`."""
        return self._run_if_open(self.plans.idle_chronica(idle_before, owner_id, after, limit))

    def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> int:
        """See :meth:`chronica_core.RetentionStore.erase_idle`."""
        return self._run_if_open(self.plans.erase_idle(chronicum_id, idle_before, owner_digest))

    def layout(self, chronicum_id: str) -> Layout:
        """See :meth:`chronica_core.HistoryStore.layout`."""
        return self._run_if_open(self.plans.layout(chronicum_id))

    def window(self, chronicum_id: str, reads: WindowReads) -> WindowRows:
        """See :meth:`chronica_core.HistoryStore.window`."""
        return self._run_if_open(self.plans.window(chronicum_id, reads))

    def locate(self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]) -> dict[str, Located]:
        """See :meth:`chronica_core.HistoryStore.locate`."""
        return self._run_if_open(self.plans.locate(lineage, actum_ids))

    def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> None:
        """See :meth:`chronica_core.HistoryStore.fork`."""
        self._run_if_open(self.plans.fork(chronicum, lineage))

    def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Actum:
        """See :meth:`chronica_core.HistoryStore.record_summary`."""
        return self._run_if_open(self.plans.record_summary(actum, first, last, version, key))


class AsyncShapedStore:
    """The asyncio twin of :class:`ShapedStore`."""

    plans: Plans

    if TYPE_CHECKING:  # the planned store's own

        async def _run_if_open(self, plan: Plan[Any, Result]) -> Result: ...

    def keeps_native(self) -> bool:
        """Return ``True`` (a plain method, as on the blocking store)."""
        return True

    async def own_acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """See :meth:`ShapedStore.own_acta`."""
        return await self._run_if_open(self.plans.acta(chronicum_id, query, own=True))

    async def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> list[Chronicum]:
        """See :meth:`chronica_core.RetentionStore.idle_chronica`."""
        return await self._run_if_open(self.plans.idle_chronica(idle_before, owner_id, after, limit))

    async def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> int:
        """See :meth:`chronica_core.RetentionStore.erase_idle`."""
        return await self._run_if_open(self.plans.erase_idle(chronicum_id, idle_before, owner_digest))

    async def layout(self, chronicum_id: str) -> Layout:
        """See :meth:`chronica_core.HistoryStore.layout`."""
        return await self._run_if_open(self.plans.layout(chronicum_id))

    async def window(self, chronicum_id: str, reads: WindowReads) -> WindowRows:
        """See :meth:`chronica_core.HistoryStore.window`."""
        return await self._run_if_open(self.plans.window(chronicum_id, reads))

    async def locate(self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]) -> dict[str, Located]:
        """See :meth:`chronica_core.HistoryStore.locate`."""
        return await self._run_if_open(self.plans.locate(lineage, actum_ids))

    async def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> None:
        """See :meth:`chronica_core.HistoryStore.fork`."""
        await self._run_if_open(self.plans.fork(chronicum, lineage))

    async def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Actum:
        """See :meth:`chronica_core.HistoryStore.record_summary`."""
        return await self._run_if_open(self.plans.record_summary(actum, first, last, version, key))
