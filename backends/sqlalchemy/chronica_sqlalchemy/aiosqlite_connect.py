"""aiosqlite's connections: a database that cannot be opened is found before aiosqlite tries.

aiosqlite opens the database on a thread of its own. When that fails, it asks the thread to stop
and raises at once, without waiting: the thread then reports that it stopped to the event loop
that asked, which by then may be closed (``asyncio.run`` returned): the thread dies of
``RuntimeError: Event loop is closed``. So, before each new aiosqlite connection, the engine opens
and closes the database with ``sqlite3`` on the calling thread, with the same arguments: a
database that cannot be opened (its folder does not exist, it may not be read) fails there, with
the same ``sqlite3`` error, and aiosqlite starts no thread for it.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import Engine, event

__all__ = ["open_before_aiosqlite"]


def open_before_aiosqlite(engine: Engine) -> None:
    """Make ``engine`` (an aiosqlite ``AsyncEngine``'s ``sync_engine``) open each database first.

    The ``do_connect`` event opens and closes it with ``sqlite3.connect`` and the driver's
    arguments; ``sqlite3``'s error propagates as the driver's would (SQLAlchemy wraps it).
    """
    event.listen(engine, "do_connect", _open_and_close)


def _open_and_close(dialect: Any, connection_record: Any, arguments: Any, keywords: Any) -> None:
    sqlite3.connect(*arguments, **keywords).close()
