"""Chronica beside its peers: the session stores of other agent frameworks, on the same databases.

Run ``python -m benchmarks.peers [--peers NAME,...] [--sizes 100,10000,100000] [--json FILE]``
(``tox -e peers`` installs the peers). Each peer is paired with the Chronica store on the same
database (the same SQLite file, the same PostgreSQL schema, or memory), and for each history size
both are filled (the peer through bulk SQL into its own tables, with increasing timestamps, where
its API would take hours) and timed in the same interleaved rounds: the peer's own "last 20" call
against ``Chronicarius.get_acta(owner, id, last_n=20)``, its own append against
``Chronicarius.record_actum``, then 40 writers on distinct sessions, and for langchain-postgres 40
writers on one shared session. A latency ratio is Chronica's median / the peer's (below 1: Chronica
is faster); a writers ratio is Chronica's acta/s / the peer's items/s (above 1: Chronica is
faster). The project's SQLite targets against ``SQLiteSession`` are printed with ok/MISSED. Nothing
here calls a model or the network; every schema and file it makes is dropped at the end. See
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.run import (
    LAST_N,
    OWNER,
    AsyncWriter,
    Closer,
    Timing,
    Writer,
    fresh_id,
    history,
    run_tasks,
    run_threads,
    story_actum,
    time_interleaved,
)
from chronica_core import (
    ActorKind,
    Actum,
    AsyncChronicarius,
    AsyncStore,
    Chronicarius,
    Store,
    open_async_store,
    open_store,
)
from chronica_core.registry import registry
from chronica_core.story import DINNER_STORY

POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
"""The PostgreSQL server the PostgreSQL pairings use (``--postgres-url``)."""

SIZES = (100, 10_000, 100_000)
"""History sizes (acta per chronicum, items per peer session) timed by default (``--sizes``)."""

POOL_SIZE = 10
"""Connections each pool may open on a server by default (``--pool-size``): Chronica's blocking
store, its asyncio store and the peer each get one pool, so a PostgreSQL pairing holds up to three
times this many (plus one) while its writers run. Chronica's own default is 20; on a server shared
by many (100 connections for everybody) three pools of 20 ran it out of connections."""

APP_NAME = "chronica-peers"
"""The ADK app name every ADK session is created under."""

LANGCHAIN_TABLE = "chronica_peers_history"
"""The table langchain-postgres's ``PostgresChatMessageHistory`` writes in the run's schema."""


# --------------------------------------------------------------------------------------------
# The story, in each peer's own message shape


def story_text(index: int) -> tuple[bool, str]:
    """Row ``index`` (cycled) of the dinner story: whether a person wrote it, and its text."""
    row = DINNER_STORY[index % len(DINNER_STORY)]
    return row.actor_kind is ActorKind.HUMAN, str(row.content)


def agents_item(index: int) -> dict[str, str]:
    """Row ``index`` of the story as an OpenAI Agents input item (``{"role", "content"}``)."""
    human, text = story_text(index)
    return {"role": "user" if human else "assistant", "content": text}


def fill_moments(size: int) -> list[datetime]:
    """``size`` increasing naive UTC moments, one millisecond apart, the last one a second ago."""
    start = datetime.now(UTC).replace(tzinfo=None) - timedelta(milliseconds=size) - timedelta(seconds=1)
    return [start + timedelta(milliseconds=index) for index in range(size)]


# --------------------------------------------------------------------------------------------
# Where a pairing runs


@dataclass(slots=True)
class Place:
    """The database a pairing shares with its peer.

    Attributes:
        database: ``"sqlite"``, ``"postgresql"`` or ``"memory"``.
        chronica_url: the Chronica store's URL.
        chronica_options: ``open_store`` options (the PostgreSQL schema and pool size).
        sqlite_path: the SQLite file (``sqlite`` only).
        postgres_url: the server URL (``postgresql`` only).
        schema: the throw-away schema everything is written in (``postgresql`` only).
        pool_size: connections each side may hold at most on a server.
    """

    database: str
    chronica_url: str
    chronica_options: dict[str, str] = field(default_factory=dict)
    sqlite_path: str = ""
    postgres_url: str = ""
    schema: str = ""
    pool_size: int = 10

    def sqlalchemy_url(self, *, asynchronous: bool) -> str:
        """The peer's SQLAlchemy URL for this database (aiosqlite or psycopg's asyncio when asked)."""
        if self.database == "sqlite":
            return (
                f"sqlite+aiosqlite:///{self.sqlite_path}" if asynchronous else f"sqlite:///{self.sqlite_path}"
            )
        return self.postgres_url.replace("postgresql://", "postgresql+psycopg://", 1)

    def connect_arguments(self) -> dict[str, Any]:
        """``connect_args`` putting a peer's SQLAlchemy connections in the run's schema (PostgreSQL)."""
        if self.database == "postgresql":
            return {"options": f"-c search_path={self.schema}"}
        return {}

    def pool_arguments(self) -> dict[str, Any]:
        """Engine pool arguments giving a peer as many server connections as Chronica's pool."""
        if self.database == "postgresql":
            return {"pool_size": self.pool_size, "max_overflow": 0}
        return {}


# --------------------------------------------------------------------------------------------
# The peers


class Peer:
    """One peer's session store, driven through its own API.

    A peer is either asyncio (``asynchronous``: ``aread``/``aappend``, its writers are tasks) or
    blocking (``read``/``append``, its writers are threads), as its API is used.

    Attributes:
        key: the name ``--peers`` takes.
        title: the peer's class, as its users know it.
        database: where it runs (see :class:`Place`).
        asynchronous: whether its API is asyncio.
        last_twenty: the call timed as its "last 20", for the report.
    """

    key = ""
    title = ""
    database = ""
    asynchronous = True
    last_twenty = ""

    def __init__(self, place: Place) -> None:
        self.place = place

    async def open(self) -> None:
        """Connect and create the peer's tables."""

    async def new_session(self, session_id: str) -> None:
        """Create an empty session (its first write then appends to it)."""

    async def fill(self, session_id: str, size: int) -> None:
        """Create ``session_id`` holding ``size`` story items, as fast as its tables allow."""
        raise NotImplementedError

    async def aread(self, session_id: str) -> int:
        """The peer's last-20 read of ``session_id`` (asyncio peers); how many items it returned."""
        raise NotImplementedError

    async def aappend(self, session_id: str, index: int) -> None:
        """Append story row ``index`` to ``session_id`` through the peer's API (asyncio peers)."""
        raise NotImplementedError

    def read(self, session_id: str) -> int:
        """The peer's last-20 read of ``session_id`` (blocking peers); how many items it returned."""
        raise NotImplementedError

    def append(self, session_id: str, index: int) -> None:
        """Append story row ``index`` to ``session_id`` through the peer's API (blocking peers)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close what :meth:`open` opened (the run drops the schema or file afterwards)."""


