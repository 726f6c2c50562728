"""Following a chronicum: the plans behind ``Chronicarius.follow``, written once for both flavours.

A follower keeps one position: the id of the last actum it has read (yielded, or passed over by
its filters). Each step reads what was recorded after that position, in write order, and moves
the position to the last actum read; so nothing is skipped and nothing is read twice, whatever
the filters, however many writers there are, and across a lost connection (the next read starts
from the same position). When nothing is new, the step waits:

- on a store with the ``follow`` capability (:class:`chronica_core.FollowStore`), in
  ``wait_for_acta``, which the store ends when the chronicum changes (a notification, a wake-up,
  or a cheap check of its own), and reads with ``acta_after``;
- on any other store, by polling: it pauses ``poll_interval`` seconds, then reads the newest
  :data:`FOLLOW_PAGE` acta with ``acta`` and keeps those after its position (doubling the window
  while the position is not in it). An idle follower then costs one such read per interval.

However many followers a store has, at most :data:`FOLLOW_READS` of them read at once (per event
loop for an asyncio store; see :class:`FollowReads`): when a hundred followers wake together, or
start together, the others wait their turn instead of each taking a connection of their own, so
the store's pool does not grow for them. Waiting (``wait_for_acta``, a pause) holds no turn.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Final

from chronica_core.capabilities import FOLLOW
from chronica_core.checks import text_problem
from chronica_core.errors import ActumNotFound, ChronicumNotFound
from chronica_core.history import Layout
from chronica_core.history_rules import locate, page_after
from chronica_core.model import ActaQuery, Actum
from chronica_core.plans import Plan

__all__ = [
    "DEFAULT_POLL_INTERVAL",
    "FOLLOW_PAGE",
    "FOLLOW_PAUSE",
    "FOLLOW_READS",
    "NEWEST",
    "FollowReads",
    "Following",
    "acta_after_by_windows",
    "follow_reads",
    "follow_step",
    "newest_actum_id",
]

FOLLOW_PAGE: Final = 100
"""How many acta one read of a follower asks for at most (more are read at once, page by page)."""

DEFAULT_POLL_INTERVAL: Final = 0.25
"""Seconds between two reads of a follower on a store without the ``follow`` capability."""

FOLLOW_PAUSE: Final = "chronica.pause"
"""The operation a follow plan yields to pause (``(FOLLOW_PAUSE, (seconds,))``): performed by
the Chronicarius with ``time.sleep`` or ``asyncio.sleep``, never by the store (no store method
can have this name)."""

FOLLOW_READS: Final = 4
"""How many followers of one store read at once at most (per event loop for an asyncio store)."""

NEWEST: Final = ActaQuery(last_n=1)
"""The window of a chronicum's newest actum (what a store's ``wait_for_acta`` may check first)."""


def newest_actum_id(window: list[Actum]) -> str | None:
    """The id of the newest actum of a :data:`NEWEST` window (``None`` for an empty chronicum)."""
    return window[-1].id if window else None


class FollowReads:
    """Turns to read for the followers of one store: at most ``limit`` of them read at once.

    The blocking flavour takes a turn from one semaphore shared by every thread; the asyncio
    flavour from one semaphore per event loop (an asyncio semaphore belongs to the loop it is
    used in), so a store serving several loops lets ``limit`` followers of each loop read at
    once. ``Chronicarius.follow`` takes a turn for each of its reads (the starting position and
    every ``acta_after`` or ``acta``); a store's ``wait_for_acta`` that reads before it waits
    (the chronicum's newest actum) takes one for that read too, through :func:`follow_reads`.
    A turn is held only for the read, never while waiting for a write.

    Args:
        limit: how many followers may read at once, at least 1 (default :data:`FOLLOW_READS`).

    Raises:
        ValueError: ``limit`` is less than 1.
    """

    def __init__(self, limit: int = FOLLOW_READS) -> None:
        if limit < 1:
            raise ValueError(f"limit: at least 1 follower must be able to read, not {limit!r}")
        self.limit: Final = limit
        self._threads = threading.BoundedSemaphore(limit)
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Hold one of the blocking flavour's turns for the ``with`` block (waiting for one first)."""
        with self._threads:
            yield

    @asynccontextmanager
    async def loop_turn(self) -> AsyncIterator[None]:
        """Hold one of the running event loop's turns for the ``async with`` block.

        Cancelled while waiting for a turn, it takes none; cancelled while holding one, it gives
        it back.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            semaphore = self._loops.get(loop)
            if semaphore is None:
                semaphore = self._loops[loop] = asyncio.Semaphore(self.limit)
        async with semaphore:
            yield


_READS_BY_STORE: Final[weakref.WeakKeyDictionary[object, FollowReads]] = weakref.WeakKeyDictionary()
_READS_LOCK: Final = threading.Lock()


def follow_reads(store: object) -> FollowReads:
    """Return the :class:`FollowReads` of ``store`` (sync or asyncio), made on first use.

    Every ``Chronicarius`` over one store shares it, and so does the store's own
    ``wait_for_acta``; it lives as long as the store does. For a store that cannot be weakly
    referenced or hashed (a class with ``__slots__`` but no ``__weakref__``, a dataclass with
    ``eq``) each call returns new turns: each ``Chronicarius`` then bounds its own followers.
    """
    with _READS_LOCK:
        try:
            reads = _READS_BY_STORE.get(store)
            if reads is None:
                reads = _READS_BY_STORE[store] = FollowReads()
        except TypeError:  # not weakly referable, or not hashable
            return FollowReads()
        return reads


@dataclass(slots=True)
class Following:
    """Where one follower is; changed by each :func:`follow_step`.

    Attributes:
        chronicum_id: the chronicum followed (its owner was checked when the follower started).
        query: the kinds and actor kinds to yield (``last_n`` unused).
        position: id of the last actum read; ``None``: before the chronicum's first actum.
        checked: whether ``position`` was found in the chronicum once (a given ``after`` is
            checked by the first read; a position found before and missing now means the
            chronicum was erased).
        capabilities: the store's capabilities (names of :mod:`chronica_core.capabilities`).
        poll_interval: seconds between reads when the store cannot wait itself.
        timeout: seconds each step of a blocking follower waits for news (``None``: no limit).
        layout: on a store with the ``history`` capability, the chronicum's layout: reads then
            follow its whole history (a fork's shared prefix included) by position.
        place: with ``layout``, the position of ``position`` (``None`` until a given ``after``
            is found by the first read).
        read_to: with ``layout``, the position of the last actum the latest read returned.
    """

    chronicum_id: str
    query: ActaQuery
    position: str | None
    checked: bool
    capabilities: frozenset[str]
    poll_interval: float
    timeout: float | None = None
    layout: Layout | None = None
    place: int | None = None
    read_to: int | None = None

    def waits_after(self) -> str | None:
        """The ``after`` to give ``wait_for_acta``: the position, or ``None`` in a fork's shared prefix.

        ``wait_for_acta`` looks at the chronicum's own acta only; a follower still in the prefix
        a fork shares waits for the fork's first own actum.
        """
        if self.layout is None or self.place is None or self.place > self.layout.lineage[-1].after:
            return self.position
        return None


def _matches(actum: Actum, query: ActaQuery) -> bool:
    return (query.actum_kinds is None or actum.kind in query.actum_kinds) and (
        query.actor_kinds is None or actum.actor_kind in query.actor_kinds
    )


def acta_after_by_windows(
    chronicum_id: str, position: str | None
) -> Plan[tuple[str, tuple[object, ...]], list[Actum] | None]:
    """Plan ``acta_after`` through the base ``acta`` operation: what came after ``position``.

    Reads the newest :data:`FOLLOW_PAGE` acta (``("acta", (chronicum_id, query))``), doubling the
    window until ``position`` is in it or the window is the whole chronicum. Returns every actum
    after ``position`` in write order (all of them for ``None``), or ``None`` when ``position``
    is not an actum of the chronicum. A store that knows when a chronicum changed but has no
    cheaper read may serve ``FollowStore.acta_after`` with it.
    """
    wanted = FOLLOW_PAGE
    while True:  # the newest `wanted` acta, doubling until the position is among them
        window: list[Actum] = yield ("acta", (chronicum_id, ActaQuery(last_n=wanted)))
        if position is not None:
            for index in range(len(window) - 1, -1, -1):
                if window[index].id == position:
                    return window[index + 1 :]
        if len(window) < wanted:  # the whole chronicum: from its start, or the position is gone
            if position is None:
                return window
            return None
        wanted *= 2


def _acta_after(following: Following) -> Plan[tuple[str, tuple[object, ...]], list[Actum] | None]:
    """Read what was recorded after the follower's position (``None``: the position is not there)."""
    if following.position is not None and text_problem(following.position) is not None:
        return None  # an id no actum can have: no store is asked to look it up
    if following.layout is not None:
        if following.place is None:  # a given `after`, not found yet
            located = yield from locate(following.layout, following.position or "")
            if located is None:
                return None
            following.place = located.position
        rows = yield from page_after(following.layout, following.place, FOLLOW_PAGE)
        following.read_to = rows[-1][0] if rows else following.place
        return [actum for _, actum in rows]
    if FOLLOW in following.capabilities:
        page: list[Actum] | None = yield (
            "acta_after",
            (following.chronicum_id, following.position, FOLLOW_PAGE),
        )
        return page
    return (yield from acta_after_by_windows(following.chronicum_id, following.position))


def follow_step(
    following: Following, timeout: float | None
) -> Plan[tuple[str, tuple[object, ...]], list[Actum] | None]:
    """Plan the follower's next acta: those recorded after its position that match its filters.

    Reads at once; when nothing new matches, waits (see the module) and reads again, until some
    do or ``timeout`` seconds (``None``: no limit) have passed. A wait that ends with nothing to
    read (a store waking early) is followed by a pause of ``poll_interval`` before the next wait,
    so a follower never spins, whatever the store does.

    Returns:
        The matching acta, in write order (at least one), or ``None`` when ``timeout`` passed
        first. The position moves past every actum read, matching or not.

    Raises:
        ActumNotFound: the ``after`` the follower started from is not an actum of the chronicum.
        ChronicumNotFound: the chronicum was erased while followed (or, on the first read, is
            missing).
        StoreError: the store failed; the position is unchanged, so a new step resumes there.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    woken = False  # whether the last wait ended (a wake-up) since the last read
    while True:
        page = yield from _acta_after(following)
        if page is None:
            if not following.checked:
                raise ActumNotFound(following.chronicum_id, str(following.position))
            raise ChronicumNotFound(following.chronicum_id)
        following.checked = True
        if page:
            following.position = page[-1].id
            following.place = following.read_to
            kept = [actum for actum in page if _matches(actum, following.query)]
            if kept:
                return kept
            if len(page) >= FOLLOW_PAGE and FOLLOW in following.capabilities:
                continue  # a full page: more may wait to be read now
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return None
        if FOLLOW in following.capabilities and not (woken and not page):
            yield ("wait_for_acta", (following.chronicum_id, following.waits_after(), remaining))
            woken = True
        else:  # no capability, or a wake-up that brought nothing: pause, never spin
            woken = False
            pause = following.poll_interval if remaining is None else min(remaining, following.poll_interval)
            yield (FOLLOW_PAUSE, (pause,))
