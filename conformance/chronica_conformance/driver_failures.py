"""E1: whatever the driver raises, only Chronica errors leave the store, and the store keeps working.

The group needs a way to make the store's driver fail, which only the store's author has: a
``chronica_driver_faults`` fixture returning a :class:`DriverFaults`, or for a run on a store URL
(``--chronica-store``, ``chronica conformance URL``) the one the backend's distribution declares in
the :data:`FAULTS_GROUP` entry-point group (every bundled backend does). Without either the group
is skipped, saying so (it is optional for third-party stores).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import pytest

from chronica_conformance.base import SuiteBase, Target, make_actum, new_chronicum, new_owner
from chronica_conformance.harness import Call, Harness, store_call
from chronica_core import ActaQuery, ChronicaError, Chronicum
from chronica_core.capabilities import BATCH, ERASURE, IDEMPOTENCY, LISTING
from chronica_core.erasure import owner_digest
from chronica_core.registry import registry

__all__ = [
    "FAILURE_KINDS",
    "FAULTS_GROUP",
    "OPERATIONS",
    "DriverFailureContract",
    "DriverFaults",
    "FailureKind",
    "Injection",
    "installed_driver_faults",
]

FailureKind = Literal["connection_reset", "server_gone", "statement_timeout"]
"""What the driver runs into: the connection is reset in the middle of a statement (the
connection is dead afterwards); the server is gone (this call and any new connection fail); a
statement runs past a timeout (the connection stays usable)."""

FAILURE_KINDS: tuple[FailureKind, ...] = ("connection_reset", "server_gone", "statement_timeout")

OPERATIONS = (
    "create",
    "get",
    "record",
    "record_idempotent",
    "acta",
    "record_many",
    "list_chronica",
    "erase",
    "erase_owner",
    "reopen",
    "withdraw",
    "migrate",
)
"""The store operations driven through failures (``record_idempotent``, those of the batch,
listing and erasure capabilities, and ``withdraw`` and ``migrate`` where the store has them)."""

_CAPABILITY_OF = {
    "record_idempotent": IDEMPOTENCY,
    "record_many": BATCH,
    "list_chronica": LISTING,
    "erase": ERASURE,
    "erase_owner": ERASURE,
    "reopen": ERASURE,
    "withdraw": ERASURE,
}

MAX_DRIVER_CALLS = 16
"""The most driver calls one operation is expected to make; the case fails past it."""


@dataclass
class Injection:
    """One injected failure, as :meth:`DriverFaults.inject` sets it up and reports it.

    The injector calls :meth:`next_call` at each driver call the store makes while the injection
    is active; when it returns a kind, the injector raises the driver's own exception for it and
    passes that exception to :meth:`raised_now`.

    Attributes:
        kind: the failure to inject.
        after: how many driver calls succeed before the later ones fail.
        times: how many calls fail after those (``None``: every later one); the group uses
            ``None``, a backend's own tests may fail one call only.
        calls: driver calls seen so far.
        raised: every exception the injector raised, in order.
    """

    kind: FailureKind
    after: int = 0
    times: int | None = None
    calls: int = 0
    raised: list[BaseException] = field(default_factory=list)

    def next_call(self) -> FailureKind | None:
        """Count one driver call; return the kind to fail it with, or ``None`` to let it run."""
        self.calls += 1
        failing = self.calls > self.after and (self.times is None or self.calls <= self.after + self.times)
        return self.kind if failing else None

    def raised_now(self, error: BaseException) -> BaseException:
        """Remember ``error`` as raised by the injector and return it (``raise injection.raised_now(e)``)."""
        self.raised.append(error)
        return error


class DriverFaults(Protocol):
    """What a ``chronica_driver_faults`` fixture returns: a way to make the store's driver fail."""

    def inject(
        self, store: Any, kind: FailureKind, *, after: int = 0
    ) -> contextlib.AbstractContextManager[Injection]:
        """Make ``store``'s driver fail while the context is open.

        Args:
            store: the store under test (blocking or asyncio).
            kind: which failure: the driver's own exception for it (``psycopg.OperationalError``,
                a DBAPI ``OperationalError`` with the server's error code, a ``pymongo`` error...).
            after: how many driver calls (statements, commits, commands) succeed first; every later
                one fails until the context exits.

        Returns:
            A context manager yielding the :class:`Injection`, whose ``raised`` lists what was raised.
        """
        ...


