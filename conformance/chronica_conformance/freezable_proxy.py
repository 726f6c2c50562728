"""A loopback TCP proxy that can stop forwarding: a server that stops answering, for tests.

A store's ``operation_timeout`` is there for a server that hangs while its machine still keeps
the connection open (a stopped process, a stuck proxy or network). Tests put this proxy between
the store and the real server, :meth:`FreezableProxy.freeze` it, and check that an operation then
fails within its bound and that the store works again after :meth:`FreezableProxy.thaw`. The
shared server itself is never touched. It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import select
import socket
import threading
from types import TracebackType

__all__ = ["FreezableProxy"]

_POLL_SECONDS = 0.05


class FreezableProxy:
    """Forward every connection made to :attr:`port` on 127.0.0.1 to ``(host, port)``.

    While frozen, connections are still accepted and kept open, but no byte moves either way
    (bytes already read are held back); thawing lets them through in order. Use it as a context
    manager, or call :meth:`close`, which ends every connection and thread it started.

    Args:
        host: the server's address (a loopback address in these tests).
        port: the server's port.
    """

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        """The port to connect to instead of the server's."""
        self._start(self._accept)

    def freeze(self) -> None:
        """Stop forwarding: the server seems to stop answering (connections stay open)."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Forward again, bytes held back first."""
        self._flowing.set()

    def close(self) -> None:
        """Close the listener and every connection, and wait for the proxy's threads to end."""
        self._closed.set()
        self._flowing.set()
        self._listener.close()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for connection in sockets:
            connection.close()
        for thread in threads:
            thread.join(timeout=5)

    def __enter__(self) -> FreezableProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _start(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                ready, _, _ = select.select([self._listener], [], [], _POLL_SECONDS)
                if not ready:
                    continue
                client, _ = self._listener.accept()
            except (OSError, ValueError):  # closed under us
                return
            try:
                server = socket.create_connection(self._target, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            self._start(self._pump, client, server)
            self._start(self._pump, server, client)

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                if not self._flowing.wait(_POLL_SECONDS):
                    continue
                ready, _, _ = select.select([source], [], [], _POLL_SECONDS)
                if not ready:
                    continue
                data = source.recv(65536)
                if not data:
                    break
                while not self._flowing.wait(_POLL_SECONDS):  # frozen meanwhile: hold the bytes
                    if self._closed.is_set():
                        return
                target.sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            source.close()
            target.close()
