"""The native, retention and history capabilities of a planned store, written once per flavour.

A backend whose plans (see :mod:`chronica_core.planned`) also plan ``idle_chronica``,
``erase_idle``, ``layout``, ``window``, ``locate``, ``fork`` and ``record_summary`` puts
:class:`PlannedShapes` (blocking) or :class:`AsyncPlannedShapes` (asyncio) before its
:class:`~chronica_core.planned.PlannedStore` in the class's bases: each method runs its plan
through the store's ``_run_if_open``, and ``keeps_native`` declares the ``native`` capability.
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from chronica_core.history import Layout, Located, Segment, WindowReads, WindowRows
from chronica_core.model import Actum, Chronicum
from chronica_core.plans import Plan
from chronica_core.store import ListingPosition

__all__ = ["AsyncPlannedShapes", "PlannedShapes", "ShapePlans"]

Result = TypeVar("Result")


class ShapePlans(Protocol):
    """The plans :class:`PlannedShapes` runs, each keeping the contract of the store method it serves."""

    def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> Plan[Any, list[Chronicum]]:
        """See :meth:`chronica_core.RetentionStore.idle_chronica`."""
        ...

    def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> Plan[Any, int]:
        """See :meth:`chronica_core.RetentionStore.erase_idle`."""
        ...

    def layout(self, chronicum_id: str) -> Plan[Any, Layout]:
        """See :meth:`chronica_core.HistoryStore.layout`."""
        ...

    def window(self, chronicum_id: str, reads: WindowReads) -> Plan[Any, WindowRows]:
        """See :meth:`chronica_core.HistoryStore.window`."""
        ...

    def locate(
        self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]
    ) -> Plan[Any, dict[str, Located]]:
        """See :meth:`chronica_core.HistoryStore.locate`."""
        ...

    def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> Plan[Any, None]:
        """See :meth:`chronica_core.HistoryStore.fork`."""
        ...

    def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Plan[Any, Actum]:
        """See :meth:`chronica_core.HistoryStore.record_summary`."""
        ...


class PlannedShapes:
    """``keeps_native``, ``idle_chronica``, ``erase_idle`` and the history methods of a blocking store."""

    plans: ShapePlans

    if TYPE_CHECKING:  # the planned store's own

        def _run_if_open(self, plan: Plan[Any, Result]) -> Result: ...

    def keeps_native(self) -> bool:
        """Return ``True``: acta keep their native form (see :class:`chronica_core.NativeStore`)."""
        return True

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


class AsyncPlannedShapes:
    """The asyncio twin of :class:`PlannedShapes`."""

    plans: ShapePlans

    if TYPE_CHECKING:  # the planned store's own

        async def _run_if_open(self, plan: Plan[Any, Result]) -> Result: ...

    def keeps_native(self) -> bool:
        """Return ``True`` (a plain method, as on the blocking store)."""
        return True

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
