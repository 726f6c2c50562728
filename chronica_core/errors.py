"""The one error hierarchy of Chronica: everything raised on purpose is a :class:`ChronicaError`."""

from __future__ import annotations

__all__ = [
    "ActumNotFound",
    "ActumTooLarge",
    "BackendConflict",
    "BackendUnavailable",
    "CapabilityUnsupported",
    "ChronicaError",
    "ChronicumExists",
    "ChronicumNotFound",
    "EmptyOwnerID",
    "IdempotencyUnsupported",
    "InvalidActum",
    "InvalidChronicum",
    "InvalidOption",
    "InvalidOwnerID",
    "InvalidQuery",
    "StoreConflict",
    "StoreError",
    "UnknownBackend",
]


class ChronicaError(Exception):
    """Base of every error Chronica raises on purpose."""


class ChronicumNotFound(ChronicaError, LookupError):
    """The chronicum does not exist, or it is not the caller's (the two are told apart by no one).

    Attributes:
        chronicum_id: the id that was asked for.
    """

    def __init__(self, chronicum_id: str) -> None:
        self.chronicum_id = chronicum_id
        super().__init__(f"chronicum {chronicum_id!r} not found")


class ActumNotFound(ChronicaError, LookupError):
    """The chronicum's history holds no actum with that id.

    Raised for an actum asked for by its id (``get_actum``, a fork's ``at``, a page's ``before``,
    a follower's ``after``).
    A chronicum that does not exist or is not the caller's raises :class:`ChronicumNotFound`
    instead, before any actum is looked for.

    Attributes:
        chronicum_id: the chronicum searched.
        actum_id: the id that was asked for.
    """

    def __init__(self, chronicum_id: str, actum_id: str) -> None:
        self.chronicum_id = chronicum_id
        self.actum_id = actum_id
        super().__init__(f"actum {actum_id!r} not found in chronicum {chronicum_id!r}")


class ChronicumExists(ChronicaError):
    """``Store.create`` was given an id that is already taken.

    Attributes:
        chronicum_id: the taken id.
    """

    def __init__(self, chronicum_id: str) -> None:
        self.chronicum_id = chronicum_id
        super().__init__(f"chronicum {chronicum_id!r} already exists")


class InvalidActum(ChronicaError, ValueError):
    """An actum (or its key) was refused before touching the store, or a dict by ``Actum.from_dict``.

    Attributes:
        field: the name of the offending field, e.g. ``"content"`` or ``"idempotency_key"``.
        reason: what was wrong with it.
        index: for a batch, the position of the offending actum in it (0-based); ``None`` otherwise.
    """

    def __init__(self, field: str, reason: str, *, index: int | None = None) -> None:
        self.field = field
        self.reason = reason
        self.index = index
        where = "invalid actum" if index is None else f"invalid actum at index {index}"
        super().__init__(f"{where}: {field}: {reason}")


class InvalidChronicum(ChronicaError, ValueError):
    """``Chronicum.from_dict`` refused a dict.

    Attributes:
        field: the name of the offending field, e.g. ``"started_at"``.
        reason: what was wrong with it.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"invalid chronicum: {field}: {reason}")


class ActumTooLarge(InvalidActum):
    """A store cannot hold an actum this large; nothing was written.

    Attributes:
        size: the encoded size of the actum, in bytes.
        limit: the most the store can hold, in bytes.
    """

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__("content", f"the actum is {size} bytes, over the store's limit of {limit} bytes")


class InvalidQuery(ChronicaError, ValueError):
    """``get_acta`` was given a filter or limit it cannot use.

    Attributes:
        field: the offending argument, e.g. ``"actum_kinds"`` or ``"last_n"``.
        reason: what was wrong with it.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"invalid query: {field}: {reason}")


class InvalidOwnerID(ChronicaError, ValueError):
    """The owner id is not a usable string (it must be non-empty UTF-8 text without NUL)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"invalid owner_id: {reason}")


class EmptyOwnerID(InvalidOwnerID):
    """A call named no owner (an empty string or ``None``); raised before anything else."""

    def __init__(self) -> None:
        super().__init__("owner_id must be a non-empty string")


class CapabilityUnsupported(ChronicaError):
    """The store lacks an optional capability the call needs; nothing was read or written.

    Raised by ``Chronicarius`` before it calls the store. The capabilities are listed in
    :mod:`chronica_core.capabilities` (``chronica backends`` shows each backend's).

    Attributes:
        store_name: the store's class name.
        capability: the missing capability, e.g. ``"batch"``, ``"listing"``, ``"erasure"`` or
            ``"idempotency"``.
    """

    def __init__(self, store_name: str, capability: str, detail: str = "") -> None:
        self.store_name = store_name
        self.capability = capability
        super().__init__(
            detail or f"{store_name} does not offer the {capability} capability; use a store that does"
        )


class IdempotencyUnsupported(CapabilityUnsupported):
    """An idempotency key was given to a store that cannot honour it; nothing was created."""

    def __init__(self, store_name: str) -> None:
        super().__init__(
            store_name,
            "idempotency",
            f"{store_name} cannot honour idempotency keys; record without a key or use an idempotent store",
        )


class StoreError(ChronicaError):
    """Anything else a backend ran into (a lost connection, a full disk, ...).

    Always raised ``from`` the driver's exception.

    Attributes:
        where: the backend and operation, e.g. ``"postgres: record actum"``.
        detail: the driver's message.
    """

    def __init__(self, where: str, detail: str) -> None:
        self.where = where
        self.detail = detail
        super().__init__(f"{where}: {detail}")


class StoreConflict(StoreError):
    """The database refused the operation because it conflicted with a concurrent one.

    A serialization failure or a deadlock (PostgreSQL's SQLSTATE 40001 and 40P01, MariaDB's 1213
    and 1205, a Galera cluster's certification failure among them), after which the database
    rolled the failed try back: nothing of it was written. ``Chronicarius`` tries such an
    operation again a bounded number of times (see :mod:`chronica_core.conflicts`) and raises this
    only when every try conflicted; calling again later is safe.

    Always raised ``from`` the driver's exception; ``where`` and ``detail`` as in :class:`StoreError`.
    """


class InvalidOption(ChronicaError, ValueError):
    """``open_store`` was given an option the backend does not know, or a value of the wrong shape.

    Attributes:
        backend: the backend's name, e.g. ``"postgres"``.
        option: the option's name.
        reason: what was wrong with it (for an unknown option, the options the backend knows).
    """

    def __init__(self, backend: str, option: str, reason: str) -> None:
        self.backend = backend
        self.option = option
        self.reason = reason
        super().__init__(f"{backend}: option {option}: {reason}")


class UnknownBackend(ChronicaError, LookupError):
    """No installed backend handles the URL's scheme. The message lists the installed schemes."""


class BackendUnavailable(ChronicaError):
    """The backend for the URL is known but cannot run here; the message says what to install."""


class BackendConflict(ChronicaError):
    """Two installed backends claim the same URL scheme; the message names both."""
