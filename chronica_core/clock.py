"""The one clock a store's times come from: the application host's, in UTC.

A chronicum's ``started_at`` (set by the rules when a first write creates it, or by a fork), its
``last_actum_at`` and every actum's ``at`` are read from :func:`now`, on every bundled backend,
so that ``started_at`` is never after the chronicum's first ``at`` however far the host's clock
is from the database's. A store keeps ``at`` from going back along a chronicum (a clock that went
back, or another host's running behind, gives the newest actum's ``at`` instead).
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["now"]


def now() -> datetime:
    """The current moment of the application host's clock, timezone-aware UTC (microseconds)."""
    return datetime.now(UTC)
