"""Chronica for pydantic-ai: an agent's message history kept in a chronicum.

:class:`ChronicaHistory` saves a run's messages (``result.new_messages()``) as one atomic batch
and loads a context window to pass back as ``message_history=``; each message is one actum whose
content is pydantic-ai's own JSON for it (:mod:`chronica_pydantic_ai.mapping`). See this
distribution's README.
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