class SQLiteSessionPeer(Peer):
    """OpenAI Agents ``SQLiteSession`` on the pairing's SQLite file, one session object per id."""

    key = "sqlite-session"
    title = "OpenAI Agents SQLiteSession"
    database = "sqlite"
    last_twenty = "get_items(limit=20)"

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        self.sessions: dict[str, Any] = {}

    def _session(self, session_id: str) -> Any:
        from agents.memory import SQLiteSession

        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = SQLiteSession(session_id, self.place.sqlite_path)
        return session

    async def new_session(self, session_id: str) -> None:
        self._session(session_id)

    async def fill(self, session_id: str, size: int) -> None:
        self._session(session_id)  # creates its tables
        moments = fill_moments(size)
        with sqlite3.connect(self.place.sqlite_path) as connection:
            connection.execute("INSERT INTO agent_sessions (session_id) VALUES (?)", (session_id,))
            connection.executemany(
                "INSERT INTO agent_messages (session_id, message_data, created_at) VALUES (?, ?, ?)",
                [(session_id, json.dumps(agents_item(index)), moments[index]) for index in range(size)],
            )
        connection.close()

    async def aread(self, session_id: str) -> int:
        return len(await self._session(session_id).get_items(limit=LAST_N))

    async def aappend(self, session_id: str, index: int) -> None:
        await self._session(session_id).add_items([agents_item(index)])

    async def close(self) -> None:
        for session in self.sessions.values():
            session.close()


class SQLAlchemySessionPeer(Peer):
    """OpenAI Agents ``SQLAlchemySession`` on one ``AsyncEngine`` (aiosqlite, or psycopg's asyncio)."""

    key = "sqlalchemy-session"
    title = "OpenAI Agents SQLAlchemySession"
    last_twenty = "get_items(limit=20)"

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        self.sessions: dict[str, Any] = {}
        self.engine: Any = None

    async def open(self) -> None:
        from sqlalchemy.ext.asyncio import create_async_engine

        self.engine = create_async_engine(
            self.place.sqlalchemy_url(asynchronous=True),
            connect_args=self.place.connect_arguments(),
            **self.place.pool_arguments(),
        )

    def _session(self, session_id: str) -> Any:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        session = self.sessions.get(session_id)
        if session is None:
            session = SQLAlchemySession(session_id, engine=self.engine, create_tables=True)
            self.sessions[session_id] = session
        return session

    async def new_session(self, session_id: str) -> None:
        await self._session(session_id).get_items(limit=1)  # creates the tables

    async def fill(self, session_id: str, size: int) -> None:
        from sqlalchemy import column, insert, table

        await self.new_session(session_id)
        sessions = table("agent_sessions", column("session_id"))
        messages = table("agent_messages", column("session_id"), column("message_data"), column("created_at"))
        moments = fill_moments(size)
        rows = [
            {
                "session_id": session_id,
                "message_data": json.dumps(agents_item(index)),
                "created_at": moments[index],
            }
            for index in range(size)
        ]
        async with self.engine.begin() as connection:
            await connection.execute(insert(sessions), [{"session_id": session_id}])
            await connection.execute(insert(messages), rows)

    async def aread(self, session_id: str) -> int:
        return len(await self._session(session_id).get_items(limit=LAST_N))

    async def aappend(self, session_id: str, index: int) -> None:
        await self._session(session_id).add_items([agents_item(index)])

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.dispose()


class SQLAlchemySessionSQLitePeer(SQLAlchemySessionPeer):
    """``SQLAlchemySession`` on the pairing's SQLite file (aiosqlite)."""

    key = "sqlalchemy-session-sqlite"
    database = "sqlite"


class SQLAlchemySessionPostgresPeer(SQLAlchemySessionPeer):
    """``SQLAlchemySession`` in the run's PostgreSQL schema (psycopg's asyncio)."""

    key = "sqlalchemy-session-postgres"
    database = "postgresql"


def langchain_message(index: int) -> Any:
    """Row ``index`` of the story as a LangChain ``HumanMessage`` or ``AIMessage``."""
    from langchain_core.messages import AIMessage, HumanMessage

    human, text = story_text(index)
    return HumanMessage(content=text) if human else AIMessage(content=text)


def langchain_json(index: int) -> str:
    """Row ``index`` of the story as LangChain stores a message (``message_to_dict``, as JSON)."""
    from langchain_core.messages import message_to_dict

    return json.dumps(message_to_dict(langchain_message(index)))


