"""One driver resource per event loop, for asyncio stores that serve every loop of the process.

An asyncio driver's connection, pool or client belongs to the event loop it was opened in: its
sockets are registered with that loop's selector and its background tasks run there. An asyncio
store that must serve any loop (three ``asyncio.run()`` calls in a row, or two threads each
running its own loop) keeps one such resource per loop in a :class:`PerLoop`:

- **Opening.** :meth:`PerLoop.get` returns the running loop's resource, opening it on the first
  call in that loop. However many tasks of one loop arrive together, one opens it and the others
  wait for it; loops in other threads open their own at the same time.
- **The loop closes.** Opening the resource also starts a small async generator in that loop
  and leaves it suspended. ``asyncio.run()``, ``asyncio.Runner.close()`` and
  ``loop.shutdown_asyncgens()`` close every async generator the loop tracks (``aclose()``),
  after cancelling the loop's tasks and while awaits still work: the generator's ``finally``
  then closes the loop's resource, in that loop. Errors closing it are dropped: nobody is there to
  raise them to.
- **A loop closed without** ``shutdown_asyncgens()`` (``loop.close()`` alone) cannot await
  anything any more: its resource is dropped (the backend's ``drop`` closes what it can without
  awaiting: chronica-postgres ends its sessions, others leave their sockets to be closed when
  Python frees them) the next time the store opens a resource for a new loop, or at
  :meth:`PerLoop.close`. The driver may then report what it left behind (psycopg's pool tasks
  "destroyed but pending", aiosqlite's ``ResourceWarning``): close such a loop the way
  ``asyncio.run()`` does, ``loop.run_until_complete(loop.shutdown_asyncgens())`` before
  ``loop.close()`` (after cancelling its tasks), or use ``asyncio.run()`` / ``asyncio.Runner``.
- :meth:`PerLoop.close` (the store's ``close()``) closes the running loop's resource there; that of
  a loop running in another thread is closed in that loop (``asyncio.run_coroutine_threadsafe``),
  awaited for at most :attr:`PerLoop.close_timeout` seconds (past it, that loop closes it itself
  when it closes); that of a loop that is open but idle (between two ``run_until_complete``
  calls, as ``Runner.run_sync`` of the OpenAI Agents SDK leaves its loop) is closed in that loop,
  run for the purpose in a worker thread for at most :attr:`PerLoop.close_timeout` seconds; that
  of a closed loop is dropped.

In a child process made by ``os.fork()`` the parent's loops never run: their resources are
forgotten there, unclosed and kept alive (see :mod:`chronica_core.after_fork`), and the child's
loops open their own.

Loops are held weakly (a ``weakref.WeakKeyDictionary``): a loop whose resource is closed is not
kept alive by the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from chronica_core.after_fork import keep_inherited, renew_after_fork
from chronica_core.errors import StoreError

__all__ = ["DEFAULT_CLOSE_TIMEOUT", "PerLoop"]

Resource = TypeVar("Resource")

DEFAULT_CLOSE_TIMEOUT = 10.0
"""Seconds :meth:`PerLoop.close` waits for a loop running in another thread to close its resource."""


@dataclass(eq=False)
class _Entry(Generic[Resource]):
    """One loop's resource (``None`` until opened, and once closed) and its closing hook."""

    opening: asyncio.Lock = field(default_factory=asyncio.Lock)
    resource: Resource | None = None
    hook: AsyncGenerator[None, None] | None = None
    watcher: asyncio.Task[None] | None = None


