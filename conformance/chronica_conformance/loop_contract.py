"""The any-loop contract: one asyncio store serves every event loop of the process.

An agent framework runs its own loops (``Runner.run_sync``, one ``asyncio.run()`` per web request,
a loop per worker thread); the store a program opened once must serve all of them. The cases run
for the ``async_store`` flavour only (a blocking store has no event loop; a suite without an
``async_store`` fixture skips them, saying so); their names begin ``test_any_loop_``. Each case owns the
store it is given and closes it; none asserts anything about a driver (counting a backend's
connections on its server is that backend's own test).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from chronica_conformance.base import SuiteBase, Target, ids, make_actum, new_chronicum
from chronica_core import ActaQuery, Actum, AsyncStore, StoreError

__all__ = ["AnyLoopContract", "async_only"]

Case = TypeVar("Case", bound=Callable[..., Any])

THREAD_TIMEOUT_SECONDS = 120.0
"""How long a case waits for a thread's loop to finish before it fails as hung (a guard)."""

TASKS_AT_ONCE = 20
"""How many tasks of a new loop make their first call on the store together."""


def async_only(case: Case) -> Case:
    """Mark a conformance case to run for the ``async`` flavour only (see :class:`SuiteBase`)."""
    case.chronica_async_only = True  # type: ignore[attr-defined]
    return case


def _run_in_thread(body: Callable[[], Coroutine[Any, Any, Any]], outcome: list[Any]) -> threading.Thread:
    """Start a thread running ``asyncio.run(body())``; its result or error is appended to ``outcome``."""

    def target() -> None:
        try:
            outcome.append(asyncio.run(body()))
        except BaseException as error:  # noqa: BLE001 - reported by the case
            outcome.append(error)

    thread = threading.Thread(target=target, name="chronica-conformance-loop", daemon=True)
    thread.start()
    return thread


def _joined(thread: threading.Thread, outcome: list[Any]) -> Any:
    """Wait for ``thread``; return its result or raise its error; fail when it hangs."""
    thread.join(THREAD_TIMEOUT_SECONDS)
    if thread.is_alive():
        pytest.fail(f"a thread's event loop did not finish within {THREAD_TIMEOUT_SECONDS:g} s")
    (result,) = outcome
    if isinstance(result, BaseException):
        raise result
    return result


class AnyLoopContract(SuiteBase):
    """One asyncio store serves event loops one after another and at once, until it is closed.

    Every case uses the ``async_store`` fixture's store, built without awaiting, in loops of its
    own (``asyncio.run()``, threads), and closes it; no case uses the store in the test's loop.
    """

    @pytest.fixture
    def any_loop_store(self, request: pytest.FixtureRequest, chronica_target: Target) -> Any:
        """The ``async_store`` fixture's store; closed in a loop of its own afterwards."""
        store: AsyncStore = request.getfixturevalue("async_store")
        yield store
        asyncio.run(store.close())

    @async_only
    def test_any_loop_one_store_serves_loops_one_after_another(self, any_loop_store: AsyncStore) -> None:
        """Three ``asyncio.run()`` in a row write and read through one store; each sees the others' acta."""
        store = any_loop_store
        chronicum = new_chronicum()
        written: list[Actum] = []

        async def turn(number: int) -> list[Actum]:
            if number == 0:
                await store.create(chronicum)
            written.append(await store.record(make_actum(chronicum.id, f"turn {number}")))
            return await store.acta(chronicum.id, ActaQuery())

        seen = [asyncio.run(turn(number)) for number in range(3)]
        assert [ids(acta) for acta in seen] == [ids(written[: number + 1]) for number in range(3)]
        assert [actum.content for actum in seen[-1]] == ["turn 0", "turn 1", "turn 2"]

    @async_only
    def test_any_loop_one_store_serves_two_loops_at_once(self, any_loop_store: AsyncStore) -> None:
        """Two threads, each in its own loop, use one store at the same time; every write lands once."""
        store = any_loop_store
        shared = new_chronicum()
        asyncio.run(store.create(shared))
        both_running = threading.Barrier(2, timeout=THREAD_TIMEOUT_SECONDS)

        def writer(label: str) -> Callable[[], Coroutine[Any, Any, list[Actum]]]:
            async def body() -> list[Actum]:
                own = new_chronicum()
                await store.create(own)
                await asyncio.to_thread(both_running.wait)  # both loops have used the store
                writes = [
                    store.record(make_actum(chronicum, f"{label} {n}"))
                    for n in range(10)
                    for chronicum in (own.id, shared.id)
                ]
                await asyncio.gather(*writes)
                return await store.acta(own.id, ActaQuery())

            return body

        outcomes: tuple[list[Any], list[Any]] = ([], [])
        threads = [
            _run_in_thread(writer(label), outcome) for label, outcome in zip("ab", outcomes, strict=True)
        ]
        own_a, own_b = (_joined(thread, outcome) for thread, outcome in zip(threads, outcomes, strict=True))
        assert sorted(actum.content for actum in own_a) == sorted(f"a {n}" for n in range(10))
        assert sorted(actum.content for actum in own_b) == sorted(f"b {n}" for n in range(10))
        in_shared = asyncio.run(store.acta(shared.id, ActaQuery()))
        assert sorted(actum.content for actum in in_shared) == sorted(
            f"{label} {n}" for label in "ab" for n in range(10)
        )
        assert len(set(ids(in_shared))) == 20, "an actum landed twice"

    @async_only
    def test_any_loop_many_tasks_of_a_new_loop_arrive_together(self, any_loop_store: AsyncStore) -> None:
        """The first calls of a new loop, made by many tasks at once, all succeed (opening is race-free)."""
        store = any_loop_store
        chronicum = new_chronicum()
        asyncio.run(store.create(chronicum))

        async def together() -> list[Actum]:
            await asyncio.gather(
                *(store.record(make_actum(chronicum.id, f"task {n}")) for n in range(TASKS_AT_ONCE))
            )
            return await store.acta(chronicum.id, ActaQuery())

        acta = asyncio.run(together())
        assert sorted(actum.content for actum in acta) == sorted(f"task {n}" for n in range(TASKS_AT_ONCE))

    @async_only
    def test_any_loop_close_from_one_loop_ends_the_store_for_every_loop(
        self, any_loop_store: AsyncStore
    ) -> None:
        """``close()`` in one loop, while another thread's loop that used the store still runs.

        The other loop's next call raises ``StoreError`` ("the store is closed"), and so does a
        call from a new loop.
        """
        store = any_loop_store
        chronicum = new_chronicum()
        used = threading.Event()
        closed = threading.Event()

        async def other_loop() -> str:
            await store.create(chronicum)
            await store.record(make_actum(chronicum.id, "before closing"))
            used.set()
            await asyncio.to_thread(closed.wait, THREAD_TIMEOUT_SECONDS)
            try:
                await store.record(make_actum(chronicum.id, "after closing"))
            except StoreError as error:
                return str(error)
            return "no error"

        outcome: list[Any] = []
        thread = _run_in_thread(other_loop, outcome)
        assert used.wait(THREAD_TIMEOUT_SECONDS), "the other loop did not use the store"
        asyncio.run(store.close())
        closed.set()
        message = _joined(thread, outcome)
        assert message.endswith("the store is closed"), f"after close, the other loop got {message!r}"
        with pytest.raises(StoreError, match=r"the store is closed$"):
            asyncio.run(store.get(chronicum.id))