class LangchainPostgresPeer(Peer):
    """langchain-postgres ``PostgresChatMessageHistory`` on psycopg connections in the run's schema.

    It has no limit: its last 20 is ``get_messages()[-20:]``, the whole history read and parsed,
    then cut (``get_messages`` is the only read it offers). Its latency calls share one
    connection; writer threads take connections from a ``psycopg_pool.ConnectionPool`` as large as
    Chronica's pool, each write a new history object on the checked-out connection (what its
    documentation suggests: creating one is cheap, the connection is reused).
    """

    key = "langchain-postgres"
    title = "langchain-postgres PostgresChatMessageHistory"
    database = "postgresql"
    asynchronous = False
    last_twenty = "get_messages()[-20:] (it has no limit)"

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        self.connection: Any = None
        self.pool: Any = None
        self.histories: dict[str, Any] = {}

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.place.postgres_url, options=f"-c search_path={self.place.schema}")

    async def open(self) -> None:
        from langchain_postgres import PostgresChatMessageHistory

        self.connection = self._connect()
        PostgresChatMessageHistory.create_tables(self.connection, LANGCHAIN_TABLE)

    def _history(self, session_id: str, connection: Any = None) -> Any:
        from langchain_postgres import PostgresChatMessageHistory

        if connection is not None:
            return PostgresChatMessageHistory(LANGCHAIN_TABLE, session_id, sync_connection=connection)
        history_object = self.histories.get(session_id)
        if history_object is None:
            history_object = PostgresChatMessageHistory(
                LANGCHAIN_TABLE, session_id, sync_connection=self.connection
            )
            self.histories[session_id] = history_object
        return history_object

    async def fill(self, session_id: str, size: int) -> None:
        from psycopg import sql

        moments = [moment.replace(tzinfo=UTC) for moment in fill_moments(size)]
        texts = [langchain_json(index) for index in range(len(DINNER_STORY))]
        copy_sql = sql.SQL("COPY {} (session_id, message, created_at) FROM STDIN").format(
            sql.Identifier(LANGCHAIN_TABLE)
        )
        with self.connection.transaction(), self.connection.cursor().copy(copy_sql) as copy:
            for index in range(size):
                copy.write_row((session_id, texts[index % len(texts)], moments[index]))
        self.connection.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(LANGCHAIN_TABLE)))
        self.connection.commit()

    def read(self, session_id: str) -> int:
        return len(self._history(session_id).get_messages()[-LAST_N:])

    def append(self, session_id: str, index: int) -> None:
        self._history(session_id).add_message(langchain_message(index))

    def pooled_append(self, session_id: str, index: int) -> None:
        """Append through a connection from the writers' pool (opened on first use)."""
        if self.pool is None:
            raise RuntimeError("open_pool() first")
        with self.pool.connection() as connection:
            self._history(session_id, connection).add_message(langchain_message(index))

    def open_pool(self) -> None:
        """Open the writers' pool (``pool_size`` connections, all opened before timing)."""
        from psycopg_pool import ConnectionPool

        if self.pool is None:
            self.pool = ConnectionPool(
                self.place.postgres_url,
                min_size=self.place.pool_size,
                max_size=self.place.pool_size,
                kwargs={"options": f"-c search_path={self.place.schema}"},
                open=True,
            )
            self.pool.wait()

    def close_pool(self) -> None:
        """Close the writers' pool (the server's connections are shared: hold them only while needed)."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    async def close(self) -> None:
        self.close_pool()
        if self.connection is not None:
            self.connection.close()


class SQLChatPeer(Peer):
    """LangChain ``SQLChatMessageHistory`` on a blocking SQLAlchemy engine (its default mode).

    Like every LangChain history it has no limit: its last 20 is ``get_messages()[-20:]``. Its
    table (``message_store``) has no index on the session: every read scans the table.
    """

    title = "LangChain SQLChatMessageHistory"
    asynchronous = False
    last_twenty = "get_messages()[-20:] (it has no limit)"

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        self.engine: Any = None
        self.histories: dict[str, Any] = {}
        self.lock = threading.Lock()

    async def open(self) -> None:
        from sqlalchemy import create_engine

        self.engine = create_engine(
            self.place.sqlalchemy_url(asynchronous=False),
            connect_args=self.place.connect_arguments(),
            **self.place.pool_arguments(),
        )

    def _history(self, session_id: str) -> Any:
        with warnings.catch_warnings():  # langchain-community says it is being sunset, on import
            warnings.simplefilter("ignore", DeprecationWarning)
            from langchain_community.chat_message_histories import SQLChatMessageHistory

        with self.lock:
            history_object = self.histories.get(session_id)
            if history_object is None:
                history_object = SQLChatMessageHistory(session_id=session_id, connection=self.engine)
                self.histories[session_id] = history_object
            return history_object

    async def new_session(self, session_id: str) -> None:
        self._history(session_id)

    async def fill(self, session_id: str, size: int) -> None:
        from sqlalchemy import column, insert, table

        self._history(session_id)  # creates its table
        texts = [langchain_json(index) for index in range(len(DINNER_STORY))]
        messages = table("message_store", column("session_id"), column("message"))
        with self.engine.begin() as connection:
            connection.execute(
                insert(messages),
                [{"session_id": session_id, "message": texts[index % len(texts)]} for index in range(size)],
            )

    def read(self, session_id: str) -> int:
        return len(self._history(session_id).get_messages()[-LAST_N:])

    def append(self, session_id: str, index: int) -> None:
        self._history(session_id).add_message(langchain_message(index))

    async def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()


class SQLChatSQLitePeer(SQLChatPeer):
    """``SQLChatMessageHistory`` on the pairing's SQLite file."""

    key = "langchain-sql-sqlite"
    database = "sqlite"


class SQLChatPostgresPeer(SQLChatPeer):
    """``SQLChatMessageHistory`` in the run's PostgreSQL schema (psycopg)."""

    key = "langchain-sql-postgres"
    database = "postgresql"


def adk_event(index: int, timestamp: float | None = None) -> Any:
    """Row ``index`` of the story as an ADK ``Event`` (a fresh id; ``timestamp`` in seconds, else now)."""
    from google.adk.events import Event
    from google.genai import types

    human, text = story_text(index)
    role, author = ("user", "user") if human else ("model", "concierge")
    content = types.Content(role=role, parts=[types.Part(text=text)])
    if timestamp is None:
        return Event(author=author, invocation_id=f"invocation-{index}", content=content)
    return Event(author=author, invocation_id=f"invocation-{index}", content=content, timestamp=timestamp)


class ADKPeer(Peer):
    """Common ground of ADK's session services: sessions of one user, read with ``num_recent_events``."""

    last_twenty = "get_session(config=GetSessionConfig(num_recent_events=20))"

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        self.service: Any = None
        self.sessions: dict[str, Any] = {}

    async def new_session(self, session_id: str) -> None:
        self.sessions[session_id] = await self.service.create_session(
            app_name=APP_NAME, user_id=OWNER, session_id=session_id
        )

    async def aread(self, session_id: str) -> int:
        from google.adk.sessions.base_session_service import GetSessionConfig

        session = await self.service.get_session(
            app_name=APP_NAME,
            user_id=OWNER,
            session_id=session_id,
            config=GetSessionConfig(num_recent_events=LAST_N),
        )
        return len(session.events)

    async def aappend(self, session_id: str, index: int) -> None:
        await self.service.append_event(self.sessions[session_id], adk_event(index))

    async def _recent(self, session_id: str) -> Any:
        """The session as an app holds it after a read: its last 20 events (for the appends)."""
        from google.adk.sessions.base_session_service import GetSessionConfig

        return await self.service.get_session(
            app_name=APP_NAME,
            user_id=OWNER,
            session_id=session_id,
            config=GetSessionConfig(num_recent_events=LAST_N),
        )


