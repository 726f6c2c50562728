"""Raw baselines: each backend's raw driver doing the same work as its store, for the ratios.

A backend named ``NAME`` (its ``Backend.name``) has its baseline in ``benchmarks/baselines/NAME.py``
as a class ``RawBaseline`` with the shape of :class:`Baseline` below. Optional attributes let a
baseline say more (all read with ``getattr`` and a default, so a baseline without them works):

- ``name: str`` — the column heading for its numbers (default ``"raw"``).
- ``variants: dict[str, Baseline]`` — several raw columns (e.g. SQLAlchemy Core and the DB-API
  driver); each variant is timed and printed in its own column. ``prepare`` and ``fill`` are then
  called on the object itself if it has them, else on the first variant. Targets refer to the first.
- ``thread_safe: bool`` (default ``False``) — ``append`` may be called from 40 threads at once on
  one instance. When ``False`` the harness opens one ``RawBaseline`` per writer thread.
- ``async_variants: dict[str, AsyncBaseline]`` — the asyncio twin of a variant, under that
  variant's name (e.g. psycopg's ``AsyncConnection`` beside its ``Connection``), running the same
  SQL. Timed on the async rows in the same rounds, each appending into a copy of its own; its
  ``async/sync`` ratio shows what the driver's own asyncio API costs. Opened lazily inside the
  harness's event loop, closed there.
- ``fills_store: bool`` (default ``True``) — ``fill`` writes into the tables the store reads, so the
  store is measured on the very history the baseline loaded. ``False`` (memory) makes the harness
  fill the store through ``Chronicarius.record_actum`` as well.
- ``fill_chronica(chronica: Sequence[Chronicum]) -> None`` — bulk-load many chronica (no acta)
  into the store's tables, as ``Store.create`` would save each, any fast way (the listing
  benchmark's other owners). Used only when ``fills_store``; without it the harness calls
  ``Store.create`` for each.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Protocol

from chronica_core import Actum

__all__ = ["AsyncBaseline", "Baseline", "load_baseline_class"]


class Baseline(Protocol):
    """What the harness calls on a raw baseline (the constructor is ``(url, **options)``)."""

    def prepare(self, chronicum_id: str, owner_id: str) -> None:
        """Make the chronicum exist, as the store would (its row, counters, ...)."""
        ...

    def fill(self, chronicum_id: str, acta: Sequence[Actum]) -> None:
        """Bulk-load ``acta`` (ids and ``at`` set, in order) into the prepared chronicum, any fast way."""
        ...

    def append(self, actum: Actum) -> None:
        """Run exactly the statement(s) the store runs for ``record`` (``actum.id`` is set, ``at`` not)."""
        ...

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """Run the query ``get_acta(last_n=n, actum_kinds=[message])`` makes the store run."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class AsyncBaseline(Protocol):
    """The asyncio twin of a raw variant: the same statements through the driver's asyncio API."""

    async def append(self, actum: Actum) -> None:
        """As :meth:`Baseline.append`, awaited."""
        ...

    async def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """As :meth:`Baseline.last_messages`, awaited."""
        ...

    async def close(self) -> None:
        """Release connections (called in the loop that used them)."""
        ...


def load_baseline_class(backend_name: str) -> type[Any]:
    """Return ``benchmarks.baselines.<backend_name>.RawBaseline``.

    Raises:
        ImportError: there is no baseline module for the backend, or its driver is missing.
        AttributeError: the module has no ``RawBaseline``.
    """
    module = importlib.import_module(f"{__name__}.{backend_name}")
    baseline_class: type[Any] = module.RawBaseline
    return baseline_class
