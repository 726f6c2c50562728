"""For a backend's own tests: make a store's connection answer another statement than the one asked.

A store builds its results from the rows its database returned, never from the request's
arguments, and refuses a row that does not match the statement it answers (``StoreError``). To
test that, wrap the store's plans in :class:`RedirectedPlans`: every operation a plan yields
(a SQL statement and its parameters, a driver call) passes through a rewrite before it is
performed, e.g. :func:`ask_for_another` turning every mention of one chronicum id into another's.
The database then answers, truthfully, a statement the plan did not ask.

    monkeypatch.setattr(store, "plans", RedirectedPlans(store.plans, ask_for_another(mine, theirs)))
    with pytest.raises(StoreError):
        store.acta(mine, ActaQuery())
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from chronica_conformance.base import ids, make_actum, new_chronicum
from chronica_conformance.harness import Harness
from chronica_core import ActaQuery, ActumKind, StoreError
from chronica_core.plans import Plan

__all__ = ["RedirectedPlans", "ask_for_another", "check_rows_of_another_chronicum_are_refused", "redirected"]

Rewrite = Callable[[Any], Any]
"""Turns one operation a plan yielded into the one actually performed."""


def redirected(plan: Plan[Any, Any], rewrite: Rewrite) -> Plan[Any, Any]:
    """``plan``, each operation it yields passed through ``rewrite`` (outcomes and errors go back as is)."""
    outcome: Any = None
    error: BaseException | None = None
    while True:
        try:
            operation = plan.throw(error) if error is not None else plan.send(outcome)
        except StopIteration as done:
            return done.value
        try:
            outcome, error = (yield rewrite(operation)), None
        except Exception as failure:  # noqa: BLE001 - handed to the plan, as a store would
            outcome, error = None, failure


class RedirectedPlans:
    """A store's plans object whose every plan is :func:`redirected` through ``rewrite``.

    Args:
        plans: the store's own plans object (``store.plans``).
        rewrite: applied to every operation of every plan.
    """

    def __init__(self, plans: Any, rewrite: Rewrite) -> None:
        self._plans = plans
        self._rewrite = rewrite

    def __getattr__(self, name: str) -> Any:
        """The plans object's attribute; a method returning a plan returns it redirected."""
        attribute = getattr(self._plans, name)
        if not callable(attribute):
            return attribute

        def plan(*args: Any, **kwargs: Any) -> Any:
            made = attribute(*args, **kwargs)
            return redirected(made, self._rewrite) if hasattr(made, "throw") else made

        return plan


def ask_for_another(asked: str, other: str) -> Rewrite:
    """A rewrite replacing the string ``asked`` by ``other`` wherever it appears in an operation.

    It looks inside strings' containers: dicts (keys and values), lists, tuples (named ones
    included) and dataclass instances (the fields their constructor takes; a field it does not
    take is derived, and the copy derives it again); anything else is kept as it is.
    """

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            return other if value == asked else value
        if isinstance(value, dict):
            return {swap(key): swap(item) for key, item in value.items()}
        if isinstance(value, list):
            return [swap(item) for item in value]
        if isinstance(value, tuple):
            items = [swap(item) for item in value]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = [field for field in dataclasses.fields(value) if field.init]  # the others are derived
            changes = {field.name: swap(getattr(value, field.name)) for field in fields}
            return dataclasses.replace(value, **changes)
        return value

    return swap


def check_rows_of_another_chronicum_are_refused(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, *, writes_answer: bool = True
) -> None:
    """Assert every operation refuses, with ``StoreError``, rows answering for another chronicum.

    Two chronica of two owners, each with acta; then every operation on the first is performed as
    if for the second (through :class:`RedirectedPlans` on ``harness.store.plans``): ``get``,
    ``acta`` (every actum, and the last 20 messages) and, with ``writes_answer``, ``record`` and
    (when the store has it) ``record_idempotent`` must each raise ``StoreError``, never answer
    with the second's data. Pass ``writes_answer=False`` for a store whose write gets no row back
    to check (MongoDB's ``insert_one``). Afterwards the first chronicum holds exactly its own acta.
    """
    mine, theirs = new_chronicum(owner_id="ardian"), new_chronicum(owner_id="rafa")
    for created in (mine, theirs):
        harness.create(created)
    kept = [harness.record(make_actum(mine.id, f"mine {index}")) for index in range(3)]
    for index in range(3):
        harness.record(make_actum(theirs.id, f"theirs {index}"))
    monkeypatch.setattr(
        harness.store, "plans", RedirectedPlans(harness.store.plans, ask_for_another(mine.id, theirs.id))
    )
    attempts: dict[str, Callable[[], object]] = {
        "get": lambda: harness.get(mine.id),
        "acta": lambda: harness.acta(mine.id),
        "last 20 messages": lambda: harness.acta(
            mine.id, ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=20)
        ),
    }
    if writes_answer:
        attempts["record"] = lambda: harness.record(make_actum(mine.id, "mine, redirected"))
    if writes_answer and harness.idempotent:
        attempts["record_idempotent"] = lambda: harness.record_idempotent(
            make_actum(mine.id, "mine, redirected, with a key"), "redirected"
        )
    for name, attempt in attempts.items():
        try:
            answer = attempt()
        except StoreError:
            continue
        raise AssertionError(f"{name} answered {answer!r} from rows of another chronicum")
    monkeypatch.undo()
    assert ids(harness.acta(mine.id)) == ids(kept)