class ADKDatabasePeer(ADKPeer):
    """ADK ``DatabaseSessionService`` (SQLAlchemy asyncio: aiosqlite, or psycopg's asyncio)."""

    title = "ADK DatabaseSessionService"

    async def open(self) -> None:
        from google.adk.sessions import DatabaseSessionService

        self.service = DatabaseSessionService(
            db_url=self.place.sqlalchemy_url(asynchronous=True),
            connect_args=self.place.connect_arguments(),
            **self.place.pool_arguments(),
        )

    async def fill(self, session_id: str, size: int) -> None:
        from google.adk.sessions.schemas.v1 import StorageEvent, StorageSession
        from sqlalchemy import insert, update

        await self.new_session(session_id)
        session = self.sessions[session_id]
        moments = fill_moments(size)
        prototypes = [adk_event(index, 0.0) for index in range(len(DINNER_STORY))]
        rows = []
        for index in range(size):
            timestamp = moments[index].replace(tzinfo=UTC).timestamp()
            event = prototypes[index % len(prototypes)].model_copy(
                update={"id": uuid.uuid4().hex, "timestamp": timestamp}
            )
            stored = StorageEvent.from_event(session, event)
            rows.append(
                {column.key: getattr(stored, column.key) for column in StorageEvent.__table__.columns}
            )
        engine = self.service.db_engine
        async with engine.begin() as connection:
            await connection.execute(insert(StorageEvent), rows)
            await connection.execute(
                update(StorageSession)
                .where(StorageSession.app_name == APP_NAME)
                .where(StorageSession.user_id == OWNER)
                .where(StorageSession.id == session_id)
                .values(update_time=moments[-1])
            )
        self.sessions[session_id] = await self._recent(session_id)

    async def close(self) -> None:
        if self.service is not None:
            await self.service.close()


class ADKDatabaseSQLitePeer(ADKDatabasePeer):
    """``DatabaseSessionService`` on the pairing's SQLite file."""

    key = "adk-database-sqlite"
    database = "sqlite"


class ADKDatabasePostgresPeer(ADKDatabasePeer):
    """``DatabaseSessionService`` in the run's PostgreSQL schema."""

    key = "adk-database-postgres"
    database = "postgresql"


class ADKMemoryPeer(ADKPeer):
    """ADK ``InMemorySessionService``, beside Chronica's ``memory://``.

    Filled by extending its own storage (the session's event list it keeps): its ``append_event``
    compares the new event with every stored one of the same id, so 100,000 appends through the
    API would take quadratic time.
    """

    key = "adk-memory"
    title = "ADK InMemorySessionService"
    database = "memory"

    async def open(self) -> None:
        from google.adk.sessions import InMemorySessionService

        self.service = InMemorySessionService()

    async def fill(self, session_id: str, size: int) -> None:
        await self.new_session(session_id)
        moments = fill_moments(size)
        prototypes = [adk_event(index, 0.0) for index in range(len(DINNER_STORY))]
        stored = self.service.sessions[APP_NAME][OWNER][session_id]
        stored.events.extend(
            prototypes[index % len(prototypes)].model_copy(
                update={"id": uuid.uuid4().hex, "timestamp": moments[index].replace(tzinfo=UTC).timestamp()}
            )
            for index in range(size)
        )
        stored.last_update_time = stored.events[-1].timestamp
        self.sessions[session_id] = await self._recent(session_id)


PEERS: dict[str, type[Peer]] = {
    peer.key: peer
    for peer in (
        SQLiteSessionPeer,
        SQLAlchemySessionSQLitePeer,
        SQLAlchemySessionPostgresPeer,
        LangchainPostgresPeer,
        SQLChatSQLitePeer,
        SQLChatPostgresPeer,
        ADKDatabaseSQLitePeer,
        ADKDatabasePostgresPeer,
        ADKMemoryPeer,
    )
}
"""Every peer ``--peers`` can name, in the order a run measures them."""


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class LatencyRow:
    """One operation at one history size: Chronica (blocking and asyncio) beside the peer.

    Attributes:
        peer: the peer's key.
        operation: ``"last 20"`` or ``"append"``.
        history: items in the session when timing started.
        chronica: ``Chronicarius`` (blocking store).
        chronica_async: ``AsyncChronicarius``, when the backend has an asyncio store.
        peer_timing: the peer's own call.
    """

    peer: str
    operation: str
    history: int
    chronica: Timing
    chronica_async: Timing | None
    peer_timing: Timing

    @property
    def ratio(self) -> float:
        """Chronica (blocking) median / the peer's median."""
        return self.chronica.median_ns / self.peer_timing.median_ns

    @property
    def async_ratio(self) -> float | None:
        """Chronica (asyncio) median / the peer's median, when timed."""
        if self.chronica_async is None:
            return None
        return self.chronica_async.median_ns / self.peer_timing.median_ns


@dataclass(frozen=True, slots=True)
class WritersRow:
    """Many writers at once: acta (items) per second, the median over the rounds.

    Attributes:
        peer: the peer's key.
        shared: all writers on one session (else one session each).
        writer: ``"chronica threads"``, ``"chronica tasks"``, ``"peer threads"`` or ``"peer tasks"``.
        writers: how many threads or tasks.
        per_second: median over the rounds that finished of writes / seconds (0.0: none did).
        rounds: each finished round's writes per second.
        failures: why each other round failed (a writer's first error).
    """

    peer: str
    shared: bool
    writer: str
    writers: int
    per_second: float
    rounds: list[float]
    failures: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PeerReport:
    """Everything measured for one peer (``--json`` writes a list of these)."""

    peer: str
    title: str
    database: str
    chronica_url: str
    last_twenty: str
    asynchronous: bool
    machine: str
    started_at: str
    latency: list[LatencyRow] = field(default_factory=list)
    writers: list[WritersRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """This report as plain JSON values, with every ratio computed."""
        document = asdict(self)
        for row, encoded in zip(self.latency, document["latency"], strict=True):
            encoded["ratio"] = row.ratio
            encoded["async_ratio"] = row.async_ratio
        return document


def machine() -> str:
    """CPU count and load average now: timings on a loaded machine are read with that in mind."""
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return f"{os.cpu_count()} CPUs, load average {load}"


def milliseconds(nanoseconds: float) -> str:
    """``nanoseconds`` as milliseconds, 3 significant digits or more."""
    value = nanoseconds / 1e6
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}" if value < 1 else f"{value:.2f}"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A plain-text table, columns padded to their widest cell."""
    widths = [max(len(line[column]) for line in [header, *rows]) for column in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *rows]
    )


