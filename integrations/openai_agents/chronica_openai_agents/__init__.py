"""Chronica for the OpenAI Agents SDK: :class:`ChronicaSession`, a ``Session`` kept in a chronicum.

Every item the SDK stores becomes one actum of the session's chronicum, its content readable text
and the item itself its native form, so a turn's items sit next to what other agents and the
person wrote, and those read back as messages: see :mod:`chronica_openai_agents.session`,
:mod:`chronica_openai_agents.mapping` and this distribution's README.
"""

from chronica_openai_agents.mapping import (
    NATIVE_FORMAT,
    POP_ACTOR,
    item_actum,
    item_of_actum,
    item_text,
    tombstone_target,
)
from chronica_openai_agents.session import ChronicaSession

__all__ = [
    "NATIVE_FORMAT",
    "POP_ACTOR",
    "ChronicaSession",
    "item_actum",
    "item_of_actum",
    "item_text",
    "tombstone_target",
]
