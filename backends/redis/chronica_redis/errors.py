"""The one error of this backend's own: a write that too few replicas confirmed in time."""

from __future__ import annotations

from chronica_core.errors import StoreError

__all__ = ["WriteUnconfirmed"]


class WriteUnconfirmed(StoreError):
    """Fewer replicas than ``wait_replicas`` confirmed a write within ``wait_timeout``.

    The primary ran the write, so it may be stored; but it is lost if the primary fails before a
    replica copies it, so it may also not be. A retry with the same idempotency key settles it:
    it stores the actum once (returning the one already there, if it is) and waits for the
    replicas again. A write without a key cannot be told from a new one: retrying it may store it
    twice.

    Attributes:
        replicas: how many replicas confirmed the write (``WAIT``'s answer).
        required: how many the store waits for (``wait_replicas``).
        timeout: how long it waited, in seconds (``wait_timeout``).
    """

    def __init__(self, where: str, replicas: int, required: int, timeout: float) -> None:
        self.replicas = replicas
        self.required = required
        self.timeout = timeout
        super().__init__(
            where,
            f"{replicas} of the {required} replicas required confirmed the write within {timeout:g} s; "
            "the write may or may not be stored (the primary has it, and loses it if it fails before a "
            "replica copies it): retry it with its idempotency key, which stores it once and waits again",
        )