SQLITE_TARGETS = (
    ("last 20", "chronica", 1.2),
    ("writers", "chronica threads", 1.0),
    ("writers", "chronica tasks", 0.8),
)
"""The project's SQLite targets against ``SQLiteSession`` (the peer that queues its writers
in-process): Chronica's last 20, blocking and asyncio, at most 1.2x its ``get_items(limit=20)`` at
every size; 40 writer threads at least 1.0x and 40 tasks at least 0.8x its 40 tasks' throughput."""


def verdicts(reports: Sequence[PeerReport]) -> list[str]:
    """One ``ok`` / ``MISSED`` line per target of :data:`SQLITE_TARGETS` that the run measured."""
    lines = []
    for report in reports:
        if report.peer != SQLiteSessionPeer.key:
            continue
        for operation, writer, limit in SQLITE_TARGETS:
            if operation == "last 20":
                for row in report.latency:
                    if row.operation != operation:
                        continue
                    ratios = [("", row.ratio)]
                    if row.async_ratio is not None:
                        ratios.append((" (asyncio)", row.async_ratio))
                    for flavour, ratio in ratios:
                        verdict = "ok" if ratio <= limit else "MISSED"
                        target = f"SQLite last 20{flavour} at {row.history:,} <= {limit}x SQLiteSession"
                        lines.append(f"{verdict:6}  {target}: {ratio:.2f}x")
                continue
            ours = [row for row in report.writers if row.writer == writer and not row.shared and row.rounds]
            theirs = [
                row
                for row in report.writers
                if row.writer.startswith("peer") and not row.shared and row.rounds
            ]
            if ours and theirs:
                ratio = ours[0].per_second / theirs[0].per_second
                verdict = "ok" if ratio >= limit else "MISSED"
                target = f"SQLite {ours[0].writers} {writer} >= {limit}x SQLiteSession's tasks"
                lines.append(f"{verdict:6}  {target}: {ratio:.2f}x")
    return lines


def _rate(row: WritersRow) -> str:
    """Writes per second, with how many rounds failed (a writer's error ends its round)."""
    if not row.failures:
        return f"{row.per_second:,.0f}"
    rounds = len(row.rounds) + len(row.failures)
    if not row.rounds:
        return f"failed ({len(row.failures)} of {rounds} rounds)"
    return f"{row.per_second:,.0f} ({len(row.failures)} of {rounds} rounds failed)"


def format_reports(reports: Sequence[PeerReport]) -> str:
    """The latency and writers tables of every report, as printed at the end of a run."""
    latency = [
        [
            report.peer,
            row.operation,
            f"{row.history:,}",
            milliseconds(row.chronica.median_ns),
            "-" if row.chronica_async is None else milliseconds(row.chronica_async.median_ns),
            milliseconds(row.peer_timing.median_ns),
            f"{row.ratio:.2f}",
            "-" if row.async_ratio is None else f"{row.async_ratio:.2f}",
            str(min(row.chronica.count, row.peer_timing.count)),
        ]
        for report in reports
        for row in report.latency
    ]
    writers = []
    for report in reports:
        for shared in (False, True):
            rows = [row for row in report.writers if row.shared is shared]
            peer_rows = [row for row in rows if row.writer.startswith("peer")]
            if not peer_rows:
                continue
            peer_row = peer_rows[0]
            for row in rows:
                if row.writer.startswith("peer"):
                    continue
                writers.append(
                    [
                        report.peer,
                        "one shared" if shared else "one each",
                        f"{row.writers} {row.writer}",
                        _rate(row),
                        f"{peer_row.writers} {peer_row.writer}",
                        _rate(peer_row),
                        f"{row.per_second / peer_row.per_second:.2f}"
                        if row.rounds and peer_row.rounds
                        else "-",
                    ]
                )
    parts = []
    if latency:
        header = ["peer", "operation", "history", "chronica ms", "async ms", "peer ms", "ratio"]
        header += ["async ratio", "calls"]
        parts.append(table(header, latency))
    if writers:
        header = ["peer", "sessions", "chronica", "acta/s", "peer", "items/s", "ratio"]
        parts.append(table(header, writers))
    targets = verdicts(reports)
    if targets:
        parts.append("\n".join(targets))
    return "\n\n".join(parts)


# --------------------------------------------------------------------------------------------
# A pairing: one peer and the Chronica store on its database


@dataclass(slots=True)
class Settings:
    """What to run (from the command line)."""

    peers: list[str]
    sizes: list[int]
    repeat: int
    warmup: int
    max_seconds: float
    writers: int
    writes: int
    writer_rounds: int
    postgres_url: str
    pool_size: int
    shared_writers: bool = True
    json_file: str | None = None


@dataclass(frozen=True, slots=True)
class Filled:
    """What one history size filled: the chronicum, its asyncio twin (memory only) and the peer's session."""

    size: int
    chronicum_id: str
    async_chronicum_id: str
    session_id: str


