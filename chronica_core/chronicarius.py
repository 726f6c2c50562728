"""The object apps talk to: :class:`Chronicarius` and its asyncio twin :class:`AsyncChronicarius`.

Both run the same plans from :mod:`chronica_core.rules`; they differ only in how a store call is
performed (called, or awaited).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Sequence
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from chronica_core.capabilities import store_capabilities
from chronica_core.conflicts import again_after_conflict, again_after_conflict_async
from chronica_core.errors import StoreConflict
from chronica_core.follow import (
    DEFAULT_POLL_INTERVAL,
    FOLLOW_PAUSE,
    Following,
    follow_reads,
    follow_step,
)
from chronica_core.history import ToolExchanges, View
from chronica_core.ids import new_actum_id
from chronica_core.listing import DEFAULT_LIST_LIMIT
from chronica_core.model import ActorKind, Actum, ActumKind, ChronicaPage, Chronicum
from chronica_core.plans import Plan, run_plan, run_plan_async
from chronica_core.rules import DEFAULT_OWNER_CACHE_SIZE, Rules, StoreCall
from chronica_core.store import AsyncStore, Store
from chronica_core.telemetry import Counter, telemetry_for

__all__ = ["AsyncChronicarius", "AsyncFollower", "Chronicarius"]


StoreFlavour = TypeVar("StoreFlavour", Store, AsyncStore)


_OPERATIONS = ("create", "get", "record", "acta")

_SUMMARIZED, _WHOLE = View.SUMMARIZED, ToolExchanges.WHOLE
"""The default view and tool exchanges, looked up once: every ``get_acta`` compares with them, and
an enum member read off its class goes through the enum's metaclass each time."""

Result = TypeVar("Result")


def _one(_: object) -> int:
    """An operation of one actum."""
    return 1


def _erased_count(erased: int) -> int:
    """An erasure's count of acta."""
    return erased


def _wrong_flavour(keeper: object, store: object) -> TypeError:
    asynchronous = isinstance(keeper, AsyncChronicarius)
    wanted = "an AsyncStore (open_async_store)" if asynchronous else "a Store (open_store)"
    other = "Chronicarius" if asynchronous else "AsyncChronicarius"
    return TypeError(f"{type(keeper).__name__} needs {wanted}, not {type(store).__name__}; or use {other}")


class _Keeper(Generic[StoreFlavour]):
    """What both flavours hold: the store and the one set of rules (see :class:`Chronicarius`)."""

    _asynchronous: ClassVar[bool]

    def __init__(
        self,
        store: StoreFlavour,
        *,
        id_factory: Callable[[], str] = new_actum_id,
        owner_cache_size: int = DEFAULT_OWNER_CACHE_SIZE,
        tracer_provider: Any = None,
        meter_provider: Any = None,
    ) -> None:
        coroutines = [inspect.iscoroutinefunction(getattr(store, name, None)) for name in _OPERATIONS]
        if any(coroutines) != self._asynchronous:
            raise _wrong_flavour(self, store)
        self.store: StoreFlavour = store
        self._rules = Rules(
            store_name=type(store).__name__,
            capabilities=store_capabilities(store),
            id_factory=id_factory,
            owner_cache_size=owner_cache_size,
            limited=callable(getattr(store, "max_content_bytes", None)),
            withdraws=callable(getattr(store, "withdraw", None)),
        )
        self._follow_reads = follow_reads(store)
        self._telemetry = telemetry_for(store, tracer_provider, meter_provider)


