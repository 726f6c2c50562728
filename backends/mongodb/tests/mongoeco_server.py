"""Run the mongoeco wire server on 127.0.0.1 until stdin closes or SIGTERM arrives.

Started by ``conftest.py`` under Python 3.13 in mongoeco's own virtual environment (mongoeco
needs 3.13; the tests themselves run on any supported Python). Prints the bound port on its
first line of output. The port is chosen by the operating system (``--port 0``, the default),
so parallel runs never collide. Closing stdin stops it, so it cannot outlive its parent.

One change to the emulator, for speed only (set ``CHRONICA_MONGOECO_UNPATCHED=1`` to run it as
shipped): mongoeco 4.11's memory engine checks a *compound* unique index by scanning every
document of the collection on every insert (``MemoryEngine._ensure_unique_indexes`` uses its
index map only for single-field indexes) and, for a single insert, also compares its ``_id``
with every document's even when it is an ObjectId or a string. Each insert then costs
O(documents in the collection): the conformance suite's 1,000-acta chronicum and the
benchmarks' 100,000-acta ones would take hours. ``check_compound_unique_indexes_by_key`` looks
the insert's key up in the index map the engine already keeps for that index (plain inserts of
documents whose indexed values are not arrays or documents) and skips the ``_id`` scan for
string and ObjectId ids; every other case goes to the original code. It finds exactly the
conflicts the scan finds (the tests' 40-writer races would store duplicate sequence numbers
otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from typing import Any

import mongoeco
from bson import ObjectId
from mongoeco.core.filtering import QueryEngine
from mongoeco.engines import memory
from mongoeco.engines.memory import MemoryEngine
from mongoeco.wire.proxy import AsyncMongoEcoProxyServer

PATCHED_VERSION = "4.11.0"


def check_compound_unique_indexes_by_key() -> bool:
    """Make compound unique checks of plain inserts use the engine's index map; see the docstring."""
    if mongoeco.__version__ != PATCHED_VERSION or os.environ.get("CHRONICA_MONGOECO_UNPATCHED"):
        return False
    original = MemoryEngine._ensure_unique_indexes

    def ensure_unique_indexes(
        self: Any, db_name: str, coll_name: str, candidate: Any, **options: Any
    ) -> None:
        if options.get("exclude_storage_key") is not None:  # an update: the original decides
            original(self, db_name, coll_name, candidate, **options)
            return
        if isinstance(candidate.get("_id"), str | ObjectId):
            # A string or ObjectId _id equals only itself: the storage-key check finds a duplicate,
            # no need to also compare it with every document's _id.
            options["scan_payload_id"] = False
        indexes_view = options.get("indexes_view")
        indexes = (
            (self._indexes if indexes_view is None else indexes_view).get(db_name, {}).get(coll_name, [])
        )
        index_data_view = options.get("index_data_view")
        index_data = (self._index_data if index_data_view is None else index_data_view).get(db_name, {})
        index_maps = index_data.get(coll_name, {})
        handled = []
        for index in indexes:
            fields = index["fields"]
            index_map = index_maps.get(index["name"])
            if not index.get("unique") or len(fields) < 2 or index.get("collation") is not None:
                continue
            if index_map is None or any(
                isinstance(value, list | dict)
                for field in fields
                for value in QueryEngine.extract_values(candidate, field)
            ):
                continue
            handled.append(index)
            if not memory.document_in_virtual_index(candidate, index):
                continue  # outside a partial index: nothing to check
            key = self._index_key(candidate, fields)
            if index_map.get(key):
                raise self._unique_key_error(
                    f"Duplicate key for unique index '{index['name']}': {fields}={key!r}",
                    f"{db_name}.{coll_name}",
                    candidate,
                    index=index,
                    conflict=key,
                )
        if handled:
            remaining = [index for index in indexes if index not in handled]
            options["indexes_view"] = {db_name: {coll_name: remaining}}
        original(self, db_name, coll_name, candidate, **options)

    MemoryEngine._ensure_unique_indexes = ensure_unique_indexes
    return True


async def serve(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stop.set)

    def wait_for_stdin_to_close() -> None:
        sys.stdin.read()
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=wait_for_stdin_to_close, daemon=True).start()
    check_compound_unique_indexes_by_key()
    server = AsyncMongoEcoProxyServer(engine=MemoryEngine(), host=host, port=port)
    address = await server.start()
    print(address.port, flush=True)
    try:
        await stop.wait()
    finally:
        await server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    arguments = parser.parse_args()
    asyncio.run(serve(arguments.host, arguments.port))


if __name__ == "__main__":
    main()
