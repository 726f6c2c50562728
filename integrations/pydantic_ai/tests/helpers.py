"""What the history tests share: stores in their own event loop, and scripted models.

The models are pydantic-ai's own ``FunctionModel`` and ``TestModel``: nothing calls a real model
or the network.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence

from chronica_pydantic_ai import ChronicaHistory
from conftest import StoreTarget
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from chronica_core import AsyncChronicarius, AsyncStore, Chronicarius, Store, new_chronicum_id

OWNER = "ardian"
AGENT = "concierge"


def run_on(target: StoreTarget, body: Callable[[AsyncStore], Awaitable[None]]) -> None:
    """Open an asyncio store on ``target`` in a new event loop, run ``body`` with it, close it there."""

    async def main() -> None:
        store = target.open()
        try:
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


def history_on(
    store: AsyncStore | AsyncChronicarius | Store | Chronicarius,
    chronicum_id: str | None = None,
    *,
    owner_id: str = OWNER,
) -> ChronicaHistory:
    """A history of ``owner_id`` on ``store``; a fresh chronicum id unless one is given."""
    return ChronicaHistory(chronicum_id or new_chronicum_id(), store, owner_id=owner_id, actor=AGENT)


def round_tripped(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """What pydantic-ai's own adapter reads back from what it writes for ``messages``."""
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(list(messages)))


def as_json(messages: Sequence[ModelMessage]) -> bytes:
    """``messages`` as the adapter writes them, to compare byte for byte."""
    return ModelMessagesTypeAdapter.dump_json(list(messages))


class ToolLoop:
    """A ``FunctionModel`` script: think, call ``find_table`` ``calls`` times one after another,
    then answer; it keeps every list of messages it was sent (``seen``)."""

    def __init__(self, calls: int = 1, answer: str = "Rumah Teduh has a table.") -> None:
        self.calls = calls
        self.answer = answer
        self.seen: list[list[ModelMessage]] = []
        self.made = 0

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        if _returns_since_last_prompt(messages) < self.calls:
            self.made += 1
            return ModelResponse(
                parts=[
                    ThinkingPart("Search first."),
                    ToolCallPart("find_table", {"area": "Kemang", "party": 4}, f"call-{self.made}"),
                ]
            )
        return ModelResponse(parts=[TextPart(self.answer)])

    def agent(self) -> Agent[None, str]:
        """An agent on this script, with the ``find_table`` tool and a system prompt."""
        agent = Agent(FunctionModel(self.respond), system_prompt="Find tables; be brief.")

        @agent.tool_plain
        def find_table(area: str, party: int) -> str:
            """Find a quiet table."""
            return f"Rumah Teduh in {area} for {party}"

        return agent


def _returns_since_last_prompt(messages: Sequence[ModelMessage]) -> int:
    """How many tool results came after the newest user prompt."""
    count = 0
    for message in reversed(messages):
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                return count
            if isinstance(part, ToolReturnPart):
                count += 1
    return count


def pairs(messages: Sequence[ModelMessage]) -> Iterator[tuple[str, bool]]:
    """Each tool result's call id, with whether a response before it in ``messages`` made that call."""
    called: set[str] = set()
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                called.add(part.tool_call_id)
            elif isinstance(part, ToolReturnPart):
                yield part.tool_call_id, part.tool_call_id in called


def dangling(messages: Sequence[ModelMessage]) -> list[str]:
    """The ids of tool calls in ``messages`` that no later result answers."""
    open_calls: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                open_calls.append(part.tool_call_id)
            elif isinstance(part, ToolReturnPart) and part.tool_call_id in open_calls:
                open_calls.remove(part.tool_call_id)
    return open_calls
