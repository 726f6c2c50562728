"""Chronica for Strands Agents: :class:`ChronicaSessionManager` and :class:`ChronicaSessionRepository`.

A Strands session is one chronicum: every agent of the session writes its messages into it, next
to what other agents and the person wrote, under the owner's rules, and reads the whole
conversation back. See :mod:`chronica_strands.repository`, :mod:`chronica_strands.mapping` and
this distribution's README.
"""

from chronica_strands.manager import ChronicaSessionManager
from chronica_strands.mapping import MESSAGE_FORMAT, PART_FORMAT, STATE_ACTOR, foreign_message, message_parts
from chronica_strands.repository import ChronicaSessionRepository

__all__ = [
    "MESSAGE_FORMAT",
    "PART_FORMAT",
    "STATE_ACTOR",
    "ChronicaSessionManager",
    "ChronicaSessionRepository",
    "foreign_message",
    "message_parts",
]
