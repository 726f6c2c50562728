"""One face for both flavours, so that every conformance case is written once.

A :class:`Harness` wraps the store under test and a Chronicarius over it. Its methods block and
return plain values (or raise the store's errors) whichever flavour is underneath:
:class:`SyncHarness` calls a :class:`~chronica_core.Store` directly and runs concurrent calls in
threads; :class:`AsyncHarness` runs every call of an :class:`~chronica_core.AsyncStore` in one
:class:`asyncio.Runner` (one event loop per test) and concurrent calls with :func:`asyncio.gather`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import itertools
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncIdempotentStore,
    AsyncStore,
    ChronicaPage,
    Chronicarius,
    Chronicum,
    ChronicumNotFound,
    IdempotentStore,
    Store,
    StoreError,
    ToolExchanges,
    View,
)
from chronica_core.capabilities import (
    BATCH,
    ERASURE,
    FOLLOW,
    HISTORY,
    IDEMPOTENCY,
    LISTING,
    NATIVE,
    RETENTION,
    store_capabilities,
)

__all__ = [
    "INJECTED_FAILURE",
    "AsyncHarness",
    "Call",
    "FailingWrites",
    "Flavour",
    "FollowRun",
    "Harness",
    "SyncHarness",
    "WritersAndPolls",
    "rules_call",
    "store_call",
]

Flavour = Literal["sync", "async"]
"""Which face of the store a harness drives: blocking calls or coroutines."""

FailingWrites = Literal["alone", "after_landing", "cancelled", "cancelled_after_create"]
"""How the writes of :meth:`Harness.with_chronicarius` fail: writing nothing, or after landing
(``StoreError``); or as a cancelled asyncio task sees them (``asyncio.CancelledError``): a write
cancelled before it landed, or a ``create`` cancelled after it created the chronicum."""

INJECTED_FAILURE = "chronica-conformance: injected write failure"
"""The ``where`` of the ``StoreError`` every write raises through a view with failing writes."""


def _injected_failure() -> StoreError:
    """A ``StoreError`` as a store raises it for a lost connection, chained to the driver's error."""
    failure = StoreError(INJECTED_FAILURE, "connection reset by peer")
    failure.__cause__ = ConnectionResetError("connection reset by peer")
    return failure


CONCURRENT_TIMEOUT_SECONDS = 120.0
"""How long concurrent calls may take before the case fails as hung (a guard, not a measurement)."""

POLL_PAUSE_SECONDS = 0.001
"""The pause between two reads of :meth:`Harness.write_while_polling`'s reader (pacing only)."""

FOLLOW_GUARD_SECONDS = 10.0
"""How long a follower of a case waits for the acta it expects before it gives up (a guard: a
correct store delivers them in milliseconds, and a case that got too few then fails on them)."""

FOLLOW_POLL_SECONDS = 0.02
"""The ``poll_interval`` of a case's follower, for stores without the ``follow`` capability."""

SHARED_TASK_PREFIX = "chronica-shared-"
"""A store's own long-lived threads and tasks (say, one listener per store or event loop shared
by every follower) are named with this prefix; they are the store's, not a follower's, and do
not count as left behind by a stopped follower."""


@dataclass(frozen=True, slots=True)
class FollowRun:
    """What :meth:`Harness.follow_during` saw.

    Attributes:
        acta: what the follower yielded, in order.
        outcomes: each concurrent call's result or exception, in order.
    """

    acta: list[Actum]
    outcomes: list[Any]


WritersAndPolls = tuple[list[Any], list[datetime | None]]
"""What :meth:`Harness.write_while_polling` returns: each writer's outcome, then what the reader saw."""


@dataclass(frozen=True, slots=True)
class Call:
    """One operation for :meth:`Harness.concurrently`.

    Attributes:
        target: ``"store"`` (the store under test) or ``"chronicarius"`` (the Chronicarius over it).
        method: the method name, e.g. ``"record"`` or ``"record_actum"``.
        args: positional arguments.
        kwargs: keyword arguments.
    """

    target: Literal["store", "chronicarius"]
    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def store_call(method: str, *args: Any) -> Call:
    """Return a :class:`Call` of the store method ``method`` with ``args``."""
    return Call("store", method, args)


def rules_call(method: str, *args: Any, **kwargs: Any) -> Call:
    """Return a :class:`Call` of the Chronicarius method ``method`` with ``args`` and ``kwargs``."""
    return Call("chronicarius", method, args, kwargs)