class Pairing:
    """Measures one peer beside the Chronica store on the same database.

    Args:
        peer_class: the peer.
        place: the database they share.
        settings: what to run.
        runner: the event loop every asyncio call of the run goes through.
    """

    def __init__(
        self, peer_class: type[Peer], place: Place, settings: Settings, runner: asyncio.Runner
    ) -> None:
        self.peer = peer_class(place)
        self.place = place
        self.settings = settings
        self.runner = runner
        self.report = PeerReport(
            peer=peer_class.key,
            title=peer_class.title,
            database=place.database,
            chronica_url=place.chronica_url,
            last_twenty=peer_class.last_twenty,
            asynchronous=peer_class.asynchronous,
            machine=machine(),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        self.store: Store | None = None
        self.chronicarius: Chronicarius | None = None
        self.async_store: AsyncStore | None = None
        self.async_chronicarius: AsyncChronicarius | None = None

    def note(self, text: str) -> None:
        """Add a line to the report's notes and show it now (on stderr)."""
        self.report.notes.append(text)
        print(f"  note: {text}", file=sys.stderr, flush=True)

    def run(self) -> PeerReport:
        """Fill, time and close; return the report."""
        began = time.perf_counter()
        url, options = self.place.chronica_url, self.place.chronica_options
        self.store = open_store(url, **options)
        self.chronicarius = Chronicarius(self.store)
        try:
            if registry().backend_for(url).open_async is not None:
                self.async_store = self.runner.run(_open_async(url, options))
                self.async_chronicarius = AsyncChronicarius(self.async_store)
            self.runner.run(self.peer.open())
            try:
                filled = [self._fill(size) for size in self.settings.sizes]
                if filled:
                    self._time("last 20", filled)
                    self._time("append", filled)
                if self.settings.writers > 0:
                    self._measure_writers(shared=False)
                    if self.settings.shared_writers and isinstance(self.peer, LangchainPostgresPeer):
                        self._measure_writers(shared=True)
            finally:
                self.runner.run(self.peer.close())
        finally:
            if self.async_store is not None:
                self.runner.run(self.async_store.close())
            self.store.close()
        self.report.seconds = round(time.perf_counter() - began, 1)
        print(f"  {self.peer.key}: done in {self.report.seconds:.0f} s", file=sys.stderr, flush=True)
        return self.report

    # -- filling ---------------------------------------------------------------------------

    def _fill(self, size: int) -> Filled:
        """Fill a chronicum (two on memory: the asyncio store is another store) and a peer session."""
        print(f"  {self.peer.key}: filling {size:,}", file=sys.stderr, flush=True)
        began = time.perf_counter()
        chronicum_id = fresh_id(f"peers-{size}")
        acta = history(chronicum_id, size)
        async_chronicum_id = chronicum_id
        if self.place.database == "memory":
            assert self.chronicarius is not None
            for actum in acta:
                self.chronicarius.record_actum(OWNER, actum)
            if self.async_chronicarius is not None:
                async_chronicum_id = fresh_id(f"peers-{size}-async")
                self.runner.run(_fill_async(self.async_chronicarius, history(async_chronicum_id, size)))
        else:
            baseline = _chronica_loader(self.place)
            try:
                baseline.prepare(chronicum_id, OWNER)
                baseline.fill(chronicum_id, acta)
            finally:
                baseline.close()
        assert self.chronicarius is not None
        self.chronicarius.get_acta(OWNER, chronicum_id, last_n=1)  # the owner cache, warm
        if self.async_chronicarius is not None:
            self.runner.run(self.async_chronicarius.get_acta(OWNER, async_chronicum_id, last_n=1))
        session_id = str(uuid.uuid4())
        self.runner.run(self.peer.fill(session_id, size))
        print(f"  {self.peer.key}: filled {size:,} in {time.perf_counter() - began:.1f} s", file=sys.stderr)
        return Filled(size, chronicum_id, async_chronicum_id, session_id)

    # -- latency ---------------------------------------------------------------------------

    def _time(self, operation: str, chronica: list[Filled]) -> None:
        """Time ``operation`` for Chronica and the peer at every size, all in the same rounds."""
        assert self.chronicarius is not None
        chronicarius, peer = self.chronicarius, self.peer
        blocking: dict[str, Callable[[int], object]] = {}
        awaited: dict[str, Callable[[int], Awaitable[object]]] = {}
        for filled in chronica:
            size, chronicum_id, session_id = filled.size, filled.chronicum_id, filled.session_id
            async_id = filled.async_chronicum_id
            if operation == "last 20":
                self._check_windows(size, chronicum_id, session_id)
                blocking[f"{size} chronica"] = _chronica_reader(chronicarius, chronicum_id)
                if self.async_chronicarius is not None:
                    awaited[f"{size} async"] = _async_chronica_reader(self.async_chronicarius, async_id)
                if peer.asynchronous:
                    awaited[f"{size} peer"] = _async_peer_reader(peer, session_id)
                else:
                    blocking[f"{size} peer"] = _peer_reader(peer, session_id)
            else:
                blocking[f"{size} chronica"] = _chronica_appender(chronicarius, chronicum_id)
                if self.async_chronicarius is not None:
                    awaited[f"{size} async"] = _async_chronica_appender(self.async_chronicarius, async_id)
                if peer.asynchronous:
                    awaited[f"{size} peer"] = _async_peer_appender(peer, session_id)
                else:
                    blocking[f"{size} peer"] = _peer_appender(peer, session_id)
        print(f"  {peer.key}: timing {operation}", file=sys.stderr, flush=True)
        timings = self.runner.run(
            time_interleaved(
                blocking, self.settings.warmup, self.settings.repeat, awaited, self.settings.max_seconds
            )
        )
        count = min(timing.count for timing in timings.values())
        if count < self.settings.repeat:
            self.note(
                f"{operation}: {count} timed calls per column, not {self.settings.repeat} (--max-seconds)"
            )
        for size in (filled.size for filled in chronica):
            self.report.latency.append(
                LatencyRow(
                    peer.key,
                    operation,
                    size,
                    timings[f"{size} chronica"],
                    timings.get(f"{size} async"),
                    timings[f"{size} peer"],
                )
            )

    def _check_windows(self, size: int, chronicum_id: str, session_id: str) -> None:
        """Both sides read the same number of items before they are timed (else a note)."""
        assert self.chronicarius is not None
        expected = min(LAST_N, size)
        got = len(self.chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N))
        peer_got = (
            self.runner.run(self.peer.aread(session_id))
            if self.peer.asynchronous
            else self.peer.read(session_id)
        )
        if got != expected or peer_got != expected:
            self.note(
                f"history {size}: last 20 read {got} acta and {peer_got} peer items, expected {expected}"
            )

    # -- many writers ----------------------------------------------------------------------

    def _measure_writers(self, *, shared: bool) -> None:
        """Chronica's writer threads and tasks against the peer's writers, rounds interleaved."""
        assert self.chronicarius is not None
        count, writes = self.settings.writers, self.settings.writes
        label = "one shared session" if shared else "a session each"
        print(f"  {self.peer.key}: {count} writers x {writes} writes, {label}", file=sys.stderr, flush=True)
        contenders: dict[str, Callable[[], float]] = {"chronica threads": self._chronica_threads(shared)}
        if self.async_chronicarius is not None:
            contenders["chronica tasks"] = self._chronica_tasks(shared)
        peer_writer = "peer tasks" if self.peer.asynchronous else "peer threads"
        contenders[peer_writer] = self._peer_writers(shared)
        if isinstance(self.peer, LangchainPostgresPeer):
            self.peer.open_pool()
        rates: dict[str, list[float]] = {name: [] for name in contenders}
        failures: dict[str, list[str]] = {name: [] for name in contenders}
        names = list(contenders)
        for round_number in range(self.settings.writer_rounds):
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                try:
                    seconds = contenders[name]()
                except RuntimeError as error:  # a writer failed: the round says why, the others go on
                    cause = error.__cause__ if error.__cause__ is not None else error
                    failures[name].append(f"{type(cause).__name__}: {cause}".splitlines()[0])
                    self.note(f"{count} {name}, {label}, round {round_number + 1}: {failures[name][-1]}")
                    continue
                rates[name].append(count * writes / seconds)
        if isinstance(self.peer, LangchainPostgresPeer):
            self.peer.close_pool()
        for name, values in rates.items():
            self.report.writers.append(
                WritersRow(
                    self.peer.key,
                    shared,
                    name,
                    count,
                    statistics.median(values) if values else 0.0,
                    values,
                    failures[name],
                )
            )

    def _chronica_threads(self, shared: bool) -> Callable[[], float]:
        chronicarius = self.chronicarius
        assert chronicarius is not None
        count, writes, warmup = self.settings.writers, self.settings.writes, 2

        def measure() -> float:
            shared_id = fresh_id("peers-shared")
            chronicarius.record_actum(OWNER, story_actum(shared_id, 0))

            def make_writer(index: int) -> tuple[Writer, Closer]:
                chronicum_id = shared_id if shared else fresh_id(f"peers-writer-{index}")
                acta = [story_actum(chronicum_id, number) for number in range(warmup + writes)]
                return (lambda number: chronicarius.record_actum(OWNER, acta[number])), _nothing

            return run_threads(count, make_writer, warmup, writes)

        return measure

    def _chronica_tasks(self, shared: bool) -> Callable[[], float]:
        chronicarius = self.async_chronicarius
        assert chronicarius is not None
        count, writes, warmup = self.settings.writers, self.settings.writes, 2

        def measure() -> float:
            shared_id = fresh_id("peers-shared-async")
            self.runner.run(chronicarius.record_actum(OWNER, story_actum(shared_id, 0)))

            def make_writer(index: int) -> AsyncWriter:
                chronicum_id = shared_id if shared else fresh_id(f"peers-task-{index}")
                acta = [story_actum(chronicum_id, number) for number in range(warmup + writes)]
                return lambda number: chronicarius.record_actum(OWNER, acta[number])

            return self.runner.run(run_tasks(count, make_writer, warmup, writes))

        return measure

    def _peer_writers(self, shared: bool) -> Callable[[], float]:
        peer = self.peer
        count, writes, warmup = self.settings.writers, self.settings.writes, 2

        def session_ids() -> list[str]:
            if shared:
                return [str(uuid.uuid4())] * count
            return [str(uuid.uuid4()) for _ in range(count)]

        if peer.asynchronous:

            def measure_tasks() -> float:
                ids = session_ids()
                for session_id in set(ids):
                    self.runner.run(peer.new_session(session_id))

                def make_writer(index: int) -> AsyncWriter:
                    return lambda number: peer.aappend(ids[index], number)

                return self.runner.run(run_tasks(count, make_writer, warmup, writes))

            return measure_tasks

        append = peer.pooled_append if isinstance(peer, LangchainPostgresPeer) else peer.append

        def measure_threads() -> float:
            ids = session_ids()
            for session_id in set(ids):
                self.runner.run(peer.new_session(session_id))

            def make_writer(index: int) -> tuple[Writer, Closer]:
                return (lambda number: append(ids[index], number)), _nothing

            return run_threads(count, make_writer, warmup, writes)

        return measure_threads


