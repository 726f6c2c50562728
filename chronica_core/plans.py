"""Code that does no I/O, run by a sync or an async driver: how the rules and the stores live once.

A *plan* is a generator. Each value it yields is an operation for someone else to perform (a
store call, a SQL statement); the outcome is sent back in, or the exception thrown in, and the
generator's return value is the plan's result. :func:`run_plan` performs operations by plain
calls, :func:`run_plan_async` by awaiting them. The plan itself, where every decision lives, is
written once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["Plan", "run_plan", "run_plan_async"]

Operation = TypeVar("Operation")
Result = TypeVar("Result")

Plan = Generator[Operation, Any, Result]
"""A plan that yields operations of type ``Operation`` and returns a ``Result``."""


async def run_plan_async(
    plan: Plan[Operation, Result],
    perform: Callable[[Operation], Awaitable[Any]],
    *,
    cancellation_to_plan: bool = False,
) -> Result:
    """Run ``plan`` to the end, performing each operation with ``await perform(operation)``.

    Returns the plan's result. An exception from ``perform`` is thrown into the plan, which may
    catch it; whatever the plan raises propagates unchanged. With ``cancellation_to_plan``, so is
    the ``asyncio.CancelledError`` of a task cancelled while it awaited an operation: the plan
    may perform more operations (undo what it began) before the cancellation propagates.
    """
    outcome: Any = None
    error: BaseException | None = None
    while True:
        try:
            operation = plan.throw(error) if error is not None else plan.send(outcome)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            outcome, error = await perform(operation), None
        except Exception as failure:  # noqa: BLE001 - handed to the plan, which decides
            outcome, error = None, failure
        except asyncio.CancelledError as cancelled:
            if not cancellation_to_plan:
                raise
            outcome, error = None, cancelled


def run_plan(plan: Plan[Operation, Result], perform: Callable[[Operation], Any]) -> Result:
    """Run ``plan`` to the end, performing each operation with a plain ``perform(operation)``.

    Same contract as :func:`run_plan_async`, of which it is the synchronous flavour, written out
    as a plain loop on the caller's thread: every Chronicarius call and every planned store
    operation goes through it, so it makes no coroutine per plan or per operation.
    """
    outcome: Any = None
    error: Exception | None = None
    while True:
        try:
            operation = plan.throw(error) if error is not None else plan.send(outcome)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            outcome, error = perform(operation), None
        except Exception as failure:  # noqa: BLE001 - handed to the plan, which decides
            outcome, error = None, failure
