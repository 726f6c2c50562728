"""Every user of an ADK app, found in the store: what ``list_sessions(user_id=None)`` walks.

Each user is an owner, and Chronica lists one owner's chronica at a time; every owner's chronica
together are read through the store's ``retention`` capability
(:meth:`chronica_core.AsyncRetentionStore.idle_chronica`, every chronicum last active before a
moment, a page at a time). A chronicum whose id codes one of the app's users
(``adk:<n>:<app>:<n>:<user>...``, see :mod:`chronica_adk.ids`) names that user. The walk reads
every chronicum of the store once (its cost follows the store's size, not the app's), as an
administrator's listing may.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

from chronica_adk.ids import app_state_id
from chronica_core import AsyncStore, CapabilityUnsupported, ListingPosition
from chronica_core.capabilities import RETENTION, store_capabilities
from chronica_core.retention import last_activity
from chronica_core.store import AsyncRetentionStore

__all__ = ["app_users", "user_of"]

PAGE = 1000
"""How many chronica one read of the store returns."""


def user_of(app_name: str, chronicum_id: str) -> str | None:
    """Return the user id ``chronicum_id`` codes in ``app_name``, or ``None`` when it codes none.

    A user's state (``adk:<n>:<app>:<n>:<user>``) and their sessions' events and state (the
    same, followed by ``:<n>:<session id>`` and maybe ``:state``) all code the user.

    Raises:
        InvalidSessionKey: ``app_name`` is empty, not text, holds NUL, or is too long.
    """
    head = f"{app_state_id(app_name)}:"
    if not chronicum_id.startswith(head):
        return None
    length, colon, rest = chronicum_id[len(head) :].partition(":")
    if not colon or not length.isdigit() or str(int(length)) != length or len(rest) < int(length):
        return None
    user, tail = rest[: int(length)], rest[int(length) :]
    return user if not tail or tail.startswith(":") else None


async def app_users(store: AsyncStore, app_name: str) -> list[str]:
    """Return every user id with a session or ``user:`` state of ``app_name`` in ``store``, sorted.

    Args:
        store: an asyncio store with the ``retention`` capability.
        app_name: ADK's app name.

    Raises:
        CapabilityUnsupported: the store has no ``retention`` capability (it cannot list every
            owner's chronica).
        InvalidSessionKey: ``app_name`` is empty, not text, holds NUL, or is too long.
        StoreError: the store failed; chained to the driver's exception.
    """
    if RETENTION not in store_capabilities(store):
        raise CapabilityUnsupported(
            type(store).__name__,
            RETENTION,
            f"{type(store).__name__} cannot list every owner's chronica (the retention capability), "
            "so list_sessions needs a user_id on it",
        )
    walked = cast(AsyncRetentionStore, store)
    # every chronicum was last active before tomorrow, whatever the server's clock says today
    before = datetime.now(UTC) + timedelta(days=1)
    users: set[str] = set()
    after: ListingPosition | None = None
    while True:
        page = await walked.idle_chronica(before, None, after, PAGE)
        for chronicum in page:
            user = user_of(app_name, chronicum.id)
            if user is not None:
                users.add(user)
        if len(page) < PAGE:
            return sorted(users)
        after = (last_activity(page[-1]), page[-1].id)