def _nothing() -> None:
    """A writer's closer when it opened nothing of its own."""


async def _fill_async(chronicarius: AsyncChronicarius, acta: Sequence[Actum]) -> None:
    """Record ``acta`` one by one through the asyncio store (memory: it has no bulk load)."""
    for actum in acta:
        await chronicarius.record_actum(OWNER, actum)


async def _open_async(url: str, options: dict[str, str]) -> AsyncStore:
    """Open the asyncio store inside the run's event loop."""
    return open_async_store(url, **options)


def _chronica_loader(place: Place) -> Any:
    """The raw baseline that bulk-loads Chronica's own tables on ``place``'s database."""
    if place.database == "postgresql":
        from benchmarks.baselines.postgres import RawBaseline as PostgresBaseline

        return PostgresBaseline(place.chronica_url, **place.chronica_options)
    from benchmarks.baselines.sqlalchemy import RawBaseline as SQLAlchemyBaseline

    return SQLAlchemyBaseline(place.chronica_url, **place.chronica_options)


def _chronica_reader(chronicarius: Chronicarius, chronicum_id: str) -> Callable[[int], object]:
    return lambda _: chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N)


def _async_chronica_reader(
    chronicarius: AsyncChronicarius, chronicum_id: str
) -> Callable[[int], Awaitable[object]]:
    return lambda _: chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N)


def _chronica_appender(chronicarius: Chronicarius, chronicum_id: str) -> Callable[[int], object]:
    return lambda number: chronicarius.record_actum(OWNER, story_actum(chronicum_id, number))


def _async_chronica_appender(
    chronicarius: AsyncChronicarius, chronicum_id: str
) -> Callable[[int], Awaitable[object]]:
    return lambda number: chronicarius.record_actum(OWNER, story_actum(chronicum_id, number))


def _peer_reader(peer: Peer, session_id: str) -> Callable[[int], object]:
    return lambda _: peer.read(session_id)