class Chronicarius(_Keeper[Store]):
    """Keeps the Chronicarius rules (see chronica_core.rules) over a blocking :class:`Store`.

    Thread-safe when the store is. Every method names the owner. A read of a chronicum that is
    not the owner's answers exactly like a read of one that does not exist. A write cannot hide
    that much: a write into an id nobody holds creates the chronicum, while a write into an id
    another owner holds raises ``ChronicumNotFound``, so a writer can learn that an id is taken
    (never by whom, nor anything in it). Give new chronica unguessable ids
    (:func:`chronica_core.new_chronicum_id`), never ones such as ``main`` that two owners would
    both pick.

    Args:
        store: where chronica and acta are kept.
        id_factory: returns a fresh actum id; defaults to 32 random lowercase hex characters
            (inject a deterministic one in tests).
        owner_cache_size: how many ``chronicum id -> owner`` pairs to remember to save a round
            trip (ownership never changes); ``0`` disables the cache.
        tracer_provider: an OpenTelemetry tracer provider to trace this Chronicarius's operations
            with, instead of the app's global one (see :mod:`chronica_core.telemetry`);
            ``meter_provider`` likewise for their durations (``None``: the global ones).

    Raises:
        ModuleNotFoundError: a ``tracer_provider`` is given and ``opentelemetry-api`` is not installed.
        TypeError: ``store`` is an asyncio store (one of its operations is an ``async def``); use
            :class:`AsyncChronicarius` for those. ``AsyncChronicarius`` likewise refuses a store
            none of whose operations is an ``async def``.
    """

    _asynchronous = False

    def record_actum(
        self, owner_id: str, actum: Actum, *, idempotency_key: str | None = None, create: bool = True
    ) -> Actum:
        """Record ``actum`` for ``owner_id``, creating its chronicum on the first write.

        Args:
            owner_id: the person the chronicum belongs to.
            actum: what happened; its ``id`` and ``at`` are replaced.
            idempotency_key: with a key, a retry in the same chronicum returns the actum stored
                the first time and discards the new one.
            create: ``False`` writes only into a chronicum that exists now: an id nobody holds,
                or one erased (also by an erasure racing this write), is ``ChronicumNotFound``
                and nothing is created or reopened. For a write that completes something read
                from the chronicum before (a follow-up that must not outlive an erasure).

        Returns:
            The stored actum: a fresh 32-hex-character ``id`` and the store's UTC ``at``.

        Raises:
            InvalidActum: a field is missing or wrong (``.field`` names it), or ``create`` is not
                a bool (``field="create"``); nothing is written.
            ActumTooLarge: (an ``InvalidActum``) the content is larger than the store accepts
                (``.size`` and ``.limit`` in bytes of UTF-8); nothing is written, not even the
                chronicum of a first write, when the store tells its limit (every Chronica store does).
            IdempotencyUnsupported: (a ``CapabilityUnsupported``) a key was given and the store is
                not idempotent; nothing is written, not even the chronicum.
            ChronicumNotFound: the chronicum belongs to another owner; nothing is written. (An
                id nobody holds is created instead, so this tells the writer the id is taken.)
                With ``create=False``, also: the chronicum does not exist or was erased.
            EmptyOwnerID: ``owner_id`` is empty or ``None`` (checked before anything else).
            InvalidOwnerID: ``owner_id`` is not a str, contains NUL or is not valid UTF-8.
            StoreError: the store failed; chained to the driver's exception. A first write that
                fails so leaves no empty chronicum behind (see ``ErasableStore``'s ``withdraw``).
        """
        plan = self._rules.record_actum(owner_id, actum, idempotency_key, create)
        return self._run("record_actum", plan, _one)

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
        """Return a context window: filter by kinds, then keep the newest ``last_n``, oldest first.

        On a store with the ``history`` capability the window is over the chronicum's whole
        history (a fork's shared prefix included); each summary stands in its range's place
        (unless ``view="as_written"``) and counts as one ``message``; and a tool response never
        comes without the request it answers (see ``tool_exchanges``).

        Args:
            owner_id: the person asking.
            chronicum_id: the chronicum to read.
            actum_kinds: kinds to keep (enums or their string values); ``None`` or empty keeps all.
            actor_kinds: actor kinds to keep; ``None`` or empty keeps all.
            last_n: how many of the newest to keep; ``0`` or negative keeps all.
            before: an actum id: keep only what stands before it (a page back from it); the
                ``history`` capability.
            newest_first: return the window newest first (for a page scrolled backwards).
            view: ``"summarized"`` (each summary instead of the acta it stands for) or
                ``"as_written"`` (every actum at its own place, summaries included).
            tool_exchanges: for a tool response whose request the filters or the limit left
                out: ``"whole"`` adds the request at its own place (the window may then hold
                more than ``last_n``), ``"drop_orphans"`` leaves the response out,
                ``"as_written"`` keeps the window as the filters and the limit made it.

        Returns:
            The acta in the order they were recorded (newest first with ``newest_first``).

        Raises:
            ChronicumNotFound: the chronicum does not exist or is not the owner's (the same
                message either way).
            ActumNotFound: ``before`` is not an actum of the chronicum's history.
            InvalidQuery: an unknown kind, view or ``tool_exchanges``, a ``last_n`` that is not
                an int, a ``newest_first`` that is not a bool, a ``before`` that is not ``None``
                or a non-empty str (``.field`` names it).
            CapabilityUnsupported: ``before`` on a store without the ``history`` capability.
            EmptyOwnerID: ``owner_id`` is empty or ``None`` (checked before anything else).
            InvalidOwnerID: ``owner_id`` is not a str, contains NUL or is not valid UTF-8.
            StoreError: the store failed; chained to the driver's exception.
        """
        shape = (
            None  # the usual window
            if before is None and newest_first is False and view is _SUMMARIZED and tool_exchanges is _WHOLE
            else (before, newest_first, view, tool_exchanges)
        )
        plan = self._rules.get_acta(owner_id, chronicum_id, actum_kinds, actor_kinds, last_n, shape)
        return self._run("get_acta", plan, len, last_n)

    def get_actum(self, owner_id: str, chronicum_id: str, actum_id: str) -> Actum:
        """Return one actum of the owner's chronicum by its id (the ``history`` capability).

        Any actum of the chronicum's history: a fork's shared prefix included (such an actum
        keeps the ``chronicum_id`` it was written in).

        Raises:
            ChronicumNotFound: the chronicum does not exist or is not the owner's (the same
                message either way).
            ActumNotFound: the chronicum's history holds no actum with that id.
            CapabilityUnsupported: the store has no ``history`` capability.
            EmptyOwnerID: ``owner_id`` is empty or ``None`` (checked before anything else).
            InvalidOwnerID: ``owner_id`` is not a str, contains NUL or is not valid UTF-8.
            StoreError: the store failed; chained to the driver's exception.
        """
        return self._run("get_actum", self._rules.get_actum(owner_id, chronicum_id, actum_id), _one)

    def fork_chronicum(
        self, owner_id: str, chronicum_id: str, *, at: str | None = None, fork_id: str | None = None
    ) -> Chronicum:
        """Fork one of the owner's chronica: a new chronicum sharing its history up to an actum.

        The fork's history is the source's, up to and including the actum ``at``, then its own.
        Nothing is copied: forking costs the same whatever the length of the shared history.
        The source is unchanged; both go on independently. Erasing a chronicum also erases its
        forks, since they share its acta.

        Args:
            owner_id: the person the source belongs to (and so the fork).
            chronicum_id: the chronicum to fork (itself a fork or not).
            at: id of the last actum of the source's history the fork shares; ``None``: its
                newest now.
            fork_id: the new chronicum's id; ``None`` (the default) makes an unguessable one
                (:func:`chronica_core.new_chronicum_id`).

        Returns:
            The fork, with ``forked_from`` set to the source and the shared actum.

        Raises:
            ChronicumNotFound: the source does not exist or is not the owner's (the same message
                either way), or it was erased while being forked; nothing is created.
            ChronicumExists: ``fork_id`` is taken; nothing is created.
            ActumNotFound: ``at`` is not an actum of the source's history; nothing is created.
            InvalidQuery: ``fork_id`` is not a usable id (``field="fork_id"``), or ``at`` is not
                ``None`` or a non-empty str (``field="at"``).
            CapabilityUnsupported: the store has no ``history`` capability.
            EmptyOwnerID: ``owner_id`` is empty or ``None`` (checked before anything else).
            InvalidOwnerID: ``owner_id`` is not a str, contains NUL or is not valid UTF-8.
            StoreError: the store failed; chained to the driver's exception.
        """
        return self._run("fork_chronicum", self._rules.fork_chronicum(owner_id, chronicum_id, at, fork_id))

    def get_chronicum(self, owner_id: str, chronicum_id: str) -> Chronicum:
        """Return the owner's chronicum as the store has it now.

        Raises:
            ChronicumNotFound: the chronicum does not exist or is not the owner's (the same
                message either way).
            EmptyOwnerID: ``owner_id`` is empty or ``None`` (checked before anything else).
            InvalidOwnerID: ``owner_id`` is not a str, contains NUL or is not valid UTF-8.
            StoreError: the store failed; chained to the driver's exception.
        """
        return self._run("get_chronicum", self._rules.get_chronicum(owner_id, chronicum_id))

    def record_acta(
        self, owner_id: str, acta: Sequence[Actum], *, idempotency_key: str | None = None, create: bool = True
    ) -> list[Actum]:
        """Record a batch of acta of one chronicum for ``owner_id``, all or none, one after another.

        Every actum is checked before anything is written. The batch lands atomically and
        consecutively: no other writer's actum falls between its acta, and a reader sees all of
        it or none. The chronicum is created on the first write, as for :meth:`record_actum`.

        Args:
            owner_id: the person the chronicum belongs to.
            acta: up to 1000 acta (:data:`chronica_core.rules.MAX_BATCH_SIZE`), all naming one
                chronicum; their ``id`` and ``at`` are replaced. An ``id`` given may be named
                by a later tool response's ``answers`` (it then answers that request's new id).
            idempotency_key: with a key, a retry in the same chronicum returns the acta the
                first call stored (the whole list, same ids) and writes nothing.
            create: ``False`` writes only into a chronicum that exists now, as for
                :meth:`record_actum`.

        Returns:
            The stored acta in the order given, each with a fresh id and the store's UTC ``at``;
            ``[]`` for an empty ``acta`` (nothing is created then).

        Raises:
            InvalidActum: an actum is wrong (``.index`` is its position, ``.field`` the field),
                the acta name more than one chronicum (``field="chronicum_id"``), ``acta`` is not
                a list of acta or holds more than 1000 (``field="acta"``), two acta are given one
                ``id`` (``field="id"``), a response's ``answers`` names an actum of the batch that
                is not an earlier ``tool_request`` (``field="answers"``), the key is unusable, or
                ``create`` is not a bool (``field="create"``); nothing is written.
            ActumTooLarge: (an ``InvalidActum``) an actum's content is larger than the store
                accepts; nothing is written.
            CapabilityUnsupported: the store has no ``batch`` capability (or, given a key, no
                ``idempotency``: ``IdempotencyUnsupported``); nothing is written.
            ChronicumNotFound: the chronicum belongs to another owner; nothing is written. With
                ``create=False``, also: the chronicum does not exist or was erased.
            EmptyOwnerID: ``owner_id`` is empty or ``None`` (checked before anything else).
            InvalidOwnerID: ``owner_id`` is not a str, contains NUL or is not valid UTF-8.
            StoreError: the store failed; chained to the driver's exception. Nothing was written,
                not even the chronicum of a first write (see ``ErasableStore``'s ``withdraw``).
        """
        plan = self._rules.record_acta(owner_id, acta, idempotency_key, create)
        return self._run("record_acta", plan, len)

    def list_chronica(
        self, owner_id: str, *, limit: int = DEFAULT_LIST_LIMIT, cursor: str | None = None
    ) -> ChronicaPage:
        """Return one page of the owner's chronica, newest ``started_at`` first, ties by id.

        Pages are keyset pages: following ``next_cursor`` from the first page sees every chronicum
        that existed when the walk began exactly once, however many are created meanwhile.

        Args:
            owner_id: the person whose chronica to list; no one else's are ever listed.
            limit: how many chronica a page holds, 1 to 1000.
            cursor: ``next_cursor`` of the previous page; ``None`` for the first page.

        Returns:
            A :class:`chronica_core.ChronicaPage`: ``.chronica`` and ``.next_cursor`` (``None``
            on the last page).

        Raises:
            InvalidQuery: ``limit`` is not an int from 1 to 1000 (``field="limit"``), or ``cursor``
                is malformed or was made for another owner (``field="cursor"``).
            CapabilityUnsupported: the store has no ``listing`` capability.
            EmptyOwnerID: ``owner_id`` is empty or ``None`` (checked before anything else).
            InvalidOwnerID: ``owner_id`` is not a str, contains NUL or is not valid UTF-8.
            StoreError: the store failed; chained to the driver's exception.
        """
        return self._run("list_chronica", self._rules.list_chronica(owner_id, limit, cursor))

    def erase_chronicum(self, owner_id: str, chronicum_id: str) -> int:
        """Erase one of the owner's chronica: its acta, their keys and its fields leave the store.

        A data-protection operation, not an edit. What remains is a marker holding the id and a
        digest of the owner, so the id never passes to another owner; the same owner writing to
        it again starts a fresh, empty chronicum. Reads of it answer ``ChronicumNotFound``.

        Returns:
            How many acta were erased.

        Raises:
            ChronicumNotFound: the chronicum does not exist, was erased, or is not the owner's.
            CapabilityUnsupported: the store has no ``erasure`` capability; nothing is erased.
            EmptyOwnerID: ``owner_id`` is empty or ``None`` (checked before anything else).
            InvalidOwnerID: ``owner_id`` is not a str, contains NUL or is not valid UTF-8.
            StoreError: the store failed; chained to the driver's exception. On a store with
                transactions nothing was erased; on one without (see the backend's README) the erasure
                may have stopped midway, the chronicum already gone from every read and write,
                and :meth:`erase_owner` finishes it.
        """
        return self._run(
            "erase_chronicum", self._rules.erase_chronicum(owner_id, chronicum_id), _erased_count
        )

    def erase_owner(self, owner_id: str) -> int:
        """Erase every chronicum of ``owner_id``, each as :meth:`erase_chronicum` does.

        Returns:
            How many chronica were erased (``0`` when the owner has none).

        Raises:
            CapabilityUnsupported: the store has no ``erasure`` capability; nothing is erased.
            EmptyOwnerID: ``owner_id`` is empty or ``None`` (checked before anything else).
            InvalidOwnerID: ``owner_id`` is not a str, contains NUL or is not valid UTF-8.
            StoreError: the store failed; chained to the driver's exception. A retry finishes
                the job: it erases the chronica left and finishes any erasure cut short.
        """
        return self._run("erase_owner", self._rules.erase_owner(owner_id))

    def erase_idle(self, *, before: datetime, owner_id: str | None = None, dry_run: bool = False) -> int:
        """Erase every chronicum idle since before ``before``: a retention rule, in bounded steps.

        A chronicum's last activity is its newest actum's ``at`` (its start, without acta). Each
        is erased as :meth:`erase_chronicum` erases one, with its forks, each in a short step of
        its own: a chronicum written to (or with a fork written to) while it is being erased is
        kept whole, and its id never passes to another owner. An admin's call: it is not one
        owner's unless ``owner_id`` says so.

        Args:
            before: a timezone-aware moment; e.g. ``datetime.now(UTC) - timedelta(days=90)``.
            owner_id: only this owner's chronica; ``None``: every owner's.
            dry_run: erase nothing; count what is idle now.

        Returns:
            How many chronica were erased (with ``dry_run``: how many are idle).

        Raises:
            InvalidQuery: ``before`` is not a timezone-aware datetime (``field="before"``), or
                ``dry_run`` is not a bool (``field="dry_run"``); nothing is erased.
            CapabilityUnsupported: the store has no ``retention`` capability; nothing is erased.
            EmptyOwnerID: ``owner_id`` is ``""``.
            InvalidOwnerID: ``owner_id`` is not a str, contains NUL or is not valid UTF-8.
            StoreError: the store failed; chained to the driver's exception. What was erased
                stays erased; a retry goes on with the rest.
        """
        return self._run("erase_idle", self._rules.erase_idle(before, owner_id, dry_run))

    def follow(
        self,
        owner_id: str,
        chronicum_id: str,
        *,
        after: str | None = None,
        actum_kinds: Iterable[ActumKind | str] | None = None,
        actor_kinds: Iterable[ActorKind | str] | None = None,
        timeout: float | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> Generator[Actum, None, None]:
        """Follow a chronicum like ``tail -f``: yield its acta as they are recorded, blocking between.

        The owner check happens in this call, before it returns; the acta come from the returned
        generator, in write order: first every matching actum recorded after the actum ``after``,
        then each new one as it is recorded. No actum is yielded twice and none is skipped, with
        any number of writers, in this process or others. Closing the generator (``break``,
        ``close()``) leaves nothing behind. How the generator waits depends on the store (see
        :mod:`chronica_core.follow`): stores with the ``follow`` capability wake it; on others it
        reads the newest acta every ``poll_interval`` seconds.

        Args:
            owner_id: the person asking.
            chronicum_id: the chronicum to follow.
            after: id of an actum of the chronicum: start just after it (a follower that stopped
                resumes with the id of the last actum it got). ``None``: only what is recorded
                from now on.
            actum_kinds: kinds to yield (enums or their string values); ``None`` or empty: all.
            actor_kinds: actor kinds to yield; ``None`` or empty: all.
            timeout: seconds to wait for each next actum; when none comes in that time the
                generator ends. ``None`` or ``math.inf``: wait for ever. ``0``: read what is
                there and end at once when nothing new is. At most one day (86400); not a bool.
            poll_interval: seconds between reads on a store without the ``follow`` capability
                (more than 0, at most 3600).

        Returns:
            A generator of :class:`Actum`.

        Raises:
            ChronicumNotFound: (from this call) the chronicum does not exist or is not the owner's,
                the same message either way; (from the generator) it was erased while followed.
            ActumNotFound: (from the generator's first step) ``after`` is not an actum of the
                chronicum.
            InvalidQuery: an unknown kind, a ``poll_interval`` or ``timeout`` out of range (or
                not a number: NaN, a str, a bool), or an ``after`` that is not ``None`` or a
                non-empty str; ``.field`` names the argument.
            EmptyOwnerID: ``owner_id`` is empty or ``None`` (checked before anything else).
            InvalidOwnerID: ``owner_id`` is not a str, contains NUL or is not valid UTF-8.
            StoreError: the store failed; chained to the driver's exception. A new ``follow``
                with ``after`` set to the last actum yielded resumes without a gap.
        """
        plan = self._rules.follow(
            owner_id, chronicum_id, after, actum_kinds, actor_kinds, poll_interval, timeout
        )
        return self._following(run_plan(plan, self._perform_following))

    def _following(self, following: Following) -> Generator[Actum, None, None]:
        while True:
            acta = run_plan(follow_step(following, following.timeout), self._perform_following)
            if acta is None:
                return
            yield from acta

    def _perform_following(self, call: StoreCall) -> Any:
        """Perform a follower's call: a pause or a wait as it is, a read in one of the store's turns."""
        method, arguments = call
        if method == FOLLOW_PAUSE:
            time.sleep(arguments[0])
            return None
        if method == "wait_for_acta":
            return self.store.wait_for_acta(*arguments)  # type: ignore[attr-defined]
        with self._follow_reads.turn():
            return self._perform(call)

    def _perform(self, call: StoreCall) -> Any:
        """Call the store; a call that conflicted goes again (see :mod:`chronica_core.conflicts`)."""
        method, arguments = call
        operation = getattr(self.store, method)
        try:
            return operation(*arguments)
        except StoreConflict as conflict:
            return again_after_conflict(lambda: operation(*arguments), conflict)

    def _run(
        self,
        operation: str,
        plan: Plan[StoreCall, Result],
        count: Counter | None = None,
        last_n: int | None = None,
    ) -> Result:
        """Run ``plan`` on the store, inside the operation's span when the app traces (see telemetry).

        ``count`` tells how many acta its result holds, ``last_n`` what a window asked for.
        """
        telemetry = self._telemetry
        if telemetry is None or not telemetry.tracing():
            return run_plan(plan, self._perform)
        return telemetry.run(operation, lambda: run_plan(plan, self._perform), count, last_n)


class AsyncChronicarius(_Keeper[AsyncStore]):
    """The asyncio twin of :class:`Chronicarius` over an :class:`AsyncStore`.

    The same rules, errors and ids, because it runs the same plans; the arguments, returns and
    errors of each coroutine are those of the :class:`Chronicarius` method of the same name, and
    so are the constructor's arguments.
    """

    _asynchronous = True

    async def record_actum(
        self, owner_id: str, actum: Actum, *, idempotency_key: str | None = None, create: bool = True
    ) -> Actum:
        """See :meth:`Chronicarius.record_actum`."""
        plan = self._rules.record_actum(owner_id, actum, idempotency_key, create)
        return await self._run("record_actum", plan, _one)

    async def get_acta(
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
        """See :meth:`Chronicarius.get_acta`."""
        shape = (
            None  # the usual window
            if before is None and newest_first is False and view is _SUMMARIZED and tool_exchanges is _WHOLE
            else (before, newest_first, view, tool_exchanges)
        )
        plan = self._rules.get_acta(owner_id, chronicum_id, actum_kinds, actor_kinds, last_n, shape)
        return await self._run("get_acta", plan, len, last_n)

    async def get_actum(self, owner_id: str, chronicum_id: str, actum_id: str) -> Actum:
        """See :meth:`Chronicarius.get_actum`."""
        return await self._run("get_actum", self._rules.get_actum(owner_id, chronicum_id, actum_id), _one)

    async def fork_chronicum(
        self, owner_id: str, chronicum_id: str, *, at: str | None = None, fork_id: str | None = None
    ) -> Chronicum:
        """See :meth:`Chronicarius.fork_chronicum`."""
        plan = self._rules.fork_chronicum(owner_id, chronicum_id, at, fork_id)
        return await self._run("fork_chronicum", plan)

    async def get_chronicum(self, owner_id: str, chronicum_id: str) -> Chronicum:
        """See :meth:`Chronicarius.get_chronicum`."""
        return await self._run("get_chronicum", self._rules.get_chronicum(owner_id, chronicum_id))

    async def record_acta(
        self, owner_id: str, acta: Sequence[Actum], *, idempotency_key: str | None = None, create: bool = True
    ) -> list[Actum]:
        """See :meth:`Chronicarius.record_acta`."""
        plan = self._rules.record_acta(owner_id, acta, idempotency_key, create)
        return await self._run("record_acta", plan, len)

    async def list_chronica(
        self, owner_id: str, *, limit: int = DEFAULT_LIST_LIMIT, cursor: str | None = None
    ) -> ChronicaPage:
        """See :meth:`Chronicarius.list_chronica`."""
        return await self._run("list_chronica", self._rules.list_chronica(owner_id, limit, cursor))

    async def erase_chronicum(self, owner_id: str, chronicum_id: str) -> int:
        """See :meth:`Chronicarius.erase_chronicum`."""
        return await self._run(
            "erase_chronicum", self._rules.erase_chronicum(owner_id, chronicum_id), _erased_count
        )

    async def erase_owner(self, owner_id: str) -> int:
        """See :meth:`Chronicarius.erase_owner`."""
        return await self._run("erase_owner", self._rules.erase_owner(owner_id))

    async def erase_idle(
        self, *, before: datetime, owner_id: str | None = None, dry_run: bool = False
    ) -> int:
        """See :meth:`Chronicarius.erase_idle`."""
        return await self._run("erase_idle", self._rules.erase_idle(before, owner_id, dry_run))

    def follow(
        self,
        owner_id: str,
        chronicum_id: str,
        *,
        after: str | None = None,
        actum_kinds: Iterable[ActumKind | str] | None = None,
        actor_kinds: Iterable[ActorKind | str] | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> AsyncFollower:
        """Follow a chronicum: an async iterator of its acta as they are recorded, for ever.

        As :meth:`Chronicarius.follow` (the same arguments but ``timeout``: wrap a step in
        ``asyncio.timeout`` instead), except that the owner check and the starting position are
        taken by :meth:`AsyncFollower.start`, which the first ``__anext__`` awaits before it
        waits for anything: ``ChronicumNotFound`` for a missing or foreign chronicum is raised
        there. Breaking out of ``async for`` or cancelling the task leaves nothing behind (no
        task, no connection held).

        Returns:
            An :class:`AsyncFollower` (an ``AsyncIterator[Actum]``).
        """
        plan = self._rules.follow(owner_id, chronicum_id, after, actum_kinds, actor_kinds, poll_interval)
        return AsyncFollower(plan, self._perform_following, self._perform_following)

    async def _perform_following(self, call: StoreCall) -> Any:
        """See :meth:`Chronicarius._perform_following`; the turns are the running loop's."""
        method, arguments = call
        if method == FOLLOW_PAUSE:
            await asyncio.sleep(arguments[0])
            return None
        if method == "wait_for_acta":
            return await self.store.wait_for_acta(*arguments)  # type: ignore[attr-defined]
        async with self._follow_reads.loop_turn():
            return await self._perform(call)

    async def _perform(self, call: StoreCall) -> Any:
        """See :meth:`Chronicarius._perform`."""
        method, arguments = call
        operation = getattr(self.store, method)
        try:
            return await operation(*arguments)
        except StoreConflict as conflict:
            return await again_after_conflict_async(lambda: operation(*arguments), conflict)

    async def _run(
        self,
        operation: str,
        plan: Plan[StoreCall, Result],
        count: Counter | None = None,
        last_n: int | None = None,
    ) -> Result:
        """See :meth:`Chronicarius._run`."""
        telemetry = self._telemetry
        if telemetry is None or not telemetry.tracing():
            return await run_plan_async(plan, self._perform, cancellation_to_plan=True)
        return await telemetry.run_async(
            operation,
            lambda: run_plan_async(plan, self._perform, cancellation_to_plan=True),
            count,
            last_n,
        )


class AsyncFollower(AsyncIterator[Actum]):
    """What :meth:`AsyncChronicarius.follow` returns: the chronicum's acta as they are recorded.

    Iterate it with ``async for``; it never ends by itself (break, or cancel the task).
    """

    def __init__(
        self,
        plan: Plan[StoreCall, Following],
        perform: Callable[[StoreCall], Awaitable[Any]],
        perform_following: Callable[[StoreCall], Awaitable[Any]],
    ) -> None:
        self._plan: Plan[StoreCall, Following] | None = plan
        self._following: Following | None = None
        self._perform = perform
        self._perform_following = perform_following
        self._ready: list[Actum] = []

    async def start(self) -> None:
        """Check the owner and take the starting position now (the first ``__anext__`` does otherwise).

        Await it before writing when the follower starts from now (``after=None``) and must
        see those writes. Raises what :meth:`Chronicarius.follow` raises from the call itself.
        Awaiting it again does nothing.
        """
        if self._plan is not None:
            plan, self._plan = self._plan, None
            self._following = await run_plan_async(plan, self._perform)

    async def __anext__(self) -> Actum:
        """Return the next actum, waiting for it (see :meth:`Chronicarius.follow` for the errors)."""
        await self.start()
        following = self._following
        if following is None:  # start raised before: the follower never started
            raise StopAsyncIteration
        while not self._ready:
            acta = await run_plan_async(follow_step(following, None), self._perform_following)
            self._ready = list(acta or ())
            self._ready.reverse()
        return self._ready.pop()
