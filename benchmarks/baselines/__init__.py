"""Raw baselines: each backend's drivers doing a store's work by hand, as columns beside the store.

A backend named ``NAME`` (its ``Backend.name``) has its baseline in ``benchmarks/baselines/NAME.py``:

- ``FLOOR: str`` — what its ``floor`` column is, printed at the top of a report.
- ``Loader`` — a class ``Loader(url, **options)`` with the shape of :class:`Loader`: it creates
  and bulk-loads chronica into the tables the store reads (the store is opened, so migrated,
  first), one connection of its own, used from the main thread only.
- ``COLUMNS: dict[str, type]`` — each a class ``(url, options)`` with the shape of
  :class:`Column`, the first named ``"floor"``: the bare driver running the simplest prepared
  statement that does the job, on a connection it keeps. Other columns show something beside the
  floor (SQLAlchemy Core, the store's own SQL on the driver as it comes). An instance opens its
  connection on first use and holds one (two where the store's reads and writes go to two
  pools); the harness makes one per column for the latency rounds and one per writer thread.
- ``ASYNC_COLUMNS: dict[str, type]`` (optional) — the asyncio twins, under the same names, with
  the shape of :class:`AsyncColumn` (``"floor"``: the driver's own asyncio API).

A column never fills anything: the loader made every chronicum it appends to or reads.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from chronica_core import Actum

__all__ = ["FLOOR", "AsyncColumn", "Baseline", "Column", "Loader", "load_baseline"]

FLOOR = "floor"
"""The name of the column every target is judged against unless it names another."""


class Loader(Protocol):
    """Creates and fills chronica in the store's tables (constructor ``(url, **options)``).

    ``fills_store`` (a class attribute): ``True`` when the rows it writes are the store's own,
    so the store reads the same history; ``False`` (memory) when the harness must also fill the
    store through ``Chronicarius.record_actum``. Optional: ``fill_chronica(chronica)``, bulk-loading
    many chronica (no acta) as ``Store.create`` would save each (the listing phase's other owners;
    without it, or without ``fills_store``, the harness calls ``Store.create`` for each).
    """

    fills_store: bool

    def prepare(self, chronicum_id: str, owner_id: str) -> None:
        """Make the chronicum exist, as ``Store.create`` would."""
        ...

    def fill(self, chronicum_id: str, acta: Sequence[Actum]) -> None:
        """Bulk-load ``acta`` (ids and ``at`` set, in order) into the prepared chronicum, any fast way."""
        ...

    def close(self) -> None:
        """Release its connection."""
        ...


class Column(Protocol):
    """One raw column (constructor ``(url, options)``; connects on first use)."""

    def append(self, actum: Actum) -> None:
        """Append ``actum`` (``id`` set, ``at`` not) to its prepared chronicum, taking the next place."""
        ...

    def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """The newest ``n`` messages of the chronicum, oldest first (rows as the driver gives them)."""
        ...

    def close(self) -> None:
        """Release its connection(s)."""
        ...


class AsyncColumn(Protocol):
    """The asyncio twin of a :class:`Column` (connects on first use, inside the harness's loop)."""

    async def append(self, actum: Actum) -> None:
        """As :meth:`Column.append`, awaited."""
        ...

    async def last_messages(self, chronicum_id: str, n: int) -> list[Any]:
        """As :meth:`Column.last_messages`, awaited."""
        ...

    async def close(self) -> None:
        """Release its connection (in the loop that used it)."""
        ...


@dataclass(frozen=True, slots=True)
class Baseline:
    """One backend's baseline module, read.

    Attributes:
        floor: what its floor column is.
        loader: its :class:`Loader` class.
        columns: its column classes, the floor first.
        async_columns: its asyncio column classes (a subset of the names of ``columns``).
    """

    floor: str
    loader: type[Any]
    columns: dict[str, type[Any]]
    async_columns: dict[str, type[Any]] = field(default_factory=dict)

    def open_loader(self, url: str, options: dict[str, str]) -> Any:
        """A new loader for the store at ``url``."""
        return self.loader(url, **options)

    def open_column(self, name: str, url: str, options: dict[str, str]) -> Column:
        """A new instance of column ``name`` (it connects on first use)."""
        column: Column = self.columns[name](url, options)
        return column

    def open_async_column(self, name: str, url: str, options: dict[str, str]) -> AsyncColumn:
        """A new instance of asyncio column ``name`` (it connects on first use, in the caller's loop)."""
        column: AsyncColumn = self.async_columns[name](url, options)
        return column


def _read(module: ModuleType) -> Baseline:
    columns: dict[str, type[Any]] = dict(module.COLUMNS)
    if next(iter(columns), None) != FLOOR:
        raise AttributeError(f"{module.__name__}.COLUMNS must name {FLOOR!r} first")
    async_columns: dict[str, type[Any]] = dict(getattr(module, "ASYNC_COLUMNS", {}))
    return Baseline(str(module.FLOOR), module.Loader, columns, async_columns)


def load_baseline(backend_name: str) -> Baseline:
    """Read ``benchmarks.baselines.<backend_name>``.

    Raises:
        ImportError: there is no baseline module for the backend, or its driver is missing.
        AttributeError: the module lacks ``FLOOR``, ``Loader`` or ``COLUMNS``, or its first
            column is not the floor.
    """
    return _read(importlib.import_module(f"{__name__}.{backend_name}"))