class PerLoop(Generic[Resource]):
    """A driver resource (a pool, an engine, a client) per event loop; see the module's text.

    Thread-safe: loops in several threads may use one ``PerLoop`` at once.

    Args:
        where: the ``where`` of the ``StoreError`` raised once closed, e.g.
            ``"postgres: async store"``.
        open_resource: opens a resource in the running loop (awaited inside it); what it raises is
            raised by :meth:`get`, and the next :meth:`get` in that loop tries again.
        close_resource: closes a resource, awaited in the loop that opened it.
        drop_resource: releases a resource without awaiting (its loop is closed or not running):
            close its sockets, forget its tasks. Must not raise.
        close_timeout: seconds :meth:`close` waits for another thread's running loop to close its
            resource.
        close_with_tasks: close a loop's resource when the loop cancels its tasks (a task of
            the store's waits for that), before the async generators are closed: for a driver whose
            own background tasks would not end when cancelled (they would hang ``asyncio.run()``)
            but end when the resource is closed. ``asyncio.run()`` cancels the tasks; a loop closed
            without cancelling them reports that task as destroyed while pending.
    """

    def __init__(
        self,
        where: str,
        open_resource: Callable[[], Awaitable[Resource]],
        close_resource: Callable[[Resource], Awaitable[None]],
        drop_resource: Callable[[Resource], None],
        *,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
        close_with_tasks: bool = False,
    ) -> None:
        self._where = where
        self._open_resource = open_resource
        self._close_resource = close_resource
        self._drop_resource = drop_resource
        self.close_timeout = close_timeout
        self._close_with_tasks = close_with_tasks
        self._entries: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Entry[Resource]] = (
            weakref.WeakKeyDictionary()
        )
        self._guard = threading.Lock()
        self._closed = False
        renew_after_fork(self, PerLoop._forget_parent_loops)

    def _forget_parent_loops(self) -> None:
        """In a child process forked since: forget the parent's loops and their resources.

        The child never runs those loops, and their resources' sockets are the parent's: neither
        closed nor dropped (that would end the parent's sessions), only forgotten. A loop of the
        child's opens a resource of its own.
        """
        keep_inherited(dict(self._entries))  # a finalizer could close them through the parent's loop
        self._guard = threading.Lock()
        self._entries = weakref.WeakKeyDictionary()

    def __len__(self) -> int:
        """How many loops hold an open resource now (a count, for tests and diagnostics)."""
        with self._guard:
            return sum(1 for entry in self._entries.values() if entry.resource is not None)

    async def get(self) -> Resource:
        """Return the running loop's resource, opening it on the loop's first call.

        Returns:
            The resource opened in the running loop.

        Raises:
            StoreError: ``"<where>: the store is closed"`` after :meth:`close` (also when
                ``close`` ran while it opened: the fresh resource is closed again).
            Exception: what ``open_resource`` raises.
        """
        loop = asyncio.get_running_loop()
        entry = self._entries.get(loop)
        if entry is not None and entry.resource is not None:
            return entry.resource
        stale: list[Resource] = []
        with self._guard:
            if self._closed:
                raise StoreError(self._where, "the store is closed")
            entry = self._entries.get(loop)
            if entry is None:
                stale = self._take_closed_loops()
                entry = self._entries[loop] = _Entry()
        for resource in stale:
            self._drop_resource(resource)
        async with entry.opening:
            if entry.resource is None:
                await self._open_into(loop, entry)
        assert entry.resource is not None
        return entry.resource

    async def _open_into(self, loop: asyncio.AbstractEventLoop, entry: _Entry[Resource]) -> None:
        """Open the loop's resource into ``entry`` and start its closing hook (the caller holds the lock)."""
        resource = await self._open_resource()
        with self._guard:
            closed_meanwhile = self._closed or self._entries.get(loop) is not entry
            if not closed_meanwhile:
                entry.resource = resource
        if closed_meanwhile:
            with contextlib.suppress(Exception):
                await self._close_resource(resource)
            raise StoreError(self._where, "the store is closed")
        if self._close_with_tasks:
            entry.watcher = loop.create_task(self._closing_task(entry), name=f"{self._where}: closing")
        else:
            entry.hook = self._closing_hook(entry)
            await entry.hook.asend(None)  # now the loop tracks it, and closes it when it closes

    async def _closing_hook(self, entry: _Entry[Resource]) -> AsyncGenerator[None, None]:
        """Suspended until the loop closes its async generators; then close the loop's resource."""
        try:
            yield
        finally:
            await self._close_entry(entry)

    async def _closing_task(self, entry: _Entry[Resource]) -> None:
        """Wait until cancelled (the loop shuts down, or :meth:`close`); then close the loop's resource."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await self._close_entry(entry)
            raise

    async def _close_entry(self, entry: _Entry[Resource]) -> None:
        """Close ``entry``'s resource, if it still has one, in the running loop (its own)."""
        with self._guard:
            resource, entry.resource = entry.resource, None
            self._forget(entry)
        if resource is not None:
            with contextlib.suppress(Exception):  # the loop is closing: nobody to raise it to
                await self._close_resource(resource)

    def _drop_entry(self, entry: _Entry[Resource]) -> None:
        """Drop ``entry``'s resource, if it still has one, without awaiting (its loop is not running)."""
        with self._guard:
            resource, entry.resource = entry.resource, None
            self._forget(entry)
        if resource is not None:
            self._drop_resource(resource)
        _stop_quietly(entry.watcher)

    def _forget(self, entry: _Entry[Resource]) -> None:
        """Remove ``entry`` from the loops held (the caller holds the guard)."""
        for loop, held in list(self._entries.items()):
            if held is entry:
                del self._entries[loop]

    def _take_closed_loops(self) -> list[Resource]:
        """Take the resources of loops closed without closing them (the caller holds the guard)."""
        taken: list[Resource] = []
        for loop, entry in list(self._entries.items()):
            if loop.is_closed():
                del self._entries[loop]
                if entry.resource is not None:
                    taken.append(entry.resource)
                    entry.resource = None
                _stop_quietly(entry.watcher)
        return taken

    async def close(self) -> None:
        """Close every loop's resource; later :meth:`get` calls raise ``StoreError``.

        The running loop's is closed here; that of a loop running in another thread is closed in
        that loop, waited for up to :attr:`close_timeout` seconds (past that, its loop closes it
        when it closes); that of an open loop that is not running is closed in that loop, run in a
        worker thread; that of a closed loop is dropped. Raises nothing; closing again does nothing.
        """
        current = asyncio.get_running_loop()
        with self._guard:
            self._closed = True
            entries = list(self._entries.items())
        for loop, entry in entries:
            if loop is current:
                await self._close_entry(entry)
                if entry.hook is not None:
                    await entry.hook.aclose()
                if entry.watcher is not None:
                    entry.watcher.cancel()
                    await asyncio.wait({entry.watcher})  # ended when close returns, raising nothing
            elif loop.is_running() and not loop.is_closed():
                await self._close_in(loop, entry)
            elif not loop.is_closed():
                await asyncio.to_thread(self._close_idle, loop, entry)
            else:
                self._drop_entry(entry)

    def _close_idle(self, loop: asyncio.AbstractEventLoop, entry: _Entry[Resource]) -> None:
        """Close ``entry``'s resource in ``loop``, open but not running, by running it here a while.

        Called in a worker thread, where no loop runs. A loop left idle between two
        ``run_until_complete`` calls (the OpenAI Agents SDK's ``Runner.run_sync`` leaves its loop
        so) still has the driver's tasks: closing the resource in it lets them end, where dropping
        it would leave them to be reported "destroyed but pending". If the loop starts running
        elsewhere or closes meanwhile, the resource is dropped instead.
        """

        async def closing() -> None:
            await self._close_entry(entry)
            if entry.watcher is not None:
                entry.watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await entry.watcher
            if entry.hook is not None:
                await entry.hook.aclose()

        try:
            loop.run_until_complete(asyncio.wait_for(closing(), self.close_timeout))
        except Exception:  # noqa: BLE001 (running elsewhere, closed meanwhile, too slow, or the driver failed: drop what is left)
            self._drop_entry(entry)

    async def _close_in(self, loop: asyncio.AbstractEventLoop, entry: _Entry[Resource]) -> None:
        """Close ``entry``'s resource in ``loop``, running in another thread; wait a bounded time."""
        closing: Future[None]
        try:
            closing = asyncio.run_coroutine_threadsafe(self._close_entry(entry), loop)
        except RuntimeError:  # closed since it was seen running: drop it
            self._drop_entry(entry)
            return
        with contextlib.suppress(TimeoutError):  # cancelled: that loop's closing hook closes it
            await asyncio.wait_for(asyncio.wrap_future(closing), self.close_timeout)
        if entry.watcher is not None:
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                loop.call_soon_threadsafe(entry.watcher.cancel)


def _stop_quietly(watcher: asyncio.Task[None] | None) -> None:
    """Let a closing task of a loop that will not run it again be freed without a report.

    Its loop is closed (or not running): the task can neither run nor be cancelled there, and
    asyncio would report it "destroyed but pending" when freed, as it does for a task whose loop
    stopped before it finished (``run_until_complete`` clears the same flag then).
    """
    if watcher is not None and not watcher.done():
        with contextlib.suppress(AttributeError):
            watcher._log_destroy_pending = False  # type: ignore[attr-defined]
