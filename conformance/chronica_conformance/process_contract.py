"""The process contract: a store opened before ``os.fork()`` and used in the child.

gunicorn ``--preload``, Celery's prefork pool and ``multiprocessing`` with the ``fork`` start
method fork a process that has used its store. In the child the store either works (it opens
connections of its own) or refuses at once with a ``StoreError`` that says to open a store per
process; it never hangs, never raises a driver's error, and never reads another process's rows.
The parent's store keeps working. The child runs in a process of ``multiprocessing``'s ``fork``
context and answers over a pipe; one that does not answer within :data:`CHILD_TIMEOUT_SECONDS` is
killed and the case fails. Each case's name begins ``test_process_fork_``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import pytest

from chronica_conformance.base import SuiteBase, make_actum, new_id, new_owner
from chronica_conformance.harness import Harness
from chronica_core import AsyncChronicarius, Chronicarius, StoreError

__all__ = ["CHILD_TIMEOUT_SECONDS", "ProcessForkContract", "in_forked_children"]

CHILD_TIMEOUT_SECONDS = 60.0
"""How long forked children may take to answer before they are killed and the case fails (a guard)."""

CHILDREN = 4
"""How many children a case forks at once (they and the parent use their copies of the store together)."""

EACH = 10
"""How many acta each child, and the parent meanwhile, appends."""


def _answer(work: Callable[[int], object], index: int, sender: Connection) -> None:
    try:
        outcome: tuple[str, object] = ("returned", work(index))
    except StoreError as error:
        outcome = ("refused", str(error))
    except BaseException:  # noqa: BLE001 - any other failure is the case's to report
        outcome = ("failed", traceback.format_exc())
    sender.send(outcome)
    sender.close()


def in_forked_children(
    work: Callable[[int], object],
    count: int,
    meanwhile: Callable[[], object] = lambda: None,
    timeout: float = CHILD_TIMEOUT_SECONDS,
) -> list[tuple[str, object]]:
    """Fork ``count`` children running ``work(index)``, run ``meanwhile()`` here; say how each ended.

    Args:
        work: what child ``index`` (0 to ``count - 1``) does; what it returns must pickle.
        count: how many children to fork.
        meanwhile: what this process does while they run.
        timeout: seconds the children may take in all before they are killed.

    Returns:
        Per child, ``("returned", value)``, ``("refused", message)`` for a ``StoreError``, or
        ``("failed", traceback)`` for anything else it raised.

    Raises:
        AssertionError: a child did not answer within ``timeout`` seconds (all are killed), or
            died without answering.
    """
    context = multiprocessing.get_context("fork")
    children, receivers = [], []
    try:
        for index in range(count):
            receiver, sender = context.Pipe(duplex=False)
            child = context.Process(target=_answer, args=(work, index, sender), name=f"child-{index}")
            child.start()
            sender.close()
            children.append(child)
            receivers.append(receiver)
        meanwhile()
        deadline = time.monotonic() + timeout
        outcomes: list[tuple[str, object]] = []
        for index, receiver in enumerate(receivers):
            if not receiver.poll(max(0.0, deadline - time.monotonic())):
                raise AssertionError(f"forked child {index} did not answer within {timeout} s: it hangs")
            try:
                outcomes.append(receiver.recv())
            except EOFError:
                code = children[index].exitcode
                raise AssertionError(f"forked child {index} died without answering (exit {code})") from None
        return outcomes
    finally:
        for child in children:
            child.join(1.0)
            if child.is_alive():
                child.kill()
                child.join()
        for receiver in receivers:
            receiver.close()


class ProcessForkContract(SuiteBase):
    """A store used before ``os.fork()`` works in the children (or refuses at once), and in the parent."""

    def test_process_fork_children_write_and_read_their_own(self, chronica_harness: Harness) -> None:
        """Children append and read back exactly their own acta, the parent writing meanwhile."""
        if "fork" not in multiprocessing.get_all_start_methods():
            pytest.skip("os.fork() is not available on this platform")
        harness = chronica_harness
        owner, prefix = new_owner(), new_id("forked")
        harness.record_actum(owner, make_actum(f"{prefix}-parent", "parent 0"))
        for index in range(CHILDREN):  # the children's chronica exist before the fork
            harness.record_actum(owner, make_actum(f"{prefix}-{index}", "before"))
        child = _sync_child if harness.flavour == "sync" else _async_child

        def parent_writes() -> None:
            for number in range(1, EACH + 1):
                harness.record_actum(owner, make_actum(f"{prefix}-parent", f"parent {number}"))

        outcomes = in_forked_children(
            lambda index: child(harness.store, owner, f"{prefix}-{index}"), CHILDREN, parent_writes
        )
        for index, (how, what) in enumerate(outcomes):
            if how == "refused":
                assert "per process" in str(what), f"child {index}'s store refused without saying why: {what}"
                continue
            assert how == "returned", f"the store failed in forked child {index}:\n{what}"
            expected = ["before", *(f"{prefix}-{index} {number}" for number in range(EACH))]
            assert what == expected, f"child {index} read {what}"
        harness.record_actum(owner, make_actum(f"{prefix}-parent", "parent again"))
        contents = [actum.content for actum in harness.get_acta(owner, f"{prefix}-parent")]
        assert contents == [*(f"parent {number}" for number in range(EACH + 1)), "parent again"], contents


def _sync_child(store: Any, owner: str, chronicum_id: str) -> list[str]:
    chronicarius = Chronicarius(store)
    for number in range(EACH):
        chronicarius.record_actum(owner, make_actum(chronicum_id, f"{chronicum_id} {number}"))
    return [actum.content for actum in chronicarius.get_acta(owner, chronicum_id)]


def _async_child(store: Any, owner: str, chronicum_id: str) -> list[str]:
    async def work() -> list[str]:  # in a loop of the child's own: the parent's does not run here
        chronicarius = AsyncChronicarius(store)
        for number in range(EACH):
            await chronicarius.record_actum(owner, make_actum(chronicum_id, f"{chronicum_id} {number}"))
        return [actum.content for actum in await chronicarius.get_acta(owner, chronicum_id)]

    return asyncio.run(work())
