"""chronica-sqlalchemy's native, retention and history methods: the core's, and ``own_acta``.

:class:`ShapedStore` is the blocking stores' mixin, :class:`AsyncShapedStore` the asyncio
stores'; both come before the planned store in the class's bases, whose ``_run_if_open`` they use.
"""

from __future__ import annotations

from chronica_core.model import ActaQuery, Actum
from chronica_core.planned_shapes import AsyncPlannedShapes, PlannedShapes
from chronica_sqlalchemy.plans import Plans

__all__ = ["AsyncShapedStore", "ShapedStore"]


class ShapedStore(PlannedShapes):
    """The core's :class:`PlannedShapes` on chronica-sqlalchemy's plans, and ``own_acta``."""

    plans: Plans

    def own_acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """The chronicum's own acta as :meth:`acta` reads them, whatever its history holds (for followers)."""
        return self._run_if_open(self.plans.acta(chronicum_id, query, own=True))


class AsyncShapedStore(AsyncPlannedShapes):
    """The asyncio twin of :class:`ShapedStore`."""

    plans: Plans

    async def own_acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """See :meth:`ShapedStore.own_acta`."""
        return await self._run_if_open(self.plans.acta(chronicum_id, query, own=True))
