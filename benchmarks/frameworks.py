"""One framework turn with a Chronica store beside the same turn with the framework's own SQLite store.

A turn is the framework's whole run with a scripted model (no network): read the session's
window, call the model, write the new items. For each framework, size and store, a session is
first filled with ``size`` items through the store's own API; then turns are timed in rounds,
the stores in a shuffled order each round (seed printed), and the medians printed with their
ratio (Chronica / the framework's own). Nothing is asserted: the targets (a turn within 1.2x,
and flat from 100 to 10,000 items) are read off the table.

- OpenAI Agents SDK: ``Runner.run`` with ``SessionSettings(limit=WINDOW)``; ``SQLiteSession``
  against ``ChronicaSession``.
- Google ADK: ``Runner.run_async`` with ``GetSessionConfig(num_recent_events=WINDOW)``;
  ``DatabaseSessionService`` (``sqlite+aiosqlite``) and ``SqliteSessionService`` against
  ``ChronicaSessionService``.
- pydantic-ai is not here: it has no SQLite store of its own (its ``ConversationStore`` has
  only an in-memory implementation), so there is no turn to compare with.

Run: ``python -m benchmarks.frameworks [--sizes 100,10000] [--rounds 30] [--profile]`` with
chronica-openai-agents, chronica-adk and chronica-sqlalchemy installed
(the adk tox environment has them all). Files go to a temporary folder removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import logging
import pstats
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.timing import new_seed

WINDOW = 20
"""Items (events, messages) each turn reads back: the session's window."""

OWNER = "ardian"

CHRONICA_OPTIONS: dict[str, Any] = {}
"""The Chronica stores' options (``--synchronous`` sets SQLite's ``synchronous`` there)."""

Turn = Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class Prepared:
    """A filled session: its turn, its store operations timed on their own (``parts``), its closer."""

    turn: Turn
    parts: dict[str, Turn]
    close: Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Contender:
    """One store under one framework: its name, and how to open a filled session's turn."""

    framework: str
    store: str
    chronica: bool
    prepare: Callable[[Path, int], Awaitable[Prepared]]


# -- OpenAI Agents SDK ---------------------------------------------------------------------------