class Harness(ABC):
    """The store under test and a Chronicarius over it, driven by blocking calls.

    Attributes:
        flavour: ``"sync"`` or ``"async"``.
        store: the store under test (a ``Store`` or an ``AsyncStore``).
        chronicarius: a ``Chronicarius`` or ``AsyncChronicarius`` over :attr:`store`.
        idempotent: whether the store is an ``IdempotentStore`` (``AsyncIdempotentStore``).
        declares_idempotent: whether the suite was told the store is idempotent (then the
            idempotent group fails instead of skipping when it is not).
        declares_capabilities: the capabilities the suite was told the store has (their groups
            then fail instead of skipping when it lacks one).
    """

    flavour: Flavour
    store: Any
    chronicarius: Any
    declares_idempotent: bool = False
    declares_capabilities: tuple[str, ...] = ()

    @property
    def idempotent(self) -> bool:
        """Whether the store under test offers ``record_idempotent``."""
        expected = IdempotentStore if self.flavour == "sync" else AsyncIdempotentStore
        return isinstance(self.store, expected)

    @property
    def capabilities(self) -> frozenset[str]:
        """The optional capabilities the store under test has (``store_capabilities``)."""
        return store_capabilities(self.store)

    @property
    def store_name(self) -> str:
        """The store's class name, for messages."""
        return type(self.store).__name__

    # -- the store, directly -------------------------------------------------------------------

    def create(self, chronicum: Chronicum) -> None:
        """``store.create(chronicum)``."""
        self.perform(store_call("create", chronicum))

    def get(self, chronicum_id: str) -> Chronicum:
        """``store.get(chronicum_id)``."""
        return cast(Chronicum, self.perform(store_call("get", chronicum_id)))

    def record(self, actum: Actum) -> Actum:
        """``store.record(actum)``."""
        return cast(Actum, self.perform(store_call("record", actum)))

    def record_idempotent(self, actum: Actum, key: str) -> Actum:
        """``store.record_idempotent(actum, key)``."""
        return cast(Actum, self.perform(store_call("record_idempotent", actum, key)))

    def acta(self, chronicum_id: str, query: ActaQuery | None = None) -> list[Actum]:
        """``store.acta(chronicum_id, query)``; ``None`` means every actum."""
        return cast(list[Actum], self.perform(store_call("acta", chronicum_id, query or ActaQuery())))

    # -- the Chronicarius over it ------------------------------------------------------------

    def record_actum(self, owner_id: str, actum: Actum, *, idempotency_key: str | None = None) -> Actum:
        """``chronicarius.record_actum(owner_id, actum, idempotency_key=...)``."""
        call = rules_call("record_actum", owner_id, actum, idempotency_key=idempotency_key)
        return cast(Actum, self.perform(call))

    def get_acta(
        self,
        owner_id: str,
        chronicum_id: str,
        *,
        actum_kinds: Iterable[ActumKind | str] | None = None,
        actor_kinds: Iterable[ActorKind | str] | None = None,
        last_n: int = 0,
        before: str | None = None,
        newest_first: bool = False,
        view: View | str = View.SUMMARIZED,
        tool_exchanges: ToolExchanges | str = ToolExchanges.WHOLE,
    ) -> list[Actum]:
        """``chronicarius.get_acta(owner_id, chronicum_id, ...)``."""
        call = rules_call(
            "get_acta",
            owner_id,
            chronicum_id,
            actum_kinds=actum_kinds,
            actor_kinds=actor_kinds,
            last_n=last_n,
            before=before,
            newest_first=newest_first,
            view=view,
            tool_exchanges=tool_exchanges,
        )
        return cast(list[Actum], self.perform(call))

    def get_actum(self, owner_id: str, chronicum_id: str, actum_id: str) -> Actum:
        """``chronicarius.get_actum(owner_id, chronicum_id, actum_id)``."""
        return cast(Actum, self.perform(rules_call("get_actum", owner_id, chronicum_id, actum_id)))

    def fork_chronicum(
        self, owner_id: str, chronicum_id: str, *, at: str | None = None, fork_id: str | None = None
    ) -> Chronicum:
        """``chronicarius.fork_chronicum(owner_id, chronicum_id, at=..., fork_id=...)``."""
        call = rules_call("fork_chronicum", owner_id, chronicum_id, at=at, fork_id=fork_id)
        return cast(Chronicum, self.perform(call))

    def get_chronicum(self, owner_id: str, chronicum_id: str) -> Chronicum:
        """``chronicarius.get_chronicum(owner_id, chronicum_id)``."""
        return cast(Chronicum, self.perform(rules_call("get_chronicum", owner_id, chronicum_id)))

    def record_acta(
        self, owner_id: str, acta: Sequence[Actum], *, idempotency_key: str | None = None
    ) -> list[Actum]:
        """``chronicarius.record_acta(owner_id, acta, idempotency_key=...)``."""
        call = rules_call("record_acta", owner_id, acta, idempotency_key=idempotency_key)
        return cast(list[Actum], self.perform(call))

    def list_chronica(self, owner_id: str, *, limit: Any = 50, cursor: Any = None) -> ChronicaPage:
        """``chronicarius.list_chronica(owner_id, limit=..., cursor=...)`` (any values, to test refusals)."""
        call = rules_call("list_chronica", owner_id, limit=limit, cursor=cursor)
        return cast(ChronicaPage, self.perform(call))

    def erase_chronicum(self, owner_id: str, chronicum_id: str) -> int:
        """``chronicarius.erase_chronicum(owner_id, chronicum_id)``."""
        return cast(int, self.perform(rules_call("erase_chronicum", owner_id, chronicum_id)))

    def erase_owner(self, owner_id: str) -> int:
        """``chronicarius.erase_owner(owner_id)``."""
        return cast(int, self.perform(rules_call("erase_owner", owner_id)))

    @property
    def store_calls(self) -> list[str]:
        """The store methods the Chronicarius called, in order.

        Only a harness of :meth:`with_chronicarius` watches them; ``[]`` for any other.
        """
        view = getattr(self.chronicarius, "store", None)
        return list(view.calls) if isinstance(view, _StoreView) else []

    # -- what differs between the flavours ---------------------------------------------------

    @abstractmethod
    def perform(self, call: Call) -> Any:
        """Perform one call and return its result; the store's exception propagates."""

    @abstractmethod
    def concurrently(self, calls: Sequence[Call]) -> list[Any]:
        """Start every call at once and wait for all of them.

        Sync: one thread per call, released together by a barrier. Async: one task per call in
        the harness's loop, under :func:`asyncio.gather`.

        Returns:
            For each call, in order, its result or the exception it raised.
        """

    @abstractmethod
    def follow_during(
        self,
        owner_id: str,
        chronicum_id: str,
        count: int,
        calls: Sequence[Call] = (),
        *,
        after: str | None = None,
        actum_kinds: Iterable[ActumKind | str] | None = None,
        actor_kinds: Iterable[ActorKind | str] | None = None,
    ) -> FollowRun:
        """Follow the chronicum until ``count`` acta came, while ``calls`` run concurrently.

        The follower starts first (the owner check and its position taken: an error there
        propagates before any call runs), then every call starts at once (as in
        :meth:`concurrently`); the follower stops after ``count`` acta, or after
        :data:`FOLLOW_GUARD_SECONDS` without them.

        Returns:
            A :class:`FollowRun`. An error the follower raised after it started propagates once
            the calls are done.
        """

    @abstractmethod
    def follow_left_behind(self, owner_id: str, chronicum_id: str, after: str) -> list[str]:
        """Start a follower after ``after``, let it wait for news, stop it; return what it left running.

        Sync: the generator ends by its ``timeout``; what is left is the threads started since.
        Async: the follower's task is cancelled while it waits; what is left is the tasks started
        since, but a store's shared ones (named :data:`SHARED_TASK_PREFIX`...).

        Returns:
            The names of the threads or tasks left behind (``[]`` for a correct store).
        """

    @abstractmethod
    def write_while_polling(self, batches: Sequence[Sequence[Actum]], chronicum_id: str) -> WritersAndPolls:
        """Record each batch in order, the batches all at once, while a reader polls ``get``.

        Sync: one thread per batch, released together, and a reader thread. Async: one task per
        batch and a reader task in the harness's loop. The reader reads
        ``store.get(chronicum_id).last_actum_at`` until every writer has finished, then once more.

        Returns:
            For each batch, in order, the list of acta ``record`` returned or the exception that
            stopped it; then every ``last_actum_at`` the reader saw, in the order it saw them.
        """

    @abstractmethod
    def with_chronicarius(
        self,
        *,
        owner_cache_size: int = 0,
        idempotent: bool = True,
        gate_first_reads: int = 0,
        hidden: Collection[str] = (),
        gate_summaries: int = 0,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        failing_writes: FailingWrites | None = None,
    ) -> Harness:
        """Return a harness over the same store (and loop) with a new Chronicarius.

        The new Chronicarius talks to the store through a view that records the name of every
        store method it calls (:attr:`store_calls`).

        Args:
            owner_cache_size: the new Chronicarius's owner cache (0: every call asks the store).
            idempotent: ``False`` hides ``record_idempotent`` from the new Chronicarius, as a store
                that is not idempotent would (rule R9).
            hidden: capabilities to hide from the new Chronicarius (``"batch"``, ``"listing"``,
                ``"erasure"``, ``"idempotency"``, ``"follow"``, ``"native"``, ``"history"``),
                as a store without them would; the others the store has are passed through.
            gate_first_reads: when positive, a ``get`` that finds no chronicum waits until this
                many such reads have happened before it raises ``ChronicumNotFound``: that many
                concurrent first writes then all race to ``create`` (rule R4).
            gate_summaries: when positive, each of the first this many ``record_summary`` calls
                waits until all of them were made before it reaches the store: that many
                concurrent summaries are then all checked against the same layout.
            tracer_provider: an OpenTelemetry tracer provider the new Chronicarius traces its
                operations with; ``None``: the app's global one.
            meter_provider: the meter provider for their durations; ``None``: the app's global one.
            failing_writes: when given, every ``record``, ``record_idempotent`` and ``record_many``
                the new Chronicarius makes fails with :data:`INJECTED_FAILURE`'s ``StoreError``:
                ``"alone"`` writing nothing, ``"after_landing"`` after the store wrote it (as
                another writer's write landing just before a failed one). On an asyncio store,
                ``"cancelled"`` makes each of those writes raise ``asyncio.CancelledError``
                instead, writing nothing, and ``"cancelled_after_create"`` makes ``create``
                raise it once the store created the chronicum: what a task cancelled while it
                awaited that call sees.
        """

    @abstractmethod
    def close_store(self) -> None:
        """Close the store under test now (``store.close()``, awaited in the loop for the async flavour)."""

    @abstractmethod
    def close(self) -> None:
        """Release what the harness opened (for the async flavour: close the store, then the loop)."""