FAULTS_GROUP = "chronica.driver_faults"
"""The entry-point group through which a backend's distribution supplies its :class:`DriverFaults`:
the entry point is named as the backend (``Backend.name``), and its object, called with no
arguments, returns one. In ``pyproject.toml``::

    [project.entry-points."chronica.driver_faults"]
    mystore = "my_package.faults:MyStoreFaults"
"""


def installed_driver_faults(url: str) -> DriverFaults | None:
    """The :class:`DriverFaults` the installed backend for ``url`` declares in :data:`FAULTS_GROUP`.

    Returns:
        A new one, or ``None`` when the backend's distribution declares none.

    Raises:
        ChronicaError: no installed backend handles ``url``.
    """
    name = registry().backend_for(url).name
    for point in importlib.metadata.entry_points(group=FAULTS_GROUP, name=name):
        faults: DriverFaults = point.load()()
        return faults
    return None


def _caused_by(error: BaseException, injected: list[BaseException]) -> bool:
    """Whether ``error.__cause__`` is one of ``injected`` or chained (``__cause__``) to one."""
    cause = error.__cause__
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        if any(cause is one for one in injected):
            return True
        seen.add(id(cause))
        cause = cause.__cause__
    return False


class DriverFailureContract(SuiteBase):
    """E1: every exception leaving the store is a ``ChronicaError`` chained to the driver's exception.

    Each operation (``create``, ``get``, ``record``, ``acta``; ``record_idempotent``,
    ``record_many``, ``list_chronica``, ``erase``, ``erase_owner``, ``reopen`` and ``migrate``
    where the store has them) runs with each :data:`FAILURE_KINDS` failure injected at its first
    driver call, then its second, and so on until the operation makes fewer calls. Each time the
    operation either succeeds (a store may try a read again) or raises a ``ChronicaError`` whose
    ``__cause__`` is, or is chained to, the exception the injector raised; and the next operation,
    without failures, succeeds.

    Needs a ``chronica_driver_faults`` fixture (a :class:`DriverFaults`), or a target with a URL
    whose backend declares its faults (:func:`installed_driver_faults`); without either the group
    is skipped, with the reason.
    """

    @pytest.fixture
    def chronica_faults(self, request: pytest.FixtureRequest, chronica_target: Target) -> DriverFaults:
        """The suite's ``chronica_driver_faults`` fixture, else the backend's declared faults, else a skip."""
        try:
            faults: DriverFaults = request.getfixturevalue("chronica_driver_faults")
        except pytest.FixtureLookupError:
            declared = None if chronica_target.url is None else installed_driver_faults(chronica_target.url)
            if declared is None:
                pytest.skip(
                    "no chronica_driver_faults fixture: the driver-failure group (E1) needs the "
                    "store's author to supply one (see the conformance README)"
                )
            faults = declared
        return faults

    @pytest.mark.parametrize("kind", FAILURE_KINDS)
    @pytest.mark.parametrize("operation", OPERATIONS)
    def test_e1_driver_failures_leave_the_store_as_chronica_errors(
        self, chronica_harness: Harness, chronica_faults: DriverFaults, operation: str, kind: FailureKind
    ) -> None:
        """E1: each operation, with ``kind`` at each of its driver calls in turn (see the class)."""
        harness = chronica_harness
        make_call = self._operation(harness, operation)
        for after in range(MAX_DRIVER_CALLS):
            call = make_call()
            with chronica_faults.inject(harness.store, kind, after=after) as injection:
                outcome = _outcome(harness, call)
            if isinstance(outcome, BaseException):
                assert isinstance(outcome, ChronicaError), (
                    f"{operation} with {kind} at driver call {after + 1} raised "
                    f"{type(outcome).__module__}.{type(outcome).__qualname__}: {outcome}; "
                    "only ChronicaError subclasses may leave a store"
                )
                assert injection.raised, f"{operation} raised {outcome!r} although nothing failed"
                assert _caused_by(outcome, injection.raised), (
                    f"{operation} with {kind} at driver call {after + 1} raised {outcome!r} not chained "
                    f"(raise ... from error) to the driver's exception {injection.raised[-1]!r}"
                )
            assert injection.raised or after > 0, (
                f"nothing was injected into {operation}'s first driver call: does the "
                "chronica_driver_faults fixture reach the store's driver?"
            )
            after_call = _outcome(harness, make_call())
            assert not isinstance(after_call, BaseException), (
                f"after {kind} at driver call {after + 1} of {operation}, the next {operation} "
                f"failed: {after_call!r}"
            )
            if not injection.raised:  # the operation made fewer calls: every one was tried
                return
        pytest.fail(f"{operation} still failed at its driver call {MAX_DRIVER_CALLS}; does it loop?")

    def _operation(self, harness: Harness, operation: str) -> Callable[[], Call]:
        """Prepare what ``operation`` needs; return a maker of fresh calls of it that succeed."""
        capability = _CAPABILITY_OF.get(operation)
        if capability is not None and capability not in harness.capabilities:
            pytest.skip(f"{harness.store_name} has no {operation} (the {capability} capability)")
        if operation in ("migrate", "withdraw") and not hasattr(harness.store, operation):
            pytest.skip(f"{harness.store_name} has no {operation}")
        if operation == "create":
            return lambda: store_call("create", new_chronicum())
        if operation == "migrate":
            return lambda: store_call("migrate")
        if operation in ("erase", "erase_owner", "reopen", "withdraw"):
            return lambda: _erasure_call(harness, operation)
        chronicum = new_chronicum()
        harness.create(chronicum)
        harness.record(make_actum(chronicum.id, "already there"))
        counter = iter(range(1_000_000))
        return {
            "get": lambda: store_call("get", chronicum.id),
            "record": lambda: store_call("record", make_actum(chronicum.id, "a write")),
            "record_idempotent": lambda: store_call(
                "record_idempotent", make_actum(chronicum.id, "a keyed write"), f"key-{next(counter)}"
            ),
            "acta": lambda: store_call("acta", chronicum.id, ActaQuery(last_n=5)),
            "record_many": lambda: store_call(
                "record_many", [make_actum(chronicum.id, "a batch"), make_actum(chronicum.id, "of two")], None
            ),
            "list_chronica": lambda: store_call("list_chronica", chronicum.owner_id, 10, None),
        }[operation]


def _erasure_call(harness: Harness, operation: str) -> Call:
    """A fresh call of an erasure operation (or ``withdraw``) that succeeds (prepared without failures)."""
    chronicum = new_chronicum(owner_id=new_owner())
    digest = owner_digest(chronicum.owner_id)
    harness.create(chronicum)
    if operation == "withdraw":  # of an empty chronicum
        return store_call("withdraw", chronicum.id, digest)
    harness.record(make_actum(chronicum.id, "to be erased"))
    if operation == "erase":
        return store_call("erase", chronicum.id, digest)
    if operation == "erase_owner":
        return store_call("erase_owner", chronicum.owner_id, digest)
    harness.perform(store_call("erase", chronicum.id, digest))
    return store_call("reopen", Chronicum(chronicum.id, chronicum.owner_id, chronicum.started_at), digest)


def _outcome(harness: Harness, call: Call) -> Any:
    """The call's result, or the exception it raised."""
    try:
        return harness.perform(call)
    except Exception as error:  # noqa: BLE001 - the case judges every exception
        return error
