"""``ChronicaSessionService``: ADK's ``BaseSessionService`` kept in Chronica chronica.

See :mod:`chronica_adk.ids` for where a session lives and :mod:`chronica_adk.mapping` for what
an event and a state snapshot become, and what ADK reads of other writers' acta.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session, State
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from pydantic_core import PydanticSerializationError, to_jsonable_python
from typing_extensions import override

from chronica_adk.ids import STATE_SUFFIX, SessionKey, app_state_id, session_id_of
from chronica_adk.listing import app_users
from chronica_adk.mapping import (
    APP_SCOPE,
    SESSION_SCOPE,
    USER_AUTHOR,
    USER_SCOPE,
    Snapshot,
    event_actum,
    event_json,
    event_of_actum,
    own_event,
    snapshot_actum,
    snapshot_of_actum,
)
from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    ActumNotFound,
    AsyncChronicarius,
    AsyncStore,
    ChronicumExists,
    ChronicumNotFound,
    StoreError,
    open_async_store,
)
from chronica_core.capabilities import HISTORY, NATIVE, store_capabilities
from chronica_core.readable import ForeignActa

__all__ = ["STALE_SESSION_MESSAGE", "ChronicaSessionService"]

logger = logging.getLogger(__name__)

STALE_SESSION_MESSAGE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
"""The message of the ``StaleSessionError`` raised for a stale session (ADK's own wording)."""

FIRST_WINDOW = 32
"""How many events a read bounded by ``after_timestamp`` alone asks for first; each further
read asks for four times as many, until it reaches an event older than the bound."""

SHARED_STATE_ATTEMPTS = 64
"""How often an update of ``user:`` or ``app:`` state retries when other writers keep winning."""

LISTING_READS = 8
"""How many state snapshots ``list_sessions`` reads at once."""

CALL_WINDOW = 64
"""How many of the session's newest tool requests ``append_event`` looks through for the call a
function response answers; a call further back is not linked."""

NO_SNAPSHOT = "none"
"""The revision a first snapshot is written after, in its idempotency key ``after:none``."""


def _json_ready(state: dict[str, Any]) -> dict[str, Any]:
    """Return ``state`` as JSON values, as ADK's database service writes state.

    Values pydantic writes faithfully are kept so (datetimes as ISO text, sets as lists, models
    as objects); when one cannot be written at all (a callable), every such value becomes its
    ``repr`` and a warning is logged, instead of the write failing.
    """
    try:
        ready: dict[str, Any] = to_jsonable_python(state)
    except PydanticSerializationError:
        logger.warning(
            "Some state values cannot be written as JSON (e.g. callables); they are written as "
            "their repr instead.",
            exc_info=True,
        )
        ready = to_jsonable_python(state, serialize_unknown=True)
    return ready


def _split_state(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Split ADK state into its app, user and session parts (prefixes removed), ``temp:`` dropped.

    Values are made JSON-ready as ADK's own database service does (:func:`_json_ready`).
    """
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    session: dict[str, Any] = {}
    kept = {key: value for key, value in state.items() if not key.startswith(State.TEMP_PREFIX)}
    for key, value in _json_ready(kept).items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        else:
            session[key] = value
    return app, user, session


def _merged(app: dict[str, Any], user: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    """The state a session shows: its own keys, then ``app:`` and ``user:`` ones with their prefix."""
    merged = dict(session)
    merged.update({State.APP_PREFIX + key: value for key, value in app.items()})
    merged.update({State.USER_PREFIX + key: value for key, value in user.items()})
    return merged


@dataclass(frozen=True, slots=True)
class _Place:
    """Where one session's events and state live, and the snapshot it was found at.

    A session of this release: owner the user, state in a chronicum of its own. One an earlier
    release wrote: owner ``adk:<app>:<user>``, state snapshots among the events.
    """

    owner: str
    events: str
    state: str
    snapshot: Snapshot

    @property
    def legacy(self) -> bool:
        return self.events == self.state


def _start_after(decoded: Sequence[tuple[Actum, Event]], after: float) -> tuple[int, bool]:
    """Where the events after the newest one older than ``after`` start, and whether one was found.

    ADK's rule for ``after_timestamp``: events with ``timestamp >= after``, read from the newest
    back to the first one older than it.
    """
    for index in range(len(decoded) - 1, -1, -1):
        if decoded[index][1].timestamp < after:
            return index + 1, True
    return 0, False


def _from(decoded: Sequence[tuple[Actum, Event]], start: int) -> list[Event]:
    """The events from ``start`` on, after the earlier calls their function responses answer.

    A window's cut (``num_recent_events``, ``after_timestamp``) never leaves a response without
    its call: the call stands at its own place, before the rest.
    """
    kept = decoded[start:]
    answered = {actum.answers for actum, _ in kept if actum.answers}
    calls = [event for actum, event in decoded[:start] if actum.id in answered]
    return calls + [event for _, event in kept]


class ChronicaSessionService(BaseSessionService):
    """ADK's session service over a Chronica store: each session one chronicum, each event one actum.

    Pass it to ``Runner(agent=..., app_name=..., session_service=...)`` in place of
    ``InMemorySessionService`` or ``DatabaseSessionService``; nothing else in the agent changes.

    - An ADK session ``(app_name, user_id, session_id)`` is a chronicum of the owner ``user_id``
      (:class:`chronica_adk.ids.SessionKey`); other agents and the person read and write the same
      conversation through Chronica under that owner, and ADK reads what they write as the
      user's context (:mod:`chronica_adk.mapping`).
    - Every event is one actum (readable content, the event's JSON as its native form). The
      session's state lives in snapshots in a chronicum of its own, so ``get_session`` reads the
      state with a one-actum context window and ``num_recent_events`` with a ``last_n`` window:
      neither reads the whole history.
    - ``user:`` state lives in one chronicum per (app, user), ``app:`` state in one per app;
      ``temp:`` state is never written.
    - Sessions an earlier release wrote (owner ``adk:<app>:<user>``, state among the events)
      are read and appended to where they are.

    Args:
        store: a store URL (``"memory://"``, ``"sqlite:///sessions.db"``, ``"postgresql://..."``:
            the service opens an asyncio store and closes it in :meth:`close`), an open
            :class:`chronica_core.AsyncStore`, or an :class:`chronica_core.AsyncChronicarius`
            (both left open: they are the caller's). The store needs the ``idempotency``,
            ``batch``, ``listing`` and ``erasure`` capabilities (every bundled backend has them).
        store_options: options for ``open_async_store`` when ``store`` is a URL.
        foreign: which of other writers' thoughts and tool exchanges ADK reads (default: none;
            their messages always).

    Raises:
        TypeError: ``store`` is a blocking store or ``Chronicarius`` (use the asyncio ones).
        UnknownBackend, BackendUnavailable, InvalidOption: from ``open_async_store`` for a URL.
    """

    def __init__(
        self,
        store: str | AsyncStore | AsyncChronicarius,
        *,
        store_options: dict[str, Any] | None = None,
        foreign: ForeignActa | None = None,
    ) -> None:
        self.foreign = ForeignActa() if foreign is None else foreign
        self._owned_store: AsyncStore | None = None
        if isinstance(store, str):
            self._owned_store = open_async_store(store, **(store_options or {}))
            self.chronicarius = AsyncChronicarius(self._owned_store)
        elif isinstance(store, AsyncChronicarius):
            self.chronicarius = store
        else:
            self.chronicarius = AsyncChronicarius(store)
        capabilities = store_capabilities(self.chronicarius.store)
        self._native = NATIVE in capabilities
        self._linking = HISTORY in capabilities

    # -- ADK's session-service interface ------------------------------------------------------

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session with ``state``, and apply its ``app:`` and ``user:`` keys to those states.

        Args:
            app_name: ADK's app name.
            user_id: ADK's user id.
            state: the initial state; ``app:`` and ``user:`` keys update the app's and the user's
                state, ``temp:`` keys are dropped, the rest is the session's own.
            session_id: the session id; ``None`` (or empty) makes a fresh UUID.

        Returns:
            The new session: no events, the merged state, ``last_update_time`` the store's UTC
            time of the creation in seconds since the epoch.

        Raises:
            AlreadyExistsError: a session with ``session_id`` exists for this app and user
                (also when several callers create it at once: exactly one succeeds).
            InvalidSessionKey: a name Chronica cannot hold (empty, NUL, too long); nothing written.
            StoreError: the store failed; chained to the driver's exception.
        """
        key = SessionKey(app_name, user_id, session_id or str(uuid.uuid4()))
        app, user, own = _split_state(state or {})
        exists = AlreadyExistsError(f"Session with id {key.session_id} already exists.")
        if await self._newest_snapshot(key.legacy_owner, key.chronicum_id, SESSION_SCOPE) is not None:
            raise exists  # an earlier release's session
        write = secrets.token_hex(16)
        try:
            stored = await self.chronicarius.record_actum(
                key.owner,
                snapshot_actum(key.state_id, SESSION_SCOPE, own, write),
                idempotency_key=f"after:{NO_SNAPSHOT}",
            )
        except ChronicumNotFound:  # the id is held by someone writing through Chronica directly
            raise exists from None
        snapshot = snapshot_of_actum(stored, SESSION_SCOPE)
        if snapshot is None or snapshot.write != write:
            raise exists
        user_state = await self._update_user_state(key, user)
        app_state = await self._update_shared(key.app_state_id, key.app_state_id, APP_SCOPE, app)
        return self._session(key, snapshot, app_state, user_state, [])

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """Return the session with its events and merged state, or ``None`` when there is none.

        Reads four context windows: the session's newest state snapshot, the user's and the
        app's (one actum each; one more each for a session or user state no earlier release
        wrote), and the events (all of them when ``config`` bounds nothing).
        ``config.num_recent_events`` is the ``last_n`` of the events' window (``0``: no events
        are read); ``config.after_timestamp`` keeps the events from the newest one older than
        it onwards (ADK's rule), read in growing windows from the newest back until one older
        is reached, so its cost grows with the events it returns, not with the history. Either
        bound keeps the call a function response answers (one more event, at its own place).

        Args:
            app_name: ADK's app name.
            user_id: ADK's user id.
            session_id: the session id.
            config: ADK's ``GetSessionConfig`` or ``None`` (every event).

        Returns:
            The session, events oldest first; ``None`` for a session never created, deleted, or
            held by another owner.

        Raises:
            InvalidSessionKey: a name Chronica cannot hold (empty, NUL, too long).
            StoreError: the store failed; chained to the driver's exception.
        """
        key = SessionKey(app_name, user_id, session_id)
        place = await self._place(key)
        if place is None:
            return None
        recent = config.num_recent_events if config is not None else None
        after = config.after_timestamp if config is not None else None
        events, user_state, app_state = await asyncio.gather(
            self._events(place, recent, after),
            self._user_state(key),
            self._shared_state(key.app_state_id, key.app_state_id, APP_SCOPE),
        )
        return self._session(key, place.snapshot, app_state, user_state, events)

    @override
    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        """Return the user's sessions of ``app_name`` (every user's without ``user_id``), without events.

        Walks the owner's chronica (and those of the owner earlier releases used) by Chronica's
        keyset listing and reads each session's newest state snapshot (one actum); no event is read.
        Without ``user_id``, finds the app's users first by reading every chronicum of the store
        once (:func:`chronica_adk.listing.app_users`), then lists each one's sessions.

        Args:
            app_name: ADK's app name.
            user_id: ADK's user id, or ``None`` for every user of the app.

        Returns:
            ``ListSessionsResponse(sessions=[...])``, each session with its merged state and no
            events, sorted by ``last_update_time``, then user id, then session id.

        Raises:
            CapabilityUnsupported: ``user_id`` is ``None`` on a store without the ``retention``
                capability (one that cannot list every owner's chronica).
            InvalidSessionKey: a name Chronica cannot hold (empty, NUL, too long).
            StoreError: the store failed; chained to the driver's exception.
        """
        if user_id is None:
            every: list[Session] = []
            for user in await app_users(self.chronicarius.store, app_name):
                every += (await self.list_sessions(app_name=app_name, user_id=user)).sessions
            every.sort(key=lambda session: (session.last_update_time, session.user_id, session.id))
            return ListSessionsResponse(sessions=every)
        first = SessionKey(app_name, user_id, "-")
        found: list[tuple[SessionKey, str, str]] = []  # key, owner, snapshot chronicum
        for owner, suffix in ((first.owner, STATE_SUFFIX), (first.legacy_owner, "")):
            cursor: str | None = None
            while True:
                page = await self.chronicarius.list_chronica(owner, limit=1000, cursor=cursor)
                for chronicum in page.chronica:
                    session_id = session_id_of(first.user_state_id, chronicum.id, suffix)
                    if session_id is not None:
                        found.append((SessionKey(app_name, user_id, session_id), owner, chronicum.id))
                cursor = page.next_cursor
                if cursor is None:
                    break
        keys = [key for key, _, _ in found]
        gate = asyncio.Semaphore(LISTING_READS)

        async def snapshot_of(owner: str, chronicum_id: str) -> Snapshot | None:
            async with gate:
                return await self._newest_snapshot(owner, chronicum_id, SESSION_SCOPE)

        snapshots = await asyncio.gather(*(snapshot_of(owner, state) for _, owner, state in found))
        user_state = await self._user_state(first)
        app_state = await self._shared_state(app_state_id(app_name), app_state_id(app_name), APP_SCOPE)
        sessions = [
            self._session(key, snapshot, app_state, user_state, [])
            for key, snapshot in zip(keys, snapshots, strict=True)
            if snapshot is not None
        ]
        sessions.sort(key=lambda session: (session.last_update_time, session.user_id, session.id))
        return ListSessionsResponse(sessions=sessions)

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Erase the session: its events and state snapshots leave the store (Chronica's erasure).

        The user's and the app's state stay, as in ADK. Creating the same session id again
        later starts an empty session. Deleting a session that does not exist does nothing.

        A cancellation midway still erases the rest before it goes on.

        Raises:
            InvalidSessionKey: a name Chronica cannot hold (empty, NUL, too long).
            StoreError: the store failed; chained to the driver's exception. The session may be
                partly erased (its state first); deleting it again erases the rest.
        """
        key = SessionKey(app_name, user_id, session_id)
        chronica = [
            (key.owner, key.state_id),  # first: the session is gone once its state is
            (key.owner, key.chronicum_id),
            (key.legacy_owner, key.chronicum_id),
        ]
        try:
            await self._erase(chronica)
        except asyncio.CancelledError:  # a session without its state must not keep its events
            await self._erase(chronica)
            raise

    async def _erase(self, chronica: list[tuple[str, str]]) -> None:
        """Erase each ``(owner, chronicum id)`` that exists."""
        for owner, chronicum_id in chronica:
            with contextlib.suppress(ChronicumNotFound):
                await self.chronicarius.erase_chronicum(owner, chronicum_id)

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """Return the user's ``user:`` state of ``app_name``, keys without the prefix (``{}`` if none).

        Raises:
            InvalidSessionKey: a name Chronica cannot hold (empty, NUL, too long).
            StoreError: the store failed; chained to the driver's exception.
        """
        return await self._user_state(SessionKey(app_name, user_id, "-"))

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        """Record ``event`` in the session, apply its state delta, and append it to ``session``.

        A partial (streaming) event is returned untouched. ``temp:`` keys reach ``session.state``
        but are never written. The event and the session's new state snapshot land as one atomic
        batch whose idempotency key names the snapshot the session was read at, so of two
        writers holding the same revision exactly one lands; ``user:`` and ``app:`` keys then
        update the user's and the app's state (each a read and a compare-and-set write, retried
        when another writer came first). An event equal to one ``session.events`` already holds
        (same id) is not written twice. The session's new state snapshot is that
        compare-and-set: written first, into the session's state chronicum, with the idempotency
        key ``after:<the snapshot read>``, then the event, keyed by that snapshot (a session an
        earlier release wrote gets both as one atomic batch of its events' chronicum, as before);
        a cancellation once the snapshot landed still writes the event, then goes on.
        A function response names the call it answers (``answers``), found by one more read:
        the call of the same author among the session's :data:`CALL_WINDOW` newest tool
        requests; a response to an older call is written without it.

        Returns:
            ``event`` (its state delta without ``temp:`` keys).

        Raises:
            StaleSessionError: the session was changed in storage since ``session`` was read
                (another writer appended an event), as ADK's database service detects it: by the
                revision marker when the session came from this service, else by
                ``last_update_time`` and the newest event's id.
            SessionNotFoundError: the session does not exist (never created, or deleted).
            InvalidActum: the event cannot be an actum: an empty author or one over 255
                characters (``field="actor"``), or an event pydantic cannot write as JSON, such as
                text with a lone surrogate (``field="content"``); nothing is written.
            InvalidSessionKey: a name Chronica cannot hold (empty, NUL, too long).
            StoreError: the store failed; chained to the driver's exception. The event's batch
                is all or nothing; a failure after it leaves the ``user:`` or ``app:`` update
                undone (see the README).
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        if any(known.id == event.id and known == event for known in session.events):
            return event
        key = SessionKey(session.app_name, session.user_id, session.id)
        place = await self._place(key)
        if place is None:
            raise SessionNotFoundError(f"Session {session.id} not found.")
        current = place.snapshot
        self._check_fresh(session, current)
        written = event_json(event)
        app, user, own = _split_state(event.actions.state_delta if event.actions is not None else {})
        state = {**current.state, **own}
        actum = event_actum(place.events, event, key.user_id, written, native=self._native)
        if self._linking and actum.kind is ActumKind.TOOL_RESPONSE:
            call = await self._call_answered(place, event)
            if call is not None:
                actum = replace(actum, answers=call)
        write = secrets.token_hex(16)
        next_snapshot = snapshot_actum(place.state, SESSION_SCOPE, state, write, event.id, event.timestamp)
        try:
            if place.legacy:
                stored = await self.chronicarius.record_acta(
                    place.owner, [actum, next_snapshot], idempotency_key=f"after:{current.id}"
                )
                landed = snapshot_of_actum(stored[-1], SESSION_SCOPE)
            else:
                stored_snapshot = await self.chronicarius.record_actum(
                    place.owner, next_snapshot, idempotency_key=f"after:{current.id}", create=False
                )
                landed = snapshot_of_actum(stored_snapshot, SESSION_SCOPE)
                if landed is not None and landed.write == write:
                    await self._record_event(place.owner, actum, f"event:{landed.id}")
        except ChronicumNotFound:  # deleted between the read and the write
            raise SessionNotFoundError(f"Session {session.id} not found.") from None
        if landed is None or landed.write != write:
            raise StaleSessionError(STALE_SESSION_MESSAGE)  # another writer's event took the revision
        snapshot = landed
        if user:
            await self._update_user_state(key, user)
        if app:
            await self._update_shared(key.app_state_id, key.app_state_id, APP_SCOPE, app)
        session.last_update_time = snapshot.updated
        session._storage_update_marker = snapshot.id
        return self._commit_event_to_session(session, event)

    async def fork_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        new_session_id: str | None = None,
        at_event_id: str | None = None,
    ) -> Session:
        """Fork the session: a new session of the same user whose history is this one's up to an event.

        Both of the session's chronica are forked with Chronica's forks (nothing is copied): the
        events up to and including the event ``at_event_id`` (the newest when ``None``), and the
        state as it was after that event (the state of the newest event this service wrote at or
        before it; the creation's state when there is none). The source goes on unchanged; both
        take new events independently. A fork made with ``chronicarius.fork_chronicum`` of the
        events' chronicum alone is not a session: its state is missing (``get_session`` gives
        ``None``). Deleting the source session deletes its forks too (Chronica's erasure).

        Finding an earlier event reads the session's events back from the newest in growing
        windows, and its state snapshot the same way, so the cost grows with the events after
        the fork point, not with the history before it.

        Args:
            app_name: ADK's app name.
            user_id: ADK's user id (the fork's too).
            session_id: the session to fork.
            new_session_id: the fork's session id; ``None`` (or empty) makes a fresh UUID.
            at_event_id: the id of an event of the session (as ``get_session`` gives them), or
                ``None`` for its newest.

        Returns:
            The new session, as ``get_session`` reads it.

        Raises:
            SessionNotFoundError: the session does not exist (never created, or deleted), or it
                was written by an earlier release (its state among its events), which cannot be
                forked; nothing is written.
            AlreadyExistsError: a session, or any chronicum, holds ``new_session_id`` already,
                or held it (an erased one, as a fork cancelled midway leaves); nothing is written.
            ActumNotFound: the session holds no event ``at_event_id``; nothing is written.
            InvalidSessionKey: a name Chronica cannot hold (empty, NUL, too long).
            CapabilityUnsupported: the store has no ``history`` capability; nothing is written.
            StoreError: the store failed; chained to the driver's exception. What the call had
                forked is erased again, as on a cancellation, so no history is left under the id.
        """
        key = SessionKey(app_name, user_id, session_id)
        fork = SessionKey(app_name, user_id, new_session_id or str(uuid.uuid4()))
        place = await self._place(key)
        if place is None or place.legacy:
            raise SessionNotFoundError(f"Session {session_id} not found.")
        exists = AlreadyExistsError(f"Session with id {fork.session_id} already exists.")
        if await self._place(fork) is not None:
            raise exists
        point, snapshot = await self._fork_point(place, at_event_id)
        events_fork = [] if point is None else [(key.owner, fork.chronicum_id)]
        if point is not None:
            try:
                await self.chronicarius.fork_chronicum(
                    key.owner, key.chronicum_id, at=point, fork_id=fork.chronicum_id
                )
            except ChronicumExists:
                raise exists from None
            except BaseException:  # also a cancellation: a fork that landed is taken back
                await self._erase(events_fork)
                raise
        try:
            await self.chronicarius.fork_chronicum(
                key.owner, key.state_id, at=snapshot, fork_id=fork.state_id
            )
        except ChronicumExists:  # another's state chronicum: only the events' fork is this call's
            await self._erase(events_fork)
            raise exists from None
        except BaseException:
            await self._erase([*events_fork, (key.owner, fork.state_id)])
            raise
        forked = await self.get_session(app_name=app_name, user_id=user_id, session_id=fork.session_id)
        if forked is None:  # the source was deleted meanwhile, and its forks with it
            raise SessionNotFoundError(f"Session {session_id} not found.")
        return forked

    # -- lifetime ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the store the service opened from a URL (a store or keeper given is left open)."""
        if self._owned_store is not None:
            await self._owned_store.close()

    async def __aenter__(self) -> ChronicaSessionService:
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- helpers ----------------------------------------------------------------------------

    @staticmethod
    def _session(
        key: SessionKey,
        snapshot: Snapshot,
        app_state: dict[str, Any],
        user_state: dict[str, Any],
        events: list[Event],
    ) -> Session:
        session = Session(
            id=key.session_id,
            app_name=key.app_name,
            user_id=key.user_id,
            state=_merged(app_state, user_state, snapshot.state),
            events=events,
            last_update_time=snapshot.updated,
        )
        session._storage_update_marker = snapshot.id
        return session

    @staticmethod
    def _check_fresh(session: Session, current: Snapshot) -> None:
        """Raise ``StaleSessionError`` when storage moved on since ``session`` was read."""
        if session._storage_update_marker is not None:
            if session._storage_update_marker != current.id:
                raise StaleSessionError(STALE_SESSION_MESSAGE)
            return
        # A session object this service did not return (built by hand, or by another service):
        # stale only when storage is newer and its newest event is not the session's newest.
        if current.updated > session.last_update_time:
            newest = session.events[-1].id if session.events else None
            if current.event_id != newest:
                raise StaleSessionError(STALE_SESSION_MESSAGE)

    async def _snapshots(self, owner: str, chronicum_id: str, last_n: int) -> list[Actum]:
        return await self.chronicarius.get_acta(
            owner, chronicum_id, actor_kinds=[ActorKind.SYSTEM], last_n=last_n
        )

    async def _place(self, key: SessionKey) -> _Place | None:
        """Where the session lives and its newest snapshot; ``None`` for a missing session.

        One read for a session of this release; one more for one an earlier release wrote, or
        a missing one.
        """
        snapshot = await self._newest_snapshot(key.owner, key.state_id, SESSION_SCOPE)
        if snapshot is not None:
            return _Place(key.owner, key.chronicum_id, key.state_id, snapshot)
        snapshot = await self._newest_snapshot(key.legacy_owner, key.chronicum_id, SESSION_SCOPE)
        if snapshot is not None:
            return _Place(key.legacy_owner, key.chronicum_id, key.chronicum_id, snapshot)
        return None

    async def _user_state_owner(self, key: SessionKey) -> tuple[str, Snapshot | None]:
        """The owner of the user's state (the user, or an earlier release's owner), its snapshot."""
        snapshot = await self._newest_snapshot(key.owner, key.user_state_id, USER_SCOPE)
        if snapshot is not None:
            return key.owner, snapshot
        legacy = await self._newest_snapshot(key.legacy_owner, key.user_state_id, USER_SCOPE)
        return (key.owner, None) if legacy is None else (key.legacy_owner, legacy)

    async def _user_state(self, key: SessionKey) -> dict[str, Any]:
        _, snapshot = await self._user_state_owner(key)
        return {} if snapshot is None else snapshot.state

    async def _update_user_state(self, key: SessionKey, delta: dict[str, Any]) -> dict[str, Any]:
        """Apply ``delta`` to the user's state where it lives (see :meth:`_update_shared`)."""
        owner, snapshot = await self._user_state_owner(key)
        if not delta:
            return {} if snapshot is None else snapshot.state
        return await self._update_shared(owner, key.user_state_id, USER_SCOPE, delta)

    async def _newest_snapshot(self, owner: str, chronicum_id: str, scope: str) -> Snapshot | None:
        """Return the newest snapshot of ``scope`` in the chronicum; ``None`` if it has none or is missing.

        One actum is read; only when another writer's system actum came after the snapshot does
        it read a larger window (doubling), up to the whole chronicum.
        """
        size = 1
        while True:
            try:
                acta = await self._snapshots(owner, chronicum_id, size)
            except ChronicumNotFound:
                return None
            for actum in reversed(acta):
                snapshot = snapshot_of_actum(actum, scope)
                if snapshot is not None:
                    return snapshot
            if len(acta) < size:
                return None
            size *= 2

    async def _shared_state(self, owner: str, chronicum_id: str, scope: str) -> dict[str, Any]:
        snapshot = await self._newest_snapshot(owner, chronicum_id, scope)
        return {} if snapshot is None else snapshot.state

    async def _update_shared(
        self, owner: str, chronicum_id: str, scope: str, delta: dict[str, Any]
    ) -> dict[str, Any]:
        """Apply ``delta`` to a user's or app's state by compare-and-set; return the state after it.

        The snapshot is written with the idempotency key ``after:<the snapshot read>``: of
        writers that read the same snapshot exactly one lands, and the others read again.
        """
        for _ in range(SHARED_STATE_ATTEMPTS):
            current = await self._newest_snapshot(owner, chronicum_id, scope)
            state = {} if current is None else current.state
            if not delta:
                return state
            state = {**state, **delta}
            write = secrets.token_hex(16)
            stored = await self.chronicarius.record_actum(
                owner,
                snapshot_actum(chronicum_id, scope, state, write),
                idempotency_key=f"after:{NO_SNAPSHOT if current is None else current.id}",
            )
            landed = snapshot_of_actum(stored, scope)
            if landed is not None and landed.write == write:
                return state
        raise StoreError(
            f"chronica-adk: update {scope} state",
            f"other writers won {SHARED_STATE_ATTEMPTS} compare-and-set rounds in a row; retry",
        )

    async def _record_event(self, owner: str, actum: Actum, idempotency_key: str) -> None:
        """Write the event of a snapshot that landed; a cancellation meanwhile still writes it.

        The snapshot already names the event, so a cancelled write is written once more (its
        idempotency key lands it once) before the cancellation goes on to the caller.
        """
        try:
            await self.chronicarius.record_actum(owner, actum, idempotency_key=idempotency_key)
        except asyncio.CancelledError:
            await self.chronicarius.record_actum(owner, actum, idempotency_key=idempotency_key)
            raise

    async def _call_answered(self, place: _Place, event: Event) -> str | None:
        """The actum id of the function call ``event`` (a function response) answers, if found.

        Reads the session's newest :data:`CALL_WINDOW` tool requests as written (a summary
        covering the call hides nothing from this read) and returns the newest one that is an
        event of the same author (any agent's for the person's response to a long-running tool)
        calling a function whose id the first of ``event``'s function responses names; ``None``
        when the response names no id or no such call is that recent.
        """
        named = [response.id for response in event.get_function_responses() if response.id]
        if not named:
            return None
        try:
            requests = await self.chronicarius.get_acta(
                place.owner,
                place.events,
                actum_kinds=[ActumKind.TOOL_REQUEST],
                actor_kinds=[ActorKind.AGENT],
                last_n=CALL_WINDOW,
                view="as_written",
                tool_exchanges="as_written",
            )
        except ChronicumNotFound:
            return None
        for actum in reversed(requests):
            if event.author != USER_AUTHOR and actum.actor != event.author:
                continue
            call = own_event(actum)  # another writer's tool request is None
            if call is not None and any(made.id == named[0] for made in call.get_function_calls()):
                return actum.id
        return None

    async def _back(self, owner: str, chronicum_id: str, found: Callable[[list[Actum]], bool]) -> list[Actum]:
        """Read the chronicum's newest acta as written, in growing windows, until ``found`` says so.

        Returns the last window read (oldest first; the whole chronicum when ``found`` never
        said so, ``[]`` for a missing one).
        """
        size = FIRST_WINDOW
        while True:
            try:
                acta = await self.chronicarius.get_acta(
                    owner, chronicum_id, last_n=size, view="as_written", tool_exchanges="as_written"
                )
            except ChronicumNotFound:
                return []
            if found(acta) or len(acta) < size:
                return acta
            size *= 4

    async def _fork_point(self, place: _Place, at_event_id: str | None) -> tuple[str | None, str]:
        """The actum id to fork the session's events at (``None``: it has none) and its snapshot's.

        ``at_event_id`` ``None``: the newest actum and the current snapshot. Else the actum of
        that event and the snapshot of the newest event this service wrote at or before it.
        """
        if at_event_id is None:
            try:
                newest = await self.chronicarius.get_acta(
                    place.owner, place.events, last_n=1, view="as_written", tool_exchanges="as_written"
                )
            except ChronicumNotFound:  # no event yet
                newest = []
            return (newest[-1].id if newest else None), place.snapshot.id

        def located(acta: list[Actum]) -> tuple[int | None, str]:
            """Where ``at_event_id`` is in ``acta``, and the newest own event up to it (``""``: none)."""
            for point in range(len(acta) - 1, -1, -1):
                own = own_event(acta[point])
                if (own.id if own is not None else acta[point].id) == at_event_id:
                    break
            else:
                return None, ""
            for actum in reversed(acta[: point + 1]):
                own = own_event(actum)
                if own is not None:
                    return point, own.id
            return point, ""

        window = await self._back(place.owner, place.events, lambda acta: located(acta)[1] != "")
        point, written = located(window)
        if point is None:
            raise ActumNotFound(place.events, at_event_id)
        snapshots = await self._back(
            place.owner, place.state, lambda acta: any(_snapshot_event(actum) == written for actum in acta)
        )
        chosen = [actum.id for actum in snapshots if _snapshot_event(actum) == written]
        if not chosen:  # the event's snapshot is gone: never written, or an earlier release's
            raise ActumNotFound(place.state, at_event_id)
        return window[point].id, chosen[-1]

    async def _events(self, place: _Place, recent: int | None, after: float | None) -> list[Event]:
        """Read the session's events for ``num_recent_events`` / ``after_timestamp`` (see get_session)."""
        if recent == 0:
            return []
        size = recent or (FIRST_WINDOW if after is not None else 0)
        while True:
            try:
                acta = await self.chronicarius.get_acta(place.owner, place.events, last_n=size)
            except ChronicumNotFound:
                return []  # no event yet, or deleted after its snapshot was read
            decoded = _until_snapshot(acta, place.snapshot, self.foreign)
            exhausted = size == 0 or len(acta) < size
            start, bounded = _start_after(decoded, after) if after is not None else (0, False)
            enough = recent is not None and len(decoded) - start >= recent
            if exhausted or bounded or enough:
                return _from(decoded, max(start, len(decoded) - recent) if recent else start)
            size *= 4


def _snapshot_event(actum: Actum) -> str | None:
    """The event id of a session snapshot (``""`` for the creation's), ``None`` for no snapshot."""
    snapshot = snapshot_of_actum(actum, SESSION_SCOPE)
    if snapshot is None:
        return None
    return snapshot.event_id or ""


def _until_snapshot(
    acta: Sequence[Actum], snapshot: Snapshot, foreign: ForeignActa
) -> list[tuple[Actum, Event]]:
    """The events of ``acta`` with their acta, without the ADK events appended after ``snapshot``.

    The state read belongs to the snapshot, so events of batches that came after it (a writer
    racing this read) are left out; messages other agents wrote through Chronica are kept.
    """
    decoded = [(actum, event) for actum in acta if (event := event_of_actum(actum, foreign)) is not None]
    if snapshot.event_id is not None:
        for index in range(len(decoded) - 1, -1, -1):
            if decoded[index][1].id == snapshot.event_id:
                later = [(actum, event) for actum, event in decoded[index + 1 :] if event.id == actum.id]
                return decoded[: index + 1] + later
    return decoded
