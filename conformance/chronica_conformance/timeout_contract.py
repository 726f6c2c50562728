"""What a store with an operation timeout must do when its server stops answering.

A backend's own test opens its store with its timeout option (``operation_timeout``) through a
:class:`~chronica_conformance.freezable_proxy.FreezableProxy` and hands both to
:func:`check_frozen_server` (blocking) or :func:`check_frozen_server_async`. While the proxy is
frozen, every operation must raise ``StoreError`` (``"<backend>: <operation>: ..."``) saying it
timed out, well within ``bound``
seconds (no tight timing is asserted), chained to the driver's error; after thawing, the store
must work again, every write must be whole and at most once, and a keyed write retried with its
key must land exactly once, whichever attempt landed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from chronica_conformance.freezable_proxy import FreezableProxy
from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    AsyncIdempotentStore,
    Chronicum,
    IdempotentStore,
    StoreError,
    new_actum_id,
)

__all__ = ["check_frozen_server", "check_frozen_server_async"]

_OPERATIONS = ("record", "record_idempotent", "acta", "get", "record")
"""The frozen calls: an unkeyed write, a keyed one, two reads, a write again."""


def _message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=new_actum_id())


def _check_timed_out(
    error: BaseException | None, backend: str, operation: str, started: float, bound: float
) -> None:
    took = time.monotonic() - started
    assert isinstance(error, StoreError), f"{operation}: expected StoreError, got {error!r}"
    assert took < bound, f"{operation} took {took:.1f} s, more than {bound} s"
    assert str(error).startswith(f"{backend}: "), error
    assert "timed out" in str(error), error
    assert error.__cause__ is not None, "not chained to the driver's error"


def _check_recovered(contents: list[str], keyed: str) -> None:
    assert contents[0] == "before", contents
    assert contents[-1] == "after", contents
    assert contents.count("frozen") <= 2, contents  # two unkeyed writes whose fate is unknown
    assert contents.count("keyed") + contents.count("keyed again") == 1, contents
    assert keyed in contents, contents
    assert set(contents) <= {"before", "frozen", "keyed", "keyed again", "after"}, contents


def check_frozen_server(store: IdempotentStore, proxy: FreezableProxy, backend: str, bound: float) -> None:
    """Check ``store`` (talking to its server through ``proxy``) against a server that stops answering.

    Args:
        store: a blocking store opened through ``proxy`` with its operation timeout set, migrated.
        proxy: the proxy, thawed.
        backend: the prefix of the store's errors (``"postgres"``).
        bound: seconds no timed-out call may reach (ten times the timeout, say).

    Raises:
        AssertionError: what the store did wrong.
    """
    chronicum_id = f"frozen-{uuid.uuid4().hex}"
    store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
    store.record(_message(chronicum_id, "before"))
    proxy.freeze()
    calls: list[Callable[[], object]] = [
        lambda: store.record(_message(chronicum_id, "frozen")),
        lambda: store.record_idempotent(_message(chronicum_id, "keyed"), "key"),
        lambda: store.acta(chronicum_id, ActaQuery()),
        lambda: store.get(chronicum_id),
        lambda: store.record(_message(chronicum_id, "frozen")),
    ]
    try:
        for operation, call in zip(_OPERATIONS, calls, strict=True):
            started = time.monotonic()
            raised: BaseException | None = None
            try:
                call()
            except Exception as error:  # noqa: BLE001 - judged just below
                raised = error
            _check_timed_out(raised, backend, operation, started, bound)
    finally:
        proxy.thaw()
    keyed = store.record_idempotent(_message(chronicum_id, "keyed again"), "key").content
    store.record(_message(chronicum_id, "after"))
    _check_recovered([actum.content for actum in store.acta(chronicum_id, ActaQuery())], keyed)


async def check_frozen_server_async(
    store: AsyncIdempotentStore, proxy: FreezableProxy, backend: str, bound: float
) -> None:
    """:func:`check_frozen_server` for an asyncio store (run in the store's event loop)."""
    chronicum_id = f"frozen-{uuid.uuid4().hex}"
    await store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
    await store.record(_message(chronicum_id, "before"))
    proxy.freeze()
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.record(_message(chronicum_id, "frozen")),
        lambda: store.record_idempotent(_message(chronicum_id, "keyed"), "key"),
        lambda: store.acta(chronicum_id, ActaQuery()),
        lambda: store.get(chronicum_id),
        lambda: store.record(_message(chronicum_id, "frozen")),
    ]
    try:
        for operation, call in zip(_OPERATIONS, calls, strict=True):
            started = time.monotonic()
            raised: BaseException | None = None
            try:
                await call()
            except Exception as error:  # noqa: BLE001 - judged just below
                raised = error
            _check_timed_out(raised, backend, operation, started, bound)
    finally:
        proxy.thaw()
    keyed = (await store.record_idempotent(_message(chronicum_id, "keyed again"), "key")).content
    await store.record(_message(chronicum_id, "after"))
    _check_recovered([actum.content for actum in await store.acta(chronicum_id, ActaQuery())], keyed)