def _async_peer_reader(peer: Peer, session_id: str) -> Callable[[int], Awaitable[object]]:
    return lambda _: peer.aread(session_id)


def _peer_appender(peer: Peer, session_id: str) -> Callable[[int], object]:
    return lambda number: peer.append(session_id, number)


def _async_peer_appender(peer: Peer, session_id: str) -> Callable[[int], Awaitable[object]]:
    return lambda number: peer.aappend(session_id, number)


# --------------------------------------------------------------------------------------------
# Throw-away places


class Places:
    """Makes each pairing's database and removes all of them at the end.

    SQLite: one file per pairing in a temporary folder (Chronica's tables and the peer's side by
    side). PostgreSQL: one schema per run (Chronica's tables and every peer's side by side: their
    names do not clash), dropped with everything in it.

    Args:
        settings: the run's settings (server URL, pool size).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.folder = tempfile.mkdtemp(prefix="chronica-peers-")
        self.schema = f"chronica_peers_{uuid.uuid4().hex[:8]}"
        self.schema_made = False

    def place(self, peer_class: type[Peer]) -> Place:
        """The database ``peer_class`` runs on, with the Chronica store's URL on it."""
        size = self.settings.pool_size
        if peer_class.database == "sqlite":
            path = str(Path(self.folder) / f"{peer_class.key}.db")
            return Place("sqlite", f"sqlite:///{path}", sqlite_path=path, pool_size=size)
        if peer_class.database == "postgresql":
            self.schema_made = True
            url = self.settings.postgres_url
            options = {"schema": self.schema, "max_size": str(size)}
            return Place("postgresql", url, options, postgres_url=url, schema=self.schema, pool_size=size)
        return Place("memory", "memory://", pool_size=size)

    def remove(self) -> None:
        """Drop the schema (if a pairing made it) and delete the SQLite files."""
        shutil.rmtree(self.folder, ignore_errors=True)
        if not self.schema_made:
            return
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.settings.postgres_url, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )


# --------------------------------------------------------------------------------------------
# Command line


def _positive_counts(text: str, option: str) -> list[int]:
    try:
        values = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or any(value <= 0 for value in values):
        raise argparse.ArgumentTypeError(
            f"{option} wants positive whole numbers separated by commas, got {text!r}"
        )
    return values


def parse_arguments(argv: Sequence[str] | None) -> Settings:
    """Read the command line into :class:`Settings`.

    Args:
        argv: the arguments (``None``: ``sys.argv[1:]``).

    Returns:
        The settings, peers in the order given (``--peers``), every peer by default.

    Raises:
        SystemExit: with status 2 and a message naming the option, for an unknown peer, a size
            that is not a positive whole number, or any other bad option (argparse's behaviour).
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers",
        description="Chronica beside other agent frameworks' session stores, on the same databases.",
    )
    parser.add_argument(
        "--peers",
        default=",".join(PEERS),
        help=f"comma-separated, some of {','.join(PEERS)} (default: all)",
    )
    parser.add_argument("--sizes", default=",".join(str(size) for size in SIZES), help="history sizes")
    parser.add_argument("--repeat", type=int, default=200, help="timed calls per column and size")
    parser.add_argument("--warmup", type=int, default=10, help="untimed rounds first")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=15.0,
        help="time budget of each timed phase per peer (never below 10 rounds)",
    )
    parser.add_argument(
        "--writers", type=int, default=40, help="writer threads or tasks (0: no writers phase)"
    )
    parser.add_argument("--writes", type=int, default=10, help="timed writes per writer and round")
    parser.add_argument(
        "--writer-rounds", type=int, default=3, help="interleaved rounds of the writers phase"
    )
    parser.add_argument("--no-shared", action="store_true", help="skip writers on one shared session")
    parser.add_argument("--postgres-url", default=os.environ.get("CHRONICA_TEST_POSTGRES_URL", POSTGRES_URL))
    parser.add_argument(
        "--pool-size",
        type=int,
        default=POOL_SIZE,
        help="server connections each pool may hold (Chronica's blocking and asyncio stores, the peer)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the reports as JSON to FILE")
    arguments = parser.parse_args(argv)
    peers = [name.strip() for name in arguments.peers.split(",") if name.strip()]
    unknown = [name for name in peers if name not in PEERS]
    if unknown or not peers:
        parser.error(f"--peers wants some of {','.join(PEERS)}, got {arguments.peers!r}")
    try:
        sizes = _positive_counts(arguments.sizes, "--sizes")
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    for option in ("repeat", "writes", "writer_rounds", "pool_size"):
        if getattr(arguments, option) <= 0:
            parser.error(f"--{option.replace('_', '-')} wants a positive number")
    settings = Settings(
        peers=peers,
        sizes=sorted(set(sizes)),
        repeat=arguments.repeat,
        warmup=max(0, arguments.warmup),
        max_seconds=arguments.max_seconds,
        writers=max(0, arguments.writers),
        writes=arguments.writes,
        writer_rounds=arguments.writer_rounds,
        postgres_url=arguments.postgres_url,
        pool_size=arguments.pool_size,
        shared_writers=not arguments.no_shared,
        json_file=arguments.json,
    )
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    """Run every chosen peer; print the tables; return 0, or 1 when a peer failed.

    A failing peer (its package missing, its server down) becomes a line on stderr and the run
    goes on with the others.
    """
    settings = parse_arguments(argv)
    began = time.perf_counter()
    print(f"{machine()}; sizes {settings.sizes}; peers {','.join(settings.peers)}", file=sys.stderr)
    reports: list[PeerReport] = []
    failed = False
    places = Places(settings)
    try:
        with asyncio.Runner() as runner:
            for key in settings.peers:
                peer_class = PEERS[key]
                try:
                    reports.append(Pairing(peer_class, places.place(peer_class), settings, runner).run())
                except Exception as error:  # noqa: BLE001 - one peer's failure must not hide the others
                    failed = True
                    print(f"{key}: failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
    finally:
        places.remove()
    print(format_reports(reports))
    print(f"\n{machine()} at the end; {time.perf_counter() - began:.0f} s in all")
    if settings.json_file:
        Path(settings.json_file).write_text(json.dumps([report.as_json() for report in reports], indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
