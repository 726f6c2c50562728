"""Many writers and readers on one chronicum at once, through one or several stores: what landed.

Each round starts a fresh chronicum that every writer's first append races to create; the
writers (spread over the stores, one store per server of a cluster) append without idempotency
keys, the readers read its whole history until they stop. Blocking stores are called from threads
of their own (one per writer and reader), asyncio stores from tasks of one loop. Nothing is retried
here: a call that fails is a failure of the run. At the end every acknowledged actum must be stored once, each
writer's in its order, every chronicum of the owner must hold acta (a failed first write must
not leave an empty one), and every read must have shown each writer's acta in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

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
    done: bool = False

    def __post_init__(self) -> None:
        self.acknowledged = {writer: [] for writer in range(self.writers)}


class _Keeper:
    """A ``Chronicarius`` or an ``AsyncChronicarius``, awaited alike: a blocking call on a thread."""

    def __init__(self, keeper: Chronicarius | AsyncChronicarius) -> None:
        self.keeper = keeper

    async def __call__(self, method: str, *arguments: Any) -> Any:
        operation = getattr(self.keeper, method)
        if isinstance(self.keeper, AsyncChronicarius):
            return await operation(*arguments)
        return await asyncio.to_thread(operation, *arguments)


async def _write(keeper: _Keeper, turn: _Round, writer: int, appends: int) -> None:
    for count in range(appends):
        try:
            stored = await keeper("record_actum", turn.owner, _actum(turn.chronicum_id, writer, count))
        except ChronicaError as error:
            turn.outcome.failures.append(f"writer {writer}: {error!r}")
            continue
        turn.acknowledged[writer].append(stored.id)


async def _read(keeper: _Keeper, turn: _Round, reader: int) -> None:
    while not turn.done:
        try:
            problem = _disorder(await keeper("get_acta", turn.owner, turn.chronicum_id))
        except ChronicumNotFound:  # before the first write lands
            await asyncio.sleep(0)
            continue
        except ChronicaError as error:
            turn.outcome.failures.append(f"reader {reader}: {error!r}")
            continue
        if problem is not None:
            turn.outcome.problems.append(f"reader {reader}: {problem}")


async def _run(keepers: Sequence[_Keeper], load: Load) -> Outcome:
    outcome, owner = Outcome(), f"one-chronicum-{new_chronicum_id()}"
    chronica = []
    for _ in range(load.rounds):
        turn = _Round(owner, new_chronicum_id(), load.writers, outcome)
        chronica.append(turn.chronicum_id)
        readers = [
            asyncio.create_task(_read(keepers[i % len(keepers)], turn, i)) for i in range(load.readers)
        ]
        await asyncio.gather(
            *(_write(keepers[i % len(keepers)], turn, i, load.appends) for i in range(load.writers))
        )
        turn.done = True
        await asyncio.gather(*readers)
        stored = await keepers[0]("get_acta", owner, turn.chronicum_id)
        _check(outcome, turn.chronicum_id, turn.acknowledged, stored)
    page = await keepers[0]("list_chronica", owner)  # a page of 100: more than the rounds
    listed = [chronicum.id for chronicum in page.chronica]
    _check_owner(outcome, chronica, listed)
    for chronicum_id in listed:
        await keepers[0]("erase_chronicum", owner, chronicum_id)
    return outcome


def run_blocking(urls: Sequence[str], load: Load = Load()) -> Outcome:
    """Run ``load`` on blocking stores, writer ``i`` through a store of ``urls[i % len(urls)]``.

    Each writer and reader calls its store from a thread of its own.
    """

    async def run() -> Outcome:
        threads = ThreadPoolExecutor(load.writers + load.readers, thread_name_prefix="one-chronicum")
        asyncio.get_running_loop().set_default_executor(threads)
        stores = [open_store(url) for url in urls]
        try:
            return await _run([_Keeper(Chronicarius(store)) for store in stores], load)
        finally:
            for store in stores:
                store.close()

    return asyncio.run(run())


async def run_async(urls: Sequence[str], load: Load = Load()) -> Outcome:
    """Run ``load`` with asyncio tasks on asyncio stores, writer ``i`` through ``urls[i % len(urls)]``."""
    stores = [open_async_store(url) for url in urls]
    try:
        return await _run([_Keeper(AsyncChronicarius(store)) for store in stores], load)
    finally:
        for store in stores:
            await store.close()
