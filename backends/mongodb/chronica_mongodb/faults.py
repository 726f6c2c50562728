"""The driver's faults for the conformance suite's driver-failure group (``chronica.driver_faults``).

Loaded only by the conformance suite (chronica-conformance), which the group needs: the suite
runs the group on ``mongodb://`` with :class:`PymongoFaults`, as the backend's own tests do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from chronica_conformance import FailureKind, Injection
from pymongo.errors import AutoReconnect, ExecutionTimeout, PyMongoError, ServerSelectionTimeoutError

from chronica_mongodb.store import AsyncMongoStore, MongoStore

__all__ = ["PymongoFaults", "pymongo_failure"]


def pymongo_failure(kind: FailureKind) -> PyMongoError:
    """Pymongo's own exception for ``kind``."""
    if kind == "connection_reset":
        return AutoReconnect("127.0.0.1:27017: connection closed (connection reset by peer)")
    if kind == "server_gone":
        return ServerSelectionTimeoutError("127.0.0.1:27017: [Errno 111] Connection refused")
    return ExecutionTimeout("operation exceeded time limit", 50)


class _FailingCollection:
    """A collection whose every method call is a driver call that an injection may fail."""

    def __init__(self, collection: Any, injection: Injection) -> None:
        self._collection = collection
        self._injection = injection

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._collection, name)

        def call(*arguments: Any, **keywords: Any) -> Any:
            failing = self._injection.next_call()
            if failing is not None:
                raise self._injection.raised_now(pymongo_failure(failing))
            return method(*arguments, **keywords)

        return call


class _FailingDatabase:
    """The store's database, handing out :class:`_FailingCollection` views of its collections."""

    def __init__(self, database: Any, injection: Injection) -> None:
        self._database = database
        self._injection = injection

    def __getitem__(self, name: str) -> _FailingCollection:
        return _FailingCollection(self._database[name], self._injection)


class PymongoFaults:
    """Makes the collection calls of a chronica-mongodb store fail (see ``DriverFaults``)."""

    @contextlib.contextmanager
    def inject(
        self,
        store: MongoStore | AsyncMongoStore,
        kind: FailureKind,
        *,
        after: int = 0,
        times: int | None = None,
    ) -> Iterator[Injection]:
        """Make ``store``'s driver fail while the context is open (see ``DriverFaults.inject``).

        ``times``: how many calls fail after the first ``after`` (``None``: every later one).
        """
        injection = Injection(kind, after, times)
        with pytest.MonkeyPatch.context() as patch:
            if isinstance(store, AsyncMongoStore):  # a client per event loop, and its database
                loop_database = store._loop_database
                patch.setattr(
                    store,
                    "_loop_database",
                    lambda loop_client: _FailingDatabase(loop_database(loop_client), injection),
                )
            else:
                patch.setattr(store, "database", _FailingDatabase(store.database, injection))
            yield injection
