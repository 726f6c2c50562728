"""Store calls that conflicted with a concurrent transaction, tried again a bounded number of times.

A database at SERIALIZABLE isolation, one that found a deadlock, or a Galera cluster whose
certification refused a commit rolls the transaction back and tells the client to try again
(PostgreSQL's SQLSTATE 40001 and 40P01, MariaDB's 1213 and 1205). A backend raises
:class:`~chronica_core.StoreConflict` for exactly those errors, and only where the database
guarantees that the failed try wrote nothing; each backend decides that in a small module of its
own (``chronica_postgres.conflicts``, ``chronica_sqlalchemy.conflicts``). Repeating the call then
cannot write twice, keyed or not, so ``Chronicarius`` does it here, for every store and both
flavours: up to :data:`CONFLICT_TRIES` tries, with a random pause before each new one ("full
jitter": writers that collided do not collide again in step), and the last ``StoreConflict``
raised when all conflicted.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Final, TypeVar

from chronica_core.errors import StoreConflict

__all__ = [
    "CONFLICT_TRIES",
    "FIRST_PAUSE",
    "LONGEST_PAUSE",
    "again_after_conflict",
    "again_after_conflict_async",
    "conflict_pauses",
]

Result = TypeVar("Result")

CONFLICT_TRIES: Final = 20
"""How many times one store call is tried in all while it conflicts."""
FIRST_PAUSE: Final = 0.005
"""The longest pause before the second try, in seconds; it doubles before each later one..."""
LONGEST_PAUSE: Final = 1.0
"""...up to this many seconds. Twenty tries pause 12.3 s at most in all, half that on average."""

_log = logging.getLogger("chronica.conflicts")


def conflict_pauses() -> Iterator[float]:
    """The pauses before the second to the last try, in seconds: each random up to its bound."""
    for retry in range(CONFLICT_TRIES - 1):
        yield random.uniform(0.0, min(LONGEST_PAUSE, FIRST_PAUSE * 2**retry))


def _gave_up(conflict: StoreConflict) -> StoreConflict:
    """The error raised once every try conflicted: the last one's, saying how many tries there were."""
    given_up = StoreConflict(
        conflict.where, f"{conflict.detail} (conflicted {CONFLICT_TRIES} times in a row)"
    )
    given_up.__cause__ = conflict.__cause__
    return given_up


def again_after_conflict(call: Callable[[], Result], conflict: StoreConflict) -> Result:
    """Call ``call()`` again, after a pause, each time it raises ``StoreConflict``, up to the bound.

    Args:
        call: one store operation, with its arguments bound, whose first try raised ``conflict``
            (the caller makes the first try itself, so that one costs nothing more).
        conflict: what the first try raised.

    Returns:
        What the first later try that did not conflict returned.

    Raises:
        StoreConflict: all :data:`CONFLICT_TRIES` tries conflicted; chained to the last try's
            driver exception. Anything else ``call`` raises propagates at once.
    """
    for pause in conflict_pauses():
        _log.debug("%s; trying again in %.3f s", conflict, pause)
        time.sleep(pause)
        try:
            return call()
        except StoreConflict as again:
            conflict = again
    raise _gave_up(conflict) from conflict.__cause__


async def again_after_conflict_async(
    call: Callable[[], Awaitable[Result]], conflict: StoreConflict
) -> Result:
    """The asyncio flavour of :func:`again_after_conflict`: ``await call()``, pausing with asyncio."""
    for pause in conflict_pauses():
        _log.debug("%s; trying again in %.3f s", conflict, pause)
        await asyncio.sleep(pause)
        try:
            return await call()
        except StoreConflict as again:
            conflict = again
    raise _gave_up(conflict) from conflict.__cause__
