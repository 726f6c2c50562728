"""A model that answers from a script, so that a ``Runner`` turn needs no network and no API key."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field


def say(text: str) -> list[types.Part]:
    """The model's final answer ``text``."""
    return [types.Part(text=text)]


def call(name: str, arguments: dict[str, Any], call_id: str) -> list[types.Part]:
    """A call of the function tool ``name``."""
    return [types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=arguments))]


class ScriptedLlm(BaseLlm):
    """Answers each model call with the next list of parts; keeps every request it was given."""

    model: str = "scripted"
    script: list[list[types.Part]] = Field(default_factory=list)
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request.model_copy(deep=True))
        if not self.script:
            raise AssertionError("the model was called more often than the script says")
        yield LlmResponse(content=types.Content(role="model", parts=self.script.pop(0)))
