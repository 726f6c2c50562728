"""Chronica for the OpenAI Agents SDK: :class:`ChronicaSession`, a ``Session`` kept in a chronicum.

Every item the SDK stores becomes one actum of the session's chronicum, its content the item's
JSON, so a turn's items sit next to what other agents and the person wrote, under the owner's
rules: see :mod:`chronica_openai_agents.session` and this distribution's README.
"""

from chronica_openai_agents.mapping import POP_ACTOR, item_actum, item_of_actum, tombstone_target
from chronica_openai_agents.session import ChronicaSession

__all__ = ["POP_ACTOR", "ChronicaSession", "item_actum", "item_of_actum", "tombstone_target"]
