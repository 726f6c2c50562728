"""An encrypted face for any store: :func:`encrypted_store` (see :mod:`chronica_core.encryption`).

Each store operation is written once, as a plan (see :mod:`chronica_core.plans`): seal what
goes in, call the wrapped store, open what comes out. The blocking and the asyncio face run the
same plans; each has exactly the operations (and so the capabilities) of the store it wraps.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Final, cast

from chronica_core.capabilities import store_capabilities
from chronica_core.encryption import KeyProvider, Sealer, sealed_size
from chronica_core.history import Layout, Located, Segment, WindowReads, WindowRows
from chronica_core.limits import check_actum_size
from chronica_core.model import ActaQuery, Actum, Chronicum, Native, build_actum
from chronica_core.plans import Plan, run_plan, run_plan_async
from chronica_core.store import AsyncStore, Store

__all__ = ["EncryptionPlans", "encrypted_store"]

Call = tuple[str, tuple[Any, ...]]

_OWNERS_REMEMBERED: Final = 10_000

_PASSED: Final = {
    # capability -> (operations whose arguments and results hold no content)
    "idempotency": (),
    "batch": (),
    "listing": ("list_chronica",),
    "erasure": ("erase", "reopen"),
    "follow": ("wait_for_acta",),
    "history": ("layout", "fork"),
    "retention": ("idle_chronica", "erase_idle"),
}
_SEALING: Final = {
    "idempotency": ("record_idempotent",),
    "batch": ("record_many",),
    "listing": (),
    "erasure": ("erase_owner",),
    "follow": ("acta_after",),
    "history": ("window", "locate", "record_summary"),
    "retention": (),
}
_BASE: Final = ("create", "get", "record", "acta")


class EncryptionPlans:
    """The plans of an encrypted store: seal content and native data on the way in, open them on the way out.

    Each plan yields ``(method, arguments)`` calls of the wrapped store. The owner whose keys
    seal an actum is its chronicum's (asked of the store once, then remembered: ownership
    never changes).

    Args:
        sealer: seals and opens texts with the owners' keys.
        limited: whether the wrapped store tells its content limit (``max_content_bytes``).
    """

    def __init__(self, sealer: Sealer, limited: bool) -> None:
        self.sealer = sealer
        self._limited = limited
        self._limit: tuple[int | None] | None = None  # asked of the wrapped store once
        self._owners: dict[str, str] = {}
        self._lock = threading.Lock()

    def content_limit(self) -> Plan[Call, int | None]:
        """Plan the most bytes of content and native data together an actum may hold here.

        The wrapped store's limit less what sealing adds (``None``: no limit), asked once.
        """
        if self._limit is None:
            inner: int | None = (yield ("max_content_bytes", ())) if self._limited else None
            self._limit = (None if inner is None else _plain_limit(inner),)
        return self._limit[0]

    def _remember(self, chronicum_id: str, owner_id: str) -> None:
        with self._lock:
            self._owners[chronicum_id] = owner_id
            while len(self._owners) > _OWNERS_REMEMBERED:
                del self._owners[next(iter(self._owners))]

    def _owner(self, chronicum_id: str) -> Plan[Call, str]:
        owner = self._owners.get(chronicum_id)
        if owner is None:
            chronicum: Chronicum = yield ("get", (chronicum_id,))
            owner = chronicum.owner_id
            self._remember(chronicum_id, owner)
        return owner

    def _seal(self, owner: str, actum: Actum) -> Actum:
        check_actum_size(actum, None if self._limit is None else self._limit[0])
        return _with_texts(actum, self.sealer.seal, owner)

    def _open(self, owner: str, actum: Actum) -> Actum:
        return _with_texts(actum, self.sealer.open, owner)

    def _stored(self, owner: str, stored: Actum, sealed: Actum, plain: Actum) -> Actum:
        """``stored`` opened, where the store answers ``sealed`` (which seals ``plain``) as stored.

        A text the store answers unchanged, under the same actum id, is ``plain``'s again rather
        than opened; any other (an earlier write's, answered for its key) is opened.
        """
        if stored.id != sealed.id:
            return self._open(owner, stored)
        known = {sealed.content: plain.content}
        if sealed.native is not None and plain.native is not None:
            known[sealed.native.data] = plain.native.data

        def reopen(owner_id: str, text: str, aad: str) -> str:
            found = known.get(text)
            return self.sealer.open(owner_id, text, aad) if found is None else found

        return _with_texts(stored, reopen, owner)

    def create(self, chronicum: Chronicum) -> Plan[Call, None]:
        """Plan ``create``; the owner is remembered."""
        yield ("create", (chronicum,))
        self._remember(chronicum.id, chronicum.owner_id)

    def get(self, chronicum_id: str) -> Plan[Call, Chronicum]:
        """Plan ``get``; the owner is remembered."""
        chronicum: Chronicum = yield ("get", (chronicum_id,))
        self._remember(chronicum.id, chronicum.owner_id)
        return chronicum

    def record(self, actum: Actum) -> Plan[Call, Actum]:
        """Plan ``record`` of the sealed actum; returns it opened."""
        yield from self.content_limit()
        owner = yield from self._owner(actum.chronicum_id)
        sealed = self._seal(owner, actum)
        stored: Actum = yield ("record", (sealed,))
        return self._stored(owner, stored, sealed, actum)

    def record_idempotent(self, actum: Actum, key: str) -> Plan[Call, Actum]:
        """Plan ``record_idempotent`` of the sealed actum; returns what it stored, opened."""
        yield from self.content_limit()
        owner = yield from self._owner(actum.chronicum_id)
        sealed = self._seal(owner, actum)
        stored: Actum = yield ("record_idempotent", (sealed, key))
        return self._stored(owner, stored, sealed, actum)

    def record_many(self, acta: Sequence[Actum], key: str | None) -> Plan[Call, list[Actum]]:
        """Plan ``record_many`` of the sealed acta; returns what it stored, opened."""
        yield from self.content_limit()
        owner = yield from self._owner(acta[0].chronicum_id)
        sealed = [self._seal(owner, actum) for actum in acta]
        stored: list[Actum] = yield ("record_many", (sealed, key))
        if len(stored) != len(sealed):  # an earlier batch's, answered for its key
            return [self._open(owner, actum) for actum in stored]
        return [self._stored(owner, *written) for written in zip(stored, sealed, acta, strict=True)]

    def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Plan[Call, Actum]:
        """Plan ``record_summary`` of the sealed summary; returns it opened."""
        yield from self.content_limit()
        owner = yield from self._owner(actum.chronicum_id)
        sealed = self._seal(owner, actum)
        stored: Actum = yield ("record_summary", (sealed, first, last, version, key))
        return self._stored(owner, stored, sealed, actum)

    def acta(self, chronicum_id: str, query: ActaQuery) -> Plan[Call, list[Actum]]:
        """Plan ``acta``; returns the window opened."""
        acta: list[Actum] = yield ("acta", (chronicum_id, query))
        if not acta:
            return acta
        owner = yield from self._owner(chronicum_id)
        return [self._open(owner, actum) for actum in acta]

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> Plan[Call, list[Actum] | None]:
        """Plan ``acta_after``; returns the acta opened."""
        acta: list[Actum] | None = yield ("acta_after", (chronicum_id, after, limit))
        if not acta:
            return acta
        owner = yield from self._owner(chronicum_id)
        return [self._open(owner, actum) for actum in acta]

    def window(self, chronicum_id: str, reads: WindowReads) -> Plan[Call, WindowRows]:
        """Plan ``window``; returns its acta and answered requests opened."""
        rows: WindowRows = yield ("window", (chronicum_id, reads))
        owner = yield from self._owner(chronicum_id)
        return WindowRows(
            [self._open(owner, actum) for actum in rows.acta],
            rows.positions,
            [Located(found.position, self._open(owner, found.actum)) for found in rows.answered],
            rows.version,
        )

    def locate(
        self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]
    ) -> Plan[Call, dict[str, Located]]:
        """Plan ``locate``; returns the acta found opened (a lineage is one owner's)."""
        found: dict[str, Located] = yield ("locate", (lineage, actum_ids))
        if not found:
            return found
        owner = yield from self._owner(lineage[-1].chronicum_id)
        return {actum_id: Located(at.position, self._open(owner, at.actum)) for actum_id, at in found.items()}

    def erase_owner(self, owner_id: str, owner_digest: str) -> Plan[Call, int]:
        """Plan ``erase_owner``, then destroy the owner's keys where the provider can (crypto-shredding)."""
        erased: int = yield ("erase_owner", (owner_id, owner_digest))
        self.sealer.keys.destroy(owner_id)
        self.sealer.forget(owner_id)
        return erased

    def passed(self, method: str, *arguments: Any) -> Plan[Call, Any]:
        """Plan an operation that holds no content: the wrapped store's, as it is."""
        result = yield (method, arguments)
        if isinstance(result, Layout):
            self._remember(result.chronicum.id, result.chronicum.owner_id)
        return result


def _with_texts(actum: Actum, change: Callable[[str, str, str], str], owner: str) -> Actum:
    """``actum`` with its content and native data passed through ``change(owner, text, aad)``."""
    native = actum.native
    if native is not None:
        native = Native(native.format, change(owner, native.data, f"{actum.id}\x00native"))
    return build_actum(
        actum.chronicum_id,
        actum.kind,
        actum.actor_kind,
        actum.actor,
        change(owner, actum.content, f"{actum.id}\x00content"),
        actum.id,
        actum.at,
        native,
        actum.answers,
        actum.summarizes,
    )


def _plain_limit(inner: int) -> int:
    """The most bytes of content and native data together whose sealed forms fit ``inner``."""
    overhead = 2 * sealed_size(0)
    return max(0, (inner - overhead) * 3 // 4 - 4)


def _operations(capabilities: frozenset[str]) -> tuple[list[str], list[str]]:
    sealing = [*_BASE]
    passed: list[str] = []
    for capability in sorted(capabilities & set(_PASSED)):
        sealing.extend(_SEALING[capability])
        passed.extend(_PASSED[capability])
    return sealing, passed


class _Face:
    """What both faces share: the wrapped store and the plans."""

    backend_name = "encrypted"

    def __init__(self, inner: Any, plans: EncryptionPlans) -> None:
        self.inner = inner
        self.plans = plans

    def _plan(self, method: str, arguments: tuple[Any, ...], seals: bool) -> Plan[Call, Any]:
        if seals:
            return cast("Plan[Call, Any]", getattr(self.plans, method)(*arguments))
        return self.plans.passed(method, *arguments)


def _keeps_native(self: _Face) -> bool:
    """Return ``True``: the wrapped store keeps native forms (sealed, here)."""
    return True


class _BlockingFace(_Face, Store):
    def _perform(self, call: Call) -> Any:
        return getattr(self.inner, call[0])(*call[1])

    def max_content_bytes(self) -> int | None:
        """The most bytes of content and native data an actum may hold (see ``EncryptionPlans``)."""
        return run_plan(self.plans.content_limit(), self._perform)

    def close(self) -> None:
        """Close the wrapped store."""
        self.inner.close()


class _AsyncFace(_Face, AsyncStore):
    async def _perform(self, call: Call) -> Any:
        return await getattr(self.inner, call[0])(*call[1])

    async def max_content_bytes(self) -> int | None:
        """The most bytes of content and native data an actum may hold (see ``EncryptionPlans``)."""
        return await run_plan_async(self.plans.content_limit(), self._perform)

    async def close(self) -> None:
        """Close the wrapped store."""
        await self.inner.close()


def _blocking_method(name: str, seals: bool) -> Callable[..., Any]:
    def method(self: _BlockingFace, *arguments: Any) -> Any:
        return run_plan(self._plan(name, arguments, seals), self._perform)

    method.__name__ = name
    return method


def _async_method(name: str, seals: bool) -> Callable[..., Any]:
    async def method(self: _AsyncFace, *arguments: Any) -> Any:
        return await run_plan_async(self._plan(name, arguments, seals), self._perform)

    method.__name__ = name
    return method


_CLASSES: dict[tuple[bool, frozenset[str], bool], type[_Face]] = {}


def _face_class(asynchronous: bool, capabilities: frozenset[str], withdraws: bool) -> type[_Face]:
    """The face class with the operations of exactly ``capabilities`` (made once per combination).

    With ``withdraws`` (the wrapped store has the erasure capability and ``withdraw``) it has
    ``withdraw`` too.
    """
    key = (asynchronous, capabilities, withdraws)
    made = _CLASSES.get(key)
    if made is None:
        sealing, passed = _operations(capabilities)
        if withdraws:
            passed.append("withdraw")
        build = _async_method if asynchronous else _blocking_method
        namespace: dict[str, Any] = {name: build(name, True) for name in sealing}
        namespace.update({name: build(name, False) for name in passed})
        if "native" in capabilities:
            namespace["keeps_native"] = _keeps_native
        base = _AsyncFace if asynchronous else _BlockingFace
        made = _CLASSES[key] = type(
            "AsyncEncryptedStore" if asynchronous else "EncryptedStore", (base,), namespace
        )
    return made


def encrypted_store(store: Store | AsyncStore, keys: KeyProvider) -> Any:
    """Wrap ``store`` (blocking or asyncio) so that content and native data are sealed at rest.

    The wrapper has the wrapped store's capabilities, no more; give it to a ``Chronicarius`` (or
    an ``AsyncChronicarius``) as any store. Its content limit is the wrapped store's less what
    sealing adds. Closing it closes the wrapped store.

    Args:
        store: the store to wrap (``open_store(url)`` or ``open_async_store(url)``).
        keys: where the owners' keys come from (see :mod:`chronica_core.encryption`).

    Returns:
        The encrypted store: an ``EncryptedStore`` (a ``Store``) or an ``AsyncEncryptedStore``.

    Raises:
        InvalidOption: ``keys`` is not a :class:`chronica_core.encryption.KeyProvider`.
    """
    asynchronous = inspect.iscoroutinefunction(getattr(store, "record", None))
    name = getattr(store, "backend_name", type(store).__name__)
    plans = EncryptionPlans(
        Sealer(keys, f"encrypted {name}"), callable(getattr(store, "max_content_bytes", None))
    )
    capabilities = store_capabilities(store)
    withdraws = "erasure" in capabilities and callable(getattr(store, "withdraw", None))
    return _face_class(asynchronous, capabilities, withdraws)(store, plans)
