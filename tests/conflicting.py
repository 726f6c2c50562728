"""A store conflict as a backend raises one, for the core's tests of conflicts."""

from __future__ import annotations

from chronica_core import StoreConflict


class DriverConflict(Exception):
    """Stands in for a driver's serialization failure."""


def driver_conflict(message: str = "could not serialize access due to concurrent update") -> StoreConflict:
    """A ``StoreConflict`` saying ``message``, chained to a :class:`DriverConflict`, as from a backend."""
    try:
        raise DriverConflict(message)
    except DriverConflict as error:
        conflict = StoreConflict("test: record actum", str(error))
        conflict.__cause__ = error
        return conflict
