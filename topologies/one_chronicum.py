"""Many writers and readers on one chronicum at once, through one or several stores: what landed.

Each round starts a fresh chronicum that every writer's first append races to create; the
writers (spread over the stores, one store per server of a cluster) append without idempotency
keys, the readers read its whole history until they stop. Nothing is retried here: a call that
fails is a failure of the run. At the end every acknowledged actum must be stored once, each
writer's in its order, every chronicum of the owner must hold acta (a failed first write must
not leave an empty one), and every read must have shown each writer's acta in order.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    ChronicaError,
    Chronicarius,
    ChronicumNotFound,
    new_chronicum_id,
    open_async_store,
    open_store,
)

__all__ = ["Load", "Outcome", "run_async", "run_blocking"]


@dataclass(frozen=True)
class Load:
    """How hard to push: rounds (one fresh chronicum each), writers, appends each, readers."""

    rounds: int = 3
    writers: int = 8
    appends: int = 15
    readers: int = 2


@dataclass
class Outcome:
    """What a run saw: the calls that failed, and whatever was wrong with what was stored or read."""

    failures: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    acknowledged: int = 0


def _actum(chronicum_id: str, writer: int, count: int) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, f"writer-{writer}", f"{writer}:{count}")


def _disorder(acta: Sequence[Actum]) -> str | None:
    """What is out of order in ``acta``: a writer's appends, or ``at`` going back; ``None`` if nothing."""
    seen: dict[str, int] = {}
    for before, actum in zip([None, *acta], acta, strict=False):
        writer, count = actum.content.split(":")
        if seen.get(writer, -1) >= int(count):
            return f"{actum.content} after {writer}:{seen[writer]}"
        seen[writer] = int(count)
        if before is not None and before.at is not None and actum.at is not None and actum.at < before.at:
            return f"{actum.content} at {actum.at} before {before.content} at {before.at}"
    return None


def _check(
    outcome: Outcome, chronicum_id: str, acknowledged: dict[int, list[str]], stored: Sequence[Actum]
) -> None:
    ids = [actum.id for actum in stored]
    if not ids:
        outcome.problems.append(f"{chronicum_id}: an empty chronicum")
    if len(ids) != len(set(ids)):
        outcome.problems.append(f"{chronicum_id}: an actum stored twice")
    if set(ids) != {actum_id for writer in acknowledged.values() for actum_id in writer}:
        outcome.problems.append(f"{chronicum_id}: stored {len(ids)} acta, acknowledged other ones")
    for writer, own in acknowledged.items():
        if [actum.id for actum in stored if actum.actor == f"writer-{writer}"] != own:
            outcome.problems.append(f"{chronicum_id}: writer {writer}'s acta not in its order")
    problem = _disorder(stored)
    if problem is not None:
        outcome.problems.append(f"{chronicum_id}: {problem}")
    outcome.acknowledged += len(ids)


def _check_owner(outcome: Outcome, chronica: Sequence[str], listed: Sequence[str]) -> None:
    if sorted(listed) != sorted(chronica):
        outcome.problems.append(f"the owner holds chronica {sorted(listed)}, not {sorted(chronica)}")


@dataclass
class _Round:
    """One chronicum's round: its owner and id, what each writer saw acknowledged, the end."""

    owner: str
    chronicum_id: str
    writers: int
    outcome: Outcome
    acknowledged: dict[int, list[str]] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.acknowledged = {writer: [] for writer in range(self.writers)}


def _write(keeper: Chronicarius, turn: _Round, writer: int, appends: int, start: threading.Barrier) -> None:
    start.wait()
    for count in range(appends):
        try:
            stored = keeper.record_actum(turn.owner, _actum(turn.chronicum_id, writer, count))
        except ChronicaError as error:
            turn.outcome.failures.append(f"writer {writer}: {error!r}")
            continue
        turn.acknowledged[writer].append(stored.id)


def _read(keeper: Chronicarius, turn: _Round, reader: int, start: threading.Barrier) -> None:
    start.wait()
    while not turn.done.is_set():
        try:
            problem = _disorder(keeper.get_acta(turn.owner, turn.chronicum_id))
        except ChronicumNotFound:  # before the first write lands
            continue
        except ChronicaError as error:
            turn.outcome.failures.append(f"reader {reader}: {error!r}")
            continue
        if problem is not None:
            turn.outcome.problems.append(f"reader {reader}: {problem}")