_CAPABILITY_METHODS: dict[str, tuple[str, ...]] = {
    IDEMPOTENCY: ("record_idempotent",),
    BATCH: ("record_many",),
    LISTING: ("list_chronica",),
    ERASURE: ("erase", "erase_owner", "reopen"),
    FOLLOW: ("acta_after", "wait_for_acta"),
    NATIVE: ("keeps_native",),
    HISTORY: ("layout", "window", "locate", "fork", "record_summary"),
    RETENTION: ("idle_chronica", "erase_idle"),
}


class _StoreView:
    """The store under test as one Chronicarius sees it, maybe without some capabilities.

    ``max_content_bytes`` is kept when the store has it; so is each capability's methods
    (``record_idempotent``, ``record_many``, ``list_chronica``, ``erase``...) unless hidden.
    ``calls`` lists the name of every store method called through the view, in order.

    Each method hands back what the store's returns (a value, or a coroutine to await), so one
    view serves both flavours; the subclasses add the gate on first reads to ``get``. Methods
    are defined on the class (and ``record_idempotent`` on the instance, when kept) because
    runtime protocol checks look attributes up statically.
    """

    record_summary: Callable[..., Any]
    """Set (watched) only when the history capability is kept; declared for the summary gates."""

    def __init__(self, store: Any, *, idempotent: bool, hidden: Collection[str] = ()) -> None:
        self._store = store
        self.calls: list[str] = []
        hidden = set(hidden) | (set() if idempotent else {IDEMPOTENCY})
        kept = [
            name
            for capability, names in _CAPABILITY_METHODS.items()
            if capability not in hidden and all(hasattr(store, name) for name in names)
            for name in names
        ]
        withdraw = ("withdraw",) if "erase" in kept else ()  # optional, with the erasure capability
        for name in ("max_content_bytes", *kept, *withdraw):
            if hasattr(store, name):
                setattr(self, name, self._watched(name))

    def fail_writes(self, how: FailingWrites | None) -> None:
        """Make every write fail with the injected ``StoreError`` (see :meth:`Harness.with_chronicarius`)."""
        if how is None:
            return
        if how == "cancelled_after_create":
            self.create = self._cancelled("create", landing=True)  # type: ignore[method-assign]
            return
        for name in ("record", "record_idempotent", "record_many"):
            if hasattr(self, name):
                failing = (
                    self._cancelled(name, landing=False)
                    if how == "cancelled"
                    else self._failing(name, landing=how == "after_landing")
                )
                setattr(self, name, failing)

    def _cancelled(self, name: str, *, landing: bool) -> Callable[..., Any]:
        """The asyncio store's ``name`` raising ``asyncio.CancelledError``, after the call when ``landing``.

        Raises ``TypeError`` for a blocking store: only an asyncio task is cancelled mid-call.
        """
        method = getattr(self._store, name)
        if not inspect.iscoroutinefunction(method):
            raise TypeError(f"{name} is not a coroutine: only an asyncio store's call is cancelled")

        async def call_async(*arguments: Any) -> Any:
            self.calls.append(name)
            if landing:
                await method(*arguments)
            raise asyncio.CancelledError

        return call_async

    def _failing(self, name: str, *, landing: bool) -> Callable[..., Any]:
        method = getattr(self._store, name)

        def call(*arguments: Any) -> Any:
            self.calls.append(name)
            if landing:
                method(*arguments)
            raise _injected_failure()

        if inspect.iscoroutinefunction(method):

            async def call_async(*arguments: Any) -> Any:
                self.calls.append(name)
                if landing:
                    await method(*arguments)
                raise _injected_failure()

            return call_async
        return call

    def _watched(self, name: str) -> Callable[..., Any]:
        method = getattr(self._store, name)

        def call(*arguments: Any) -> Any:
            self.calls.append(name)
            return method(*arguments)

        if inspect.iscoroutinefunction(method):

            async def call_async(*arguments: Any) -> Any:
                self.calls.append(name)
                return await method(*arguments)

            return call_async
        return call

    def create(self, chronicum: Chronicum) -> Any:
        self.calls.append("create")
        return self._store.create(chronicum)

    def record(self, actum: Actum) -> Any:
        self.calls.append("record")
        return self._store.record(actum)

    def acta(self, chronicum_id: str, query: ActaQuery) -> Any:
        self.calls.append("acta")
        return self._store.acta(chronicum_id, query)

    def close(self) -> Any:
        """Nothing: the store under test is closed by its owner, never by a view."""
        return None


