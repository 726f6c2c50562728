"""Store classes that only run plans: the five operations written once per flavour, for backends.

A backend that writes each store operation as a plan (see :mod:`chronica_core.plans`) gives its
plans object to :class:`PlannedStore` or :class:`AsyncPlannedStore` and implements one method,
``_run(plan)``: how to perform the plan's operations (borrow a connection, open a pool on first
use, await the driver). ``create``, ``get``, ``record``, ``record_idempotent``, ``acta``,
``record_many``, ``list_chronica``, ``erase``, ``erase_owner``, ``reopen`` and ``withdraw`` are then
those of the base class, the same for every backend and both flavours: a planned store has every
capability (see :mod:`chronica_core.capabilities`), so its plans must implement them all.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from chronica_core.closable import Closable
from chronica_core.model import ActaQuery, Actum, Chronicum
from chronica_core.plans import Plan
from chronica_core.redaction import redact_error
from chronica_core.store import (
    AsyncBatchStore,
    AsyncErasableStore,
    AsyncIdempotentStore,
    AsyncListingStore,
    BatchStore,
    ErasableStore,
    IdempotentStore,
    ListingPosition,
    ListingStore,
)

__all__ = ["AsyncPlannedStore", "PlannedStore", "StorePlans"]

Result = TypeVar("Result")


class StorePlans(Protocol):
    """A backend's store operations as plans; each keeps the contract of :class:`IdempotentStore`.

    Every method returns a plan (a generator yielding the backend's own operations, such as SQL
    statements or driver calls) whose result is the operation's result, and whose errors are the
    operation's errors: ``ChronicumExists``, ``ChronicumNotFound``, ``ActumTooLarge`` where the
    contract names them, else ``StoreError`` chained to the driver's exception.
    """

    def create(self, chronicum: Chronicum) -> Plan[Any, None]:
        """Plan saving ``chronicum`` as given. Raises ``ChronicumExists`` if its id is taken."""
        ...

    def get(self, chronicum_id: str) -> Plan[Any, Chronicum]:
        """Plan reading the chronicum. Raises ``ChronicumNotFound``."""
        ...

    def record(self, actum: Actum) -> Plan[Any, Actum]:
        """Plan appending ``actum``; returns it with ``at`` set (UTC). Raises ``ChronicumNotFound``."""
        ...

    def record_idempotent(self, actum: Actum, key: str) -> Plan[Any, Actum]:
        """Plan appending ``actum`` unless ``key`` was used in its chronicum, else returning that actum.

        Raises ``ChronicumNotFound``.
        """
        ...

    def acta(self, chronicum_id: str, query: ActaQuery) -> Plan[Any, list[Actum]]:
        """Plan reading the context window ``query`` describes, oldest first.

        Raises ``ChronicumNotFound`` (an existing chronicum with no acta gives ``[]``).
        """
        ...

    def record_many(self, acta: Sequence[Actum], key: str | None) -> Plan[Any, list[Actum]]:
        """Plan :meth:`chronica_core.BatchStore.record_many` (same contract)."""
        ...

    def list_chronica(
        self, owner_id: str, limit: int, after: ListingPosition | None
    ) -> Plan[Any, list[Chronicum]]:
        """Plan :meth:`chronica_core.ListingStore.list_chronica` (same contract)."""
        ...

    def erase(self, chronicum_id: str, owner_digest: str) -> Plan[Any, int]:
        """Plan :meth:`chronica_core.ErasableStore.erase` (same contract)."""
        ...

    def erase_owner(self, owner_id: str, owner_digest: str) -> Plan[Any, int]:
        """Plan :meth:`chronica_core.ErasableStore.erase_owner` (same contract)."""
        ...

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> Plan[Any, bool]:
        """Plan :meth:`chronica_core.ErasableStore.reopen` (same contract)."""
        ...

    def withdraw(self, chronicum_id: str, owner_digest: str) -> Plan[Any, bool]:
        """Plan ``withdraw`` (see :class:`chronica_core.ErasableStore`): the marker of an empty chronicum.

        Returns ``False``, changing nothing, when the chronicum holds an actum, is missing or is a marker.
        """
        ...

    def content_limit(self) -> Plan[Any, int | None]:
        """Plan returning the largest content ``record`` accepts, in bytes of UTF-8 (``None``: no limit).

        Read from the server where it has a setting for it, once, then remembered; ``record`` and
        ``record_idempotent`` raise ``ActumTooLarge`` above it before sending anything (see
        :mod:`chronica_core.limits`).
        """
        ...


class PlannedStore(IdempotentStore, BatchStore, ListingStore, ErasableStore, Closable):
    """A blocking store whose operations are those of its :class:`StorePlans`, run by ``_run``.

    A subclass sets ``self.plans`` in its constructor and implements :meth:`_run`; it keeps its own
    constructor, ``close`` (which calls :meth:`_mark_closed`) and anything else (``migrate``). Each
    operation keeps the contract of :class:`IdempotentStore` and raises what its plan raises, or
    what ``_run`` raises (``StoreError``, for a failure outside the plan such as a lost server);
    once the store is closed, ``StoreError("<backend_name>: store", "the store is closed")``.
    A subclass that connects with a URL sets ``self._secrets_of`` to it: whatever an operation
    raises then has that URL's password redacted, its chained driver exceptions included.
    """

    plans: StorePlans
    _secrets_of: str = ""
    """The URL (or libpq connection string) the store connects with: its secrets are redacted
    from whatever an operation raises (see :func:`chronica_core.redaction.redact_error`)."""

    def _run_if_open(self, plan: Plan[Any, Result]) -> Result:
        """Run ``plan`` unless the store is closed (``StoreError("<backend_name>: store", ...)``).

        The operations go through it; so should a subclass's own ``migrate`` plan.
        """
        if self._closed:  # the message is only made for a closed store
            self._refuse_if_closed(plan, f"{self.backend_name}: store")
        try:
            return self._run(plan)
        except BaseException as error:
            redact_error(error, self._secrets_of)
            raise

    @abstractmethod
    def _run(self, plan: Plan[Any, Result]) -> Result:
        """Perform ``plan``'s operations to the end and return its result; raise what it raises."""

    def create(self, chronicum: Chronicum) -> None:
        """See :meth:`chronica_core.Store.create`."""
        self._run_if_open(self.plans.create(chronicum))

    def get(self, chronicum_id: str) -> Chronicum:
        """See :meth:`chronica_core.Store.get`."""
        return self._run_if_open(self.plans.get(chronicum_id))

    def record(self, actum: Actum) -> Actum:
        """See :meth:`chronica_core.Store.record`."""
        return self._run_if_open(self.plans.record(actum))

    def record_idempotent(self, actum: Actum, key: str) -> Actum:
        """See :meth:`chronica_core.IdempotentStore.record_idempotent`."""
        return self._run_if_open(self.plans.record_idempotent(actum, key))

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """See :meth:`chronica_core.Store.acta`."""
        return self._run_if_open(self.plans.acta(chronicum_id, query))

    def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        """See :meth:`chronica_core.BatchStore.record_many`."""
        return self._run_if_open(self.plans.record_many(acta, key))

    def list_chronica(self, owner_id: str, limit: int, after: ListingPosition | None) -> list[Chronicum]:
        """See :meth:`chronica_core.ListingStore.list_chronica`."""
        return self._run_if_open(self.plans.list_chronica(owner_id, limit, after))

    def erase(self, chronicum_id: str, owner_digest: str) -> int:
        """See :meth:`chronica_core.ErasableStore.erase`."""
        return self._run_if_open(self.plans.erase(chronicum_id, owner_digest))

    def erase_owner(self, owner_id: str, owner_digest: str) -> int:
        """See :meth:`chronica_core.ErasableStore.erase_owner`."""
        return self._run_if_open(self.plans.erase_owner(owner_id, owner_digest))

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> bool:
        """See :meth:`chronica_core.ErasableStore.reopen`."""
        return self._run_if_open(self.plans.reopen(chronicum, owner_digest))

    def withdraw(self, chronicum_id: str, owner_digest: str) -> bool:
        """Leave the chronicum's marker if it holds no acta (see :class:`chronica_core.ErasableStore`)."""
        return self._run_if_open(self.plans.withdraw(chronicum_id, owner_digest))

    def max_content_bytes(self) -> int | None:
        """Return the largest content ``record`` accepts, in bytes of UTF-8 (``None``: no limit).

        Larger content raises ``ActumTooLarge`` (with ``.size`` and ``.limit``) before anything
        is sent; ``Chronicarius`` asks before it creates a chronicum for a first write. The first
        call may ask the server (``StoreError`` if that fails); later calls do no I/O.
        """
        return self._run_if_open(self.plans.content_limit())