def run_blocking(urls: Sequence[str], load: Load = Load()) -> Outcome:
    """Run ``load`` with threads, writer ``i`` through a store of ``urls[i % len(urls)]``."""
    outcome, owner = Outcome(), f"one-chronicum-{new_chronicum_id()}"
    stores = [open_store(url) for url in urls]
    try:
        keepers = [Chronicarius(store) for store in stores]
        chronica = []
        for _ in range(load.rounds):
            turn = _Round(owner, new_chronicum_id(), load.writers, outcome)
            chronica.append(turn.chronicum_id)
            start = threading.Barrier(load.writers + load.readers)
            writers = [
                threading.Thread(
                    target=_write, args=(keepers[i % len(keepers)], turn, i, load.appends, start)
                )
                for i in range(load.writers)
            ]
            readers = [
                threading.Thread(target=_read, args=(keepers[i % len(keepers)], turn, i, start))
                for i in range(load.readers)
            ]
            for thread in writers + readers:
                thread.start()
            for thread in writers:
                thread.join()
            turn.done.set()
            for thread in readers:
                thread.join()
            _check(
                outcome, turn.chronicum_id, turn.acknowledged, keepers[0].get_acta(owner, turn.chronicum_id)
            )
        listed = [chronicum.id for chronicum in keepers[0].list_chronica(owner, limit=1000).chronica]
        _check_owner(outcome, chronica, listed)
        for chronicum_id in listed:
            keepers[0].erase_chronicum(owner, chronicum_id)
    finally:
        for store in stores:
            store.close()
    return outcome


async def _write_async(keeper: AsyncChronicarius, turn: _Round, writer: int, appends: int) -> None:
    for count in range(appends):
        try:
            stored = await keeper.record_actum(turn.owner, _actum(turn.chronicum_id, writer, count))
        except ChronicaError as error:
            turn.outcome.failures.append(f"writer {writer}: {error!r}")
            continue
        turn.acknowledged[writer].append(stored.id)


async def _read_async(keeper: AsyncChronicarius, turn: _Round, reader: int) -> None:
    while not turn.done.is_set():
        try:
            problem = _disorder(await keeper.get_acta(turn.owner, turn.chronicum_id))
        except ChronicumNotFound:  # before the first write lands
            await asyncio.sleep(0)
            continue
        except ChronicaError as error:
            turn.outcome.failures.append(f"reader {reader}: {error!r}")
            continue
        if problem is not None:
            turn.outcome.problems.append(f"reader {reader}: {problem}")


async def run_async(urls: Sequence[str], load: Load = Load()) -> Outcome:
    """Run ``load`` with asyncio tasks on asyncio stores, writer ``i`` through ``urls[i % len(urls)]``."""
    outcome, owner = Outcome(), f"one-chronicum-{new_chronicum_id()}"
    stores = [open_async_store(url) for url in urls]
    try:
        keepers = [AsyncChronicarius(store) for store in stores]
        chronica = []
        for _ in range(load.rounds):
            turn = _Round(owner, new_chronicum_id(), load.writers, outcome)
            chronica.append(turn.chronicum_id)
            readers = [
                asyncio.create_task(_read_async(keepers[i % len(keepers)], turn, i))
                for i in range(load.readers)
            ]
            await asyncio.gather(
                *(_write_async(keepers[i % len(keepers)], turn, i, load.appends) for i in range(load.writers))
            )
            turn.done.set()
            await asyncio.gather(*readers)
            stored = await keepers[0].get_acta(owner, turn.chronicum_id)
            _check(outcome, turn.chronicum_id, turn.acknowledged, stored)
        page = await keepers[0].list_chronica(owner, limit=1000)
        listed = [chronicum.id for chronicum in page.chronica]
        _check_owner(outcome, chronica, listed)
        for chronicum_id in listed:
            await keepers[0].erase_chronicum(owner, chronicum_id)
    finally:
        for store in stores:
            await store.close()
    return outcome
