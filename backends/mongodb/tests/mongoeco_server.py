"""Run the mongoeco wire server on 127.0.0.1 until stdin closes or SIGTERM arrives.

Started by ``conftest.py`` under Python 3.13 in mongoeco's own virtual environment (mongoeco
needs 3.13; the tests themselves run on any supported Python). Prints the bound port on its
first line of output. The port is chosen by the operating system (``--port 0``, the default),
so parallel runs never collide. Closing stdin stops it, so it cannot outlive its parent.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading

from mongoeco.engines.memory import MemoryEngine
from mongoeco.wire.proxy import AsyncMongoEcoProxyServer


async def serve(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stop.set)

    def wait_for_stdin_to_close() -> None:
        sys.stdin.read()
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=wait_for_stdin_to_close, daemon=True).start()
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
