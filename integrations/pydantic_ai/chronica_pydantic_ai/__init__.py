"""Chronica for pydantic-ai: an agent's messages kept in the chronicum a person shares with every agent.

:class:`ChronicaHistory` saves a run's messages (``result.new_messages()``) as one atomic batch
and loads a context window to pass back as ``message_history=``;
:class:`ChronicaConversationStore` is pydantic-ai's ``ConversationStore`` on Chronica, for
``agent.run(conversation=...)``. Each message is one actum with readable content and the
message's JSON as its native form; every other writer's actum is read too
(:mod:`chronica_pydantic_ai.mapping`). See this distribution's README.
"""

from chronica_core.readable import ForeignActa
from chronica_pydantic_ai.conversation_store import ChronicaConversationStore
from chronica_pydantic_ai.history import ChronicaHistory
from chronica_pydantic_ai.mapping import (
    NATIVE_FORMAT,
    SYSTEM_ACTOR,
    answers_a_call,
    message_actum,
    message_of_actum,
    message_text,
    window,
)

__all__ = [
    "NATIVE_FORMAT",
    "SYSTEM_ACTOR",
    "ChronicaConversationStore",
    "ChronicaHistory",
    "ForeignActa",
    "answers_a_call",
    "message_actum",
    "message_of_actum",
    "message_text",
    "window",
]