class _GatedStoreView(_StoreView, Store):
    """A blocking view whose ``get`` of a missing chronicum waits at ``gate`` before raising."""

    def __init__(
        self, store: Any, *, idempotent: bool, gate: threading.Barrier | None, hidden: Collection[str] = ()
    ) -> None:
        super().__init__(store, idempotent=idempotent, hidden=hidden)
        self._gate = gate

    def get(self, chronicum_id: str) -> Chronicum:
        self.calls.append("get")
        try:
            return cast(Chronicum, self._store.get(chronicum_id))
        except ChronicumNotFound:
            if self._gate is not None:
                self._gate.wait()
            raise

    def gate_summaries(self, gate: threading.Barrier) -> None:
        """Make each of the first ``gate.parties`` ``record_summary`` calls wait at ``gate`` first."""
        record_summary = self.record_summary
        made = itertools.count()

        def gated(*arguments: Any) -> Any:
            if next(made) < gate.parties:
                gate.wait()
            return record_summary(*arguments)

        self.record_summary = gated


class SyncHarness(Harness):
    """Drives a blocking :class:`~chronica_core.Store`; concurrent calls run in threads.

    Args:
        store: the store under test; the harness never closes it (its fixture does).
        chronicarius: the Chronicarius to use; a fresh one over ``store`` when ``None``.
    """

    flavour: Flavour = "sync"

    def __init__(self, store: Store, *, chronicarius: Chronicarius | None = None) -> None:
        self.store = store
        self.chronicarius = chronicarius if chronicarius is not None else Chronicarius(store)

    def perform(self, call: Call) -> Any:
        """Call the method on the store or the Chronicarius."""
        target = self.store if call.target == "store" else self.chronicarius
        return getattr(target, call.method)(*call.args, **call.kwargs)

    def concurrently(self, calls: Sequence[Call]) -> list[Any]:
        """Run each call in its own thread, all released at once; see :meth:`Harness.concurrently`."""
        return _in_threads([functools.partial(self.perform, call) for call in calls])

    def write_while_polling(self, batches: Sequence[Sequence[Actum]], chronicum_id: str) -> WritersAndPolls:
        """See :meth:`Harness.write_while_polling`; the reader's error, if any, is raised."""
        store = self.store
        finished = threading.Event()
        seen: list[datetime | None] = []
        failure: list[BaseException] = []

        def read() -> None:
            try:
                while not finished.wait(POLL_PAUSE_SECONDS):
                    seen.append(store.get(chronicum_id).last_actum_at)
                seen.append(store.get(chronicum_id).last_actum_at)
            except BaseException as error:  # noqa: BLE001 - raised in the calling thread below
                failure.append(error)

        reader = threading.Thread(target=read, name="chronica-conformance-reader", daemon=True)
        reader.start()
        try:
            outcomes = _in_threads([functools.partial(_write_in_order, store, batch) for batch in batches])
        finally:
            finished.set()
            reader.join(CONCURRENT_TIMEOUT_SECONDS)
        if failure:
            raise failure[0]
        return outcomes, seen

    def follow_during(
        self,
        owner_id: str,
        chronicum_id: str,
        count: int,
        calls: Sequence[Call] = (),
        *,
        after: str | None = None,
        actum_kinds: Iterable[ActumKind | str] | None = None,
        actor_kinds: Iterable[ActorKind | str] | None = None,
    ) -> FollowRun:
        """See :meth:`Harness.follow_during`; the follower iterates in a thread of its own."""
        follower = self.chronicarius.follow(
            owner_id,
            chronicum_id,
            after=after,
            actum_kinds=actum_kinds,
            actor_kinds=actor_kinds,
            timeout=FOLLOW_GUARD_SECONDS,
            poll_interval=FOLLOW_POLL_SECONDS,
        )
        collected: list[Actum] = []
        failure: list[BaseException] = []

        def read() -> None:
            try:
                for actum in follower:
                    collected.append(actum)
                    if len(collected) >= count:
                        break
            except BaseException as error:  # noqa: BLE001 - raised in the calling thread below
                failure.append(error)
            finally:
                follower.close()

        reader = threading.Thread(target=read, name="chronica-conformance-follower", daemon=True)
        reader.start()
        outcomes = self.concurrently(calls) if calls else []
        reader.join(FOLLOW_GUARD_SECONDS + CONCURRENT_TIMEOUT_SECONDS)
        if reader.is_alive():
            raise AssertionError("the follower did not end within its guard")
        if failure:
            raise failure[0]
        return FollowRun(list(collected), outcomes)

    def follow_left_behind(self, owner_id: str, chronicum_id: str, after: str) -> list[str]:
        """See :meth:`Harness.follow_left_behind`."""
        before = set(threading.enumerate())
        follower = self.chronicarius.follow(
            owner_id, chronicum_id, after=after, timeout=0.1, poll_interval=FOLLOW_POLL_SECONDS
        )
        for actum in follower:  # ends by its timeout, having yielded nothing
            follower.close()
            raise AssertionError(f"a follower after the newest actum yielded {actum!r}")
        return sorted(
            thread.name
            for thread in set(threading.enumerate()) - before
            if thread.is_alive() and not thread.name.startswith(SHARED_TASK_PREFIX)
        )

    def with_chronicarius(
        self,
        *,
        owner_cache_size: int = 0,
        idempotent: bool = True,
        gate_first_reads: int = 0,
        hidden: Collection[str] = (),
        gate_summaries: int = 0,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        failing_writes: FailingWrites | None = None,
    ) -> SyncHarness:
        """See :meth:`Harness.with_chronicarius`."""
        gate = (
            threading.Barrier(gate_first_reads, timeout=CONCURRENT_TIMEOUT_SECONDS)
            if gate_first_reads
            else None
        )
        view = _GatedStoreView(self.store, idempotent=idempotent, gate=gate, hidden=hidden)
        view.fail_writes(failing_writes)
        if gate_summaries and hasattr(view, "record_summary"):
            view.gate_summaries(threading.Barrier(gate_summaries, timeout=CONCURRENT_TIMEOUT_SECONDS))
        harness = SyncHarness(
            self.store,
            chronicarius=Chronicarius(
                view,
                owner_cache_size=owner_cache_size,
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
            ),
        )
        harness.declares_idempotent = self.declares_idempotent
        harness.declares_capabilities = self.declares_capabilities
        return harness

    def close_store(self) -> None:
        """See :meth:`Harness.close_store`."""
        self.store.close()

    def close(self) -> None:
        """Nothing to release: the store's fixture closes the store."""