def _agents_model() -> Any:
    from agents import Model, ModelResponse, Usage
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    class Scripted(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            text = ResponseOutputText(type="output_text", text="Booked.", annotations=[])
            message = ResponseOutputMessage(
                id="msg", type="message", role="assistant", status="completed", content=[text]
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError

    return Scripted()


async def _agents_turn(session: Any, size: int) -> Prepared:
    from agents import Agent, RunConfig, Runner, SessionSettings

    await session.add_items(
        [{"role": "user" if n % 2 == 0 else "assistant", "content": f"item {n}"} for n in range(size)]
    )
    agent = Agent(name="concierge", model=_agents_model())
    config = RunConfig(tracing_disabled=True, session_settings=SessionSettings(limit=WINDOW))

    async def turn() -> object:
        return await Runner.run(agent, "And for five?", session=session, run_config=config)

    async def read() -> object:
        return await session.get_items(WINDOW)

    async def append() -> object:
        return await session.add_items(
            [{"role": "user", "content": "And for five?"}, {"role": "assistant", "content": "Booked."}]
        )

    return Prepared(turn, {"get_items(20)": read, "add_items(2)": append}, _closer(session))


async def agents_own(folder: Path, size: int) -> Prepared:
    from agents import SQLiteSession

    return await _agents_turn(SQLiteSession(uuid.uuid4().hex, folder / "agents.db"), size)


async def agents_chronica(folder: Path, size: int) -> Prepared:
    from chronica_openai_agents import ChronicaSession

    url = f"sqlite:///{folder / 'chronica-agents.db'}"
    return await _agents_turn(
        ChronicaSession(
            uuid.uuid4().hex, url, owner_id=OWNER, actor="concierge", store_options=CHRONICA_OPTIONS
        ),
        size,
    )


# -- Google ADK ----------------------------------------------------------------------------------


def _adk_runner(service: Any) -> Any:
    from google.adk.agents import LlmAgent
    from google.adk.models import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner
    from google.genai import types

    class Scripted(BaseLlm):
        model: str = "scripted"

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Booked.")]))

    return Runner(agent=LlmAgent(name="booking", model=Scripted()), app_name="bench", session_service=service)


async def _adk_turn(service: Any, size: int) -> Prepared:
    from google.adk.agents.run_config import RunConfig
    from google.adk.events import Event
    from google.adk.sessions.base_session_service import GetSessionConfig
    from google.genai import types

    session_id = uuid.uuid4().hex
    session = await service.create_session(app_name="bench", user_id=OWNER, session_id=session_id)
    for n in range(size):
        author = "user" if n % 2 == 0 else "booking"
        content = types.Content(role="user" if n % 2 == 0 else "model", parts=[types.Part(text=f"event {n}")])
        await service.append_event(session, Event(author=author, invocation_id=f"fill-{n}", content=content))
    runner = _adk_runner(service)
    config = RunConfig(get_session_config=GetSessionConfig(num_recent_events=WINDOW))
    message = types.Content(role="user", parts=[types.Part(text="And for five?")])

    async def turn() -> object:
        async for _ in runner.run_async(
            user_id=OWNER, session_id=session_id, new_message=message, run_config=config
        ):
            pass
        return None

    async def read() -> object:
        return await service.get_session(
            app_name="bench", user_id=OWNER, session_id=session_id, config=config.get_session_config
        )

    async def read_append() -> object:
        fresh = await read()
        event = Event(author="user", invocation_id="part", content=message)
        return await service.append_event(fresh, event)

    return Prepared(
        turn, {"get_session(20)": read, "get_session(20)+append_event": read_append}, _closer(service)
    )


async def adk_database(folder: Path, size: int) -> Prepared:
    from google.adk.sessions import DatabaseSessionService

    return await _adk_turn(DatabaseSessionService(f"sqlite+aiosqlite:///{folder / 'adk-db.db'}"), size)


async def adk_sqlite(folder: Path, size: int) -> Prepared:
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    return await _adk_turn(SqliteSessionService(str(folder / "adk-sqlite.db")), size)


async def adk_chronica(folder: Path, size: int) -> Prepared:
    from chronica_adk import ChronicaSessionService

    return await _adk_turn(
        ChronicaSessionService(f"sqlite:///{folder / 'chronica-adk.db'}", store_options=CHRONICA_OPTIONS),
        size,
    )


def _closer(thing: Any) -> Callable[[], Awaitable[None]]:
    async def close() -> None:
        result = thing.close()
        if asyncio.iscoroutine(result):
            await result

    return close


CONTENDERS = (
    Contender("openai-agents", "SQLiteSession", False, agents_own),
    Contender("openai-agents", "ChronicaSession (SQLite)", True, agents_chronica),
    Contender("adk", "DatabaseSessionService (sqlite+aiosqlite)", False, adk_database),
    Contender("adk", "SqliteSessionService", False, adk_sqlite),
    Contender("adk", "ChronicaSessionService (SQLite)", True, adk_chronica),
)


async def measure(
    contenders: Sequence[Contender], size: int, rounds: int, rng: random.Random, folder: Path, profile: bool
) -> dict[str, float]:
    """Fill each contender's session with ``size`` items, then time ``rounds`` rounds of turns.

    Returns the medians in milliseconds, keyed ``"<store>|turn"`` and ``"<store>|<part>"`` (a
    store operation of the turn timed on its own after it).
    """
    prepared = [(contender, await contender.prepare(folder, size)) for contender in contenders]
    for _, ready in prepared:  # one warm-up turn each (imports, first connections, caches)
        await ready.turn()
    times: dict[str, list[float]] = {}
    profiler = cProfile.Profile() if profile else None
    for _ in range(rounds):
        for contender, ready in rng.sample(prepared, len(prepared)):
            for name, call in [("turn", ready.turn), *ready.parts.items()]:
                if profiler is not None and contender.chronica and name == "turn":
                    profiler.enable()
                started = time.perf_counter()
                await call()
                times.setdefault(f"{contender.store}|{name}", []).append(
                    (time.perf_counter() - started) * 1000
                )
                if profiler is not None:
                    profiler.disable()
    for _, ready in prepared:
        await ready.close()
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
        print(text.getvalue())
    return {key: statistics.median(values) for key, values in times.items()}


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options, run every framework at every size, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,10000", help="items per session, comma-separated")
    parser.add_argument("--rounds", type=int, default=30, help="timed turns per store and size")
    parser.add_argument("--frameworks", default="openai-agents,adk")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--synchronous", default=None, help="SQLite's synchronous for the Chronica stores (default FULL)"
    )
    parser.add_argument("--profile", action="store_true", help="profile Chronica's turns (cProfile)")
    options = parser.parse_args(argv)
    if options.synchronous is not None:
        CHRONICA_OPTIONS["synchronous"] = options.synchronous
    logging.getLogger("google_adk").setLevel(logging.ERROR)  # "missing token usage" on every turn
    seed = new_seed() if options.seed is None else options.seed
    print(f"seed {seed}; window {WINDOW} items; {options.rounds} rounds; medians in ms; {CHRONICA_OPTIONS}")
    rng = random.Random(seed)
    sizes = [int(size) for size in options.sizes.split(",")]
    results: dict[tuple[str, int], dict[str, float]] = {}
    for framework in options.frameworks.split(","):
        contenders = [contender for contender in CONTENDERS if contender.framework == framework]
        for size in sizes:
            with tempfile.TemporaryDirectory() as folder:
                medians = asyncio.run(
                    measure(contenders, size, options.rounds, rng, Path(folder), options.profile)
                )
            results[framework, size] = medians
            chronica = next(c.store for c in contenders if c.chronica)
            for key, median in medians.items():
                store, name = key.split("|")
                ratio = medians[key.replace(store, chronica, 1)] / median
                mark = "" if store == chronica else f"  Chronica / this: {ratio:.2f}x"
                print(f"{framework:14} {size:>6} {store:42} {name:30} {median:8.2f}{mark}")
    for framework in options.frameworks.split(","):
        chronica = next(c.store for c in CONTENDERS if c.framework == framework and c.chronica)
        flat = [results[framework, size][f"{chronica}|turn"] for size in sizes]
        print(f"{framework:14} Chronica turn from {sizes[0]} to {sizes[-1]} items: {flat[-1] / flat[0]:.2f}x")


if __name__ == "__main__":
    main()
