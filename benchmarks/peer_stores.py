"""The peers: other agent frameworks' session stores, each driven through its own API.

Each :class:`Peer` is paired by ``benchmarks.peers`` with the Chronica store on the same
database (:class:`Place`): the same SQLite file, the same PostgreSQL schema, or memory. Adding a
peer is a class here (its key, title, database, fill, read and append) and its entry in
:data:`PEERS`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.acta import LAST_N, OWNER
from chronica_core import ActorKind
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