class AsyncPlannedStore(
    AsyncIdempotentStore, AsyncBatchStore, AsyncListingStore, AsyncErasableStore, Closable
):
    """The asyncio twin of :class:`PlannedStore`: the same plans, run by ``await self._run(plan)``.

    One store serves every event loop of the process, one after another (``asyncio.run()`` per
    request) and at once (a loop per thread): a subclass keeps its driver's connections per loop
    (see :class:`chronica_core.loops.PerLoop`), never handing one loop's connection to another.
    Every operation first checks that the store is open: once closed (its ``close`` calls
    :meth:`_mark_closed`) it raises ``StoreError("<backend_name>: async store", "the store is
    closed")`` instead of reconnecting. As in :class:`PlannedStore`, a subclass sets
    ``self._secrets_of`` to the URL it connects with, whose secrets are then redacted from whatever
    an operation raises.
    """

    plans: StorePlans
    _secrets_of: str = ""
    """As for :class:`PlannedStore`."""

    @property
    def _where(self) -> str:
        """The ``where`` of the store's own errors: ``"<backend_name>: async store"``."""
        return f"{self.backend_name}: async store"

    @abstractmethod
    async def _run(self, plan: Plan[Any, Result]) -> Result:
        """Perform ``plan``'s operations to the end, awaiting each, and return its result."""

    def _check_open(self, plan: Plan[Any, Any] | None = None) -> None:
        """Raise ``StoreError("<backend_name>: async store", "the store is closed")`` once closed.

        The operations check it; so should a subclass's own ``migrate``.
        """
        self._refuse_if_closed(plan, self._where)

    async def _run_if_open(self, plan: Plan[Any, Result]) -> Result:
        """Run ``plan`` unless the store is closed (``StoreError``)."""
        if self._closed:  # the message is only made for a closed store
            self._check_open(plan)
        try:
            return await self._run(plan)
        except BaseException as error:
            redact_error(error, self._secrets_of)
            raise

    async def create(self, chronicum: Chronicum) -> None:
        """See :meth:`chronica_core.Store.create`."""
        await self._run_if_open(self.plans.create(chronicum))

    async def get(self, chronicum_id: str) -> Chronicum:
        """See :meth:`chronica_core.Store.get`."""
        return await self._run_if_open(self.plans.get(chronicum_id))

    async def record(self, actum: Actum) -> Actum:
        """See :meth:`chronica_core.Store.record`."""
        return await self._run_if_open(self.plans.record(actum))

    async def record_idempotent(self, actum: Actum, key: str) -> Actum:
        """See :meth:`chronica_core.IdempotentStore.record_idempotent`."""
        return await self._run_if_open(self.plans.record_idempotent(actum, key))

    async def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """See :meth:`chronica_core.Store.acta`."""
        return await self._run_if_open(self.plans.acta(chronicum_id, query))

    async def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        """See :meth:`chronica_core.BatchStore.record_many`."""
        return await self._run_if_open(self.plans.record_many(acta, key))

    async def list_chronica(
        self, owner_id: str, limit: int, after: ListingPosition | None
    ) -> list[Chronicum]:
        """See :meth:`chronica_core.ListingStore.list_chronica`."""
        return await self._run_if_open(self.plans.list_chronica(owner_id, limit, after))

    async def erase(self, chronicum_id: str, owner_digest: str) -> int:
        """See :meth:`chronica_core.ErasableStore.erase`."""
        return await self._run_if_open(self.plans.erase(chronicum_id, owner_digest))

    async def erase_owner(self, owner_id: str, owner_digest: str) -> int:
        """See :meth:`chronica_core.ErasableStore.erase_owner`."""
        return await self._run_if_open(self.plans.erase_owner(owner_id, owner_digest))

    async def reopen(self, chronicum: Chronicum, owner_digest: str) -> bool:
        """See :meth:`chronica_core.ErasableStore.reopen`."""
        return await self._run_if_open(self.plans.reopen(chronicum, owner_digest))

    async def withdraw(self, chronicum_id: str, owner_digest: str) -> bool:
        """See :meth:`PlannedStore.withdraw`."""
        return await self._run_if_open(self.plans.withdraw(chronicum_id, owner_digest))

    async def max_content_bytes(self) -> int | None:
        """See :meth:`PlannedStore.max_content_bytes`."""
        return await self._run_if_open(self.plans.content_limit())
