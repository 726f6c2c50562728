"""The dinner story across frameworks: a person and two agents on different frameworks, one chronicum.

- ardian, the person, writes with the ``chronica`` command line;
- the concierge runs on the OpenAI Agents SDK (chronica-openai-agents' ``ChronicaSession``);
- the booking agent runs on Google ADK (chronica-adk's ``ChronicaSessionService``);
- the search agent runs on pydantic-ai (chronica-pydantic-ai's ``ChronicaHistory``).

Each agent's model is scripted (no network, no API key) and prints what it was shown: the
others' messages, as messages, in the order they were written. Then ``chronica acta`` prints the
conversation as the person reads it, and ``chronica erase --all`` erases everything of the person.

Run it with a store the command line can open too (it runs in its own process):

    python examples/dinner_across_frameworks.py                        # a SQLite file in a temporary folder
    python examples/dinner_across_frameworks.py postgresql://app@db/app

It needs chronica-openai-agents, chronica-adk, chronica-pydantic-ai and the store's backend
(chronica-sqlalchemy for the default).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, TResponseInputItem, Usage
from agents.items import TResponseStreamEvent
from chronica_adk import ChronicaSessionService, SessionKey
from chronica_openai_agents import ChronicaSession
from chronica_pydantic_ai import ChronicaHistory
from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner as AdkRunner
from google.genai import types
from openai.types.responses import ResponseOutputMessage, ResponseOutputText
from pydantic import Field
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelRequest, TextPart, UserPromptPart
from pydantic_ai.messages import ModelResponse as PydanticResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from chronica_core import AsyncChronicarius, open_async_store

OWNER = "ardian"
APP, SESSION = "dinner", "friday"
DINNER = SessionKey(APP, OWNER, SESSION).chronicum_id
"""The one chronicum: ADK names it after (app, person, session); everyone else writes to it by id."""


def chronica(url: str, *arguments: str) -> str:
    """Run the ``chronica`` command line, as the person would in a shell; return what it prints."""
    done = subprocess.run(
        [sys.executable, "-m", "chronica_core", *arguments, "--store", url],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def person_says(url: str, text: str) -> None:
    """The person writes a message into the chronicum with ``chronica record``."""
    arguments = ["--kind", "message", "--actor-kind", "human", "--actor", OWNER, "--content", text]
    chronica(url, "record", DINNER, "--owner", OWNER, *arguments)


def show(name: str, lines: list[str]) -> None:
    """Print what an agent's model was shown, one message a line."""
    print(f"{name}'s model reads:")
    for line in lines:
        print(f"    {line}")


class ConciergeModel(Model):
    """The concierge's scripted model (OpenAI Agents SDK): prints its input, answers from a script."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        """Print the input, then answer with the next scripted text."""
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        show("concierge", [f"{item.get('role')}: {_item_text(item)}" for item in items])
        text = ResponseOutputText(type="output_text", text=self.answers.pop(0), annotations=[])
        message = ResponseOutputMessage(
            id="msg", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        """Not used here: the runs do not stream."""
        raise NotImplementedError("the scripted model does not stream")


def _item_text(item: Any) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content or [])


class BookingModel(BaseLlm):
    """The booking agent's scripted model (ADK): prints its request, answers from a script."""

    model: str = "scripted"
    answers: list[str] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """Print the request's contents, then answer with the next scripted text."""
        lines = [
            f"{content.role}: {' '.join(part.text or '' for part in content.parts or [])}"
            for content in llm_request.contents
        ]
        show("booking", lines)
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=self.answers.pop(0))]))


async def concierge_turn(session: ChronicaSession, agent: Agent[Any]) -> None:
    """The concierge answers what the chronicum holds (no new input: the person wrote it already)."""
    await Runner.run(agent, [], session=session, run_config=RunConfig(tracing_disabled=True))


async def booking_turn(runner: AdkRunner) -> None:
    """The booking agent answers what the chronicum holds (no new message: others wrote it)."""
    async for _ in runner.run_async(user_id=OWNER, session_id=SESSION):
        pass


def search_model(messages: list[ModelMessage], info: AgentInfo) -> PydanticResponse:
    """The search agent's scripted model (pydantic-ai): prints its messages, answers one line."""
    lines = []
    for message in messages:
        role = "user" if isinstance(message, ModelRequest) else "model"
        texts = [part.content for part in message.parts if isinstance(part, (UserPromptPart, TextPart))]
        lines += [f"{role}: {text}" for text in texts if isinstance(text, str)]
    show("search", lines)
    return PydanticResponse(parts=[TextPart("Rumah Teduh in Kemang has a quiet table at 7pm.")])


async def search_turn(keeper: AsyncChronicarius) -> None:
    """The search agent answers what the chronicum holds: load a window, run, save the new messages."""
    history = ChronicaHistory(DINNER, keeper, owner_id=OWNER, actor="search")
    result = await PydanticAgent(FunctionModel(search_model)).run(
        message_history=await history.load(last_n=20)
    )
    await history.save(result.new_messages(), idempotency_key=result.run_id)


async def agents(url: str) -> None:
    """The agents' part of the story, in one asyncio loop, on one store."""
    async with open_async_store(url) as store:
        keeper = AsyncChronicarius(store)
        concierge = Agent(
            name="concierge",
            model=ConciergeModel(
                [
                    "Rumah Teduh has a quiet table at 7pm; booking, please reserve it.",
                    "Noted: five people. Booking, please change it.",
                ]
            ),
        )
        session = ChronicaSession(DINNER, keeper, owner_id=OWNER, actor="concierge")
        service = ChronicaSessionService(keeper)
        booking = AdkRunner(
            agent=LlmAgent(
                name="booking",
                model=BookingModel(answers=["Booked Rumah Teduh, Friday 7pm, for four.", "Changed: five."]),
            ),
            app_name=APP,
            session_service=service,
        )
        await service.create_session(app_name=APP, user_id=OWNER, session_id=SESSION)
        person_says(url, "A quiet table for four, Friday 7pm.")
        await search_turn(keeper)
        await concierge_turn(session, concierge)
        await booking_turn(booking)
        person_says(url, "Actually make it five people")
        await concierge_turn(session, concierge)
        await booking_turn(booking)


def main(url: str) -> None:
    """Play the story, print the chronicum as the person reads it, then erase the person."""
    chronica(url, "migrate")
    asyncio.run(agents(url))
    print("chronica acta:")
    print(chronica(url, "acta", DINNER, "--owner", OWNER), end="")
    print(chronica(url, "erase", "--owner", OWNER, "--all", "--yes"), end="")
    print(chronica(url, "list", "--owner", OWNER), end="")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(f"sqlite:///{Path(folder) / 'dinner.db'}")
