"""Chronica on MongoDB: :class:`MongoStore` and :class:`AsyncMongoStore` (pymongo).

Open one with ``chronica_core.open_store("mongodb://host/database")`` (or
``open_async_store``), or build it around an existing client::

    store = MongoStore(client=MongoClient(...), database="chronica")
"""

from chronica_mongodb.core import ACTA, CHRONICA, MAX_DOCUMENT_BYTES
from chronica_mongodb.store import DEFAULT_DATABASE, STORE_OPTIONS, AsyncMongoStore, MongoStore

__all__ = [
    "ACTA",
    "CHRONICA",
    "DEFAULT_DATABASE",
    "MAX_DOCUMENT_BYTES",
    "STORE_OPTIONS",
    "AsyncMongoStore",
    "MongoStore",
]
