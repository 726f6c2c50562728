"""Registers the in-memory backend through the ``chronica`` entry-point group, like any plugin."""

from __future__ import annotations

from chronica_core.capabilities import BATCH, ERASURE, FOLLOW, HISTORY, LISTING, NATIVE, RETENTION
from chronica_core.hookspecs import Backend, hookimpl
from chronica_core.memory import MemoryStore
from chronica_core.memory_async import AsyncMemoryStore

__all__ = ["chronica_backends"]


@hookimpl
def chronica_backends() -> list[Backend]:
    """Declare ``memory://``: one process, idempotent, no server."""
    return [
        Backend(
            name="memory",
            schemes=("memory",),
            idempotent=True,
            open=MemoryStore,
            open_async=AsyncMemoryStore,
            install="chronica",
            needs_server=False,
            example_url="memory://",
            capabilities=(BATCH, LISTING, ERASURE, FOLLOW, NATIVE, HISTORY, RETENTION),
            follows="in-process wake-ups",
        )
    ]