def _write_in_order(store: Store, batch: Sequence[Actum]) -> list[Actum]:
    """``store.record`` each actum of ``batch`` in turn; return what each returned."""
    return [store.record(actum) for actum in batch]


def _in_threads(functions: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run every function in its own thread, released together; return results or exceptions."""
    outcomes: list[Any] = [None] * len(functions)
    start = threading.Barrier(len(functions))

    def work(index: int) -> None:
        try:
            start.wait()
            outcomes[index] = functions[index]()
        except BaseException as error:  # noqa: BLE001 - every outcome is handed back to the case
            outcomes[index] = error

    threads = [
        threading.Thread(target=work, args=(index,), name=f"chronica-conformance-{index}", daemon=True)
        for index in range(len(functions))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(CONCURRENT_TIMEOUT_SECONDS)
        if thread.is_alive():
            raise AssertionError(f"concurrent calls did not finish within {CONCURRENT_TIMEOUT_SECONDS} s")
    return outcomes


class _AsyncGatedStoreView(_StoreView, AsyncStore):
    """An asyncio view whose ``get`` of a missing chronicum waits at ``gate`` before raising."""

    def __init__(
        self, store: Any, *, idempotent: bool, gate: asyncio.Barrier | None, hidden: Collection[str] = ()
    ) -> None:
        super().__init__(store, idempotent=idempotent, hidden=hidden)
        self._gate = gate

    async def get(self, chronicum_id: str) -> Chronicum:
        self.calls.append("get")
        try:
            return cast(Chronicum, await self._store.get(chronicum_id))
        except ChronicumNotFound:
            if self._gate is not None:
                async with asyncio.timeout(CONCURRENT_TIMEOUT_SECONDS):
                    await self._gate.wait()
            raise

    def gate_summaries(self, gate: asyncio.Barrier) -> None:
        """Make each of the first ``gate.parties`` ``record_summary`` calls wait at ``gate`` first."""
        record_summary = self.record_summary
        made = itertools.count()

        async def gated(*arguments: Any) -> Any:
            if next(made) < gate.parties:
                async with asyncio.timeout(CONCURRENT_TIMEOUT_SECONDS):
                    await gate.wait()
            return await record_summary(*arguments)

        self.record_summary = gated


class AsyncHarness(Harness):
    """Drives an :class:`~chronica_core.AsyncStore` in its own event loop.

    Every call runs in one :class:`asyncio.Runner` owned by the harness; :meth:`close` awaits
    ``store.close()`` in that loop, then closes the loop.

    Args:
        store: the store under test, constructed without awaiting (it connects lazily, inside
            this harness's loop).
        runner: the runner to share (used by :meth:`with_chronicarius`); a new one when ``None``.
        chronicarius: the AsyncChronicarius to use; a fresh one over ``store`` when ``None``.
    """

    flavour: Flavour = "async"

    def __init__(
        self,
        store: AsyncStore,
        *,
        runner: asyncio.Runner | None = None,
        chronicarius: AsyncChronicarius | None = None,
    ) -> None:
        self.store = store
        self.chronicarius = chronicarius if chronicarius is not None else AsyncChronicarius(store)
        self._owns_runner = runner is None
        self._runner = runner if runner is not None else asyncio.Runner()

    def perform(self, call: Call) -> Any:
        """Await the method on the store or the Chronicarius in the harness's loop."""
        return self._runner.run(self._perform(call))

    async def _perform(self, call: Call) -> Any:
        target = self.store if call.target == "store" else self.chronicarius
        return await getattr(target, call.method)(*call.args, **call.kwargs)

    def concurrently(self, calls: Sequence[Call]) -> list[Any]:
        """Run every call as a task under :func:`asyncio.gather`; see :meth:`Harness.concurrently`."""

        async def together() -> list[Any]:
            async with asyncio.timeout(CONCURRENT_TIMEOUT_SECONDS):
                return await asyncio.gather(*(self._perform(call) for call in calls), return_exceptions=True)

        return self._runner.run(together())

    def write_while_polling(self, batches: Sequence[Sequence[Actum]], chronicum_id: str) -> WritersAndPolls:
        """See :meth:`Harness.write_while_polling`; the reader's error, if any, is raised."""
        store = self.store

        async def write(batch: Sequence[Actum]) -> list[Actum]:
            return [await store.record(actum) for actum in batch]

        async def together() -> WritersAndPolls:
            finished = asyncio.Event()
            seen: list[datetime | None] = []

            async def read() -> None:
                while not finished.is_set():
                    seen.append((await store.get(chronicum_id)).last_actum_at)
                    await asyncio.sleep(POLL_PAUSE_SECONDS)
                seen.append((await store.get(chronicum_id)).last_actum_at)

            async with asyncio.timeout(CONCURRENT_TIMEOUT_SECONDS):
                reader = asyncio.create_task(read())
                try:
                    outcomes = await asyncio.gather(
                        *(write(batch) for batch in batches), return_exceptions=True
                    )
                finally:
                    finished.set()
                    await reader
            return list(outcomes), seen

        return self._runner.run(together())

    def follow_during(
        self,
        owner_id: str,
        chronicum_id: str,
        count: int,
        calls: Sequence[Call] = (),
        *,
        after: str | None = None,
        actum_kinds: Iterable[ActumKind | str] | None = None,
        actor_kinds: Iterable[ActorKind | str] | None = None,
    ) -> FollowRun:
        """See :meth:`Harness.follow_during`; the follower iterates in a task of its own."""

        async def together() -> FollowRun:
            follower = self.chronicarius.follow(
                owner_id,
                chronicum_id,
                after=after,
                actum_kinds=actum_kinds,
                actor_kinds=actor_kinds,
                poll_interval=FOLLOW_POLL_SECONDS,
            )
            await follower.start()
            collected: list[Actum] = []

            async def read() -> None:
                async for actum in follower:
                    collected.append(actum)
                    if len(collected) >= count:
                        break

            reader = asyncio.create_task(read(), name="chronica-conformance-follower")
            outcomes: list[Any] = []
            if calls:
                async with asyncio.timeout(CONCURRENT_TIMEOUT_SECONDS):
                    outcomes = await asyncio.gather(
                        *(self._perform(call) for call in calls), return_exceptions=True
                    )
            try:
                async with asyncio.timeout(FOLLOW_GUARD_SECONDS):
                    await reader
            except TimeoutError:
                pass  # too few acta: the case fails on what was collected
            return FollowRun(list(collected), list(outcomes))

        return self._runner.run(together())

    def follow_left_behind(self, owner_id: str, chronicum_id: str, after: str) -> list[str]:
        """See :meth:`Harness.follow_left_behind`."""

        async def cancelled() -> list[str]:
            before = asyncio.all_tasks()
            follower = self.chronicarius.follow(
                owner_id, chronicum_id, after=after, poll_interval=FOLLOW_POLL_SECONDS
            )
            await follower.start()

            async def read() -> None:
                async for actum in follower:
                    raise AssertionError(f"a follower after the newest actum yielded {actum!r}")

            reader = asyncio.create_task(read(), name="chronica-conformance-follower")
            await asyncio.sleep(0.1)  # let it reach its wait (the check holds either way)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            await asyncio.sleep(0)  # let whatever the cancellation ended finish
            left = asyncio.all_tasks() - before - {reader}
            return sorted(
                task.get_name() for task in left if not task.get_name().startswith(SHARED_TASK_PREFIX)
            )

        return self._runner.run(cancelled())

    def with_chronicarius(
        self,
        *,
        owner_cache_size: int = 0,
        idempotent: bool = True,
        gate_first_reads: int = 0,
        hidden: Collection[str] = (),
        gate_summaries: int = 0,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        failing_writes: FailingWrites | None = None,
    ) -> AsyncHarness:
        """See :meth:`Harness.with_chronicarius`."""
        gate = asyncio.Barrier(gate_first_reads) if gate_first_reads else None
        view = _AsyncGatedStoreView(self.store, idempotent=idempotent, gate=gate, hidden=hidden)
        view.fail_writes(failing_writes)
        if gate_summaries and hasattr(view, "record_summary"):
            view.gate_summaries(asyncio.Barrier(gate_summaries))
        chronicarius = AsyncChronicarius(
            view,
            owner_cache_size=owner_cache_size,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
        )
        harness = AsyncHarness(self.store, runner=self._runner, chronicarius=chronicarius)
        harness.declares_idempotent = self.declares_idempotent
        harness.declares_capabilities = self.declares_capabilities
        return harness

    def close_store(self) -> None:
        """See :meth:`Harness.close_store`."""
        self._runner.run(self.store.close())

    def close(self) -> None:
        """Await ``store.close()`` in the harness's loop, then close the loop (if it owns them)."""
        if not self._owns_runner:
            return
        try:
            self._runner.run(self.store.close())
        finally:
            self._runner.close()
