"""Chronica for the Microsoft Agent Framework: :class:`ChronicaHistoryProvider`.

A ``HistoryProvider`` whose messages live in one chronicum per agent session, next to what other
agents and the person wrote, under the owner's rules: see :mod:`chronica_agent_framework.history`,
:mod:`chronica_agent_framework.mapping` and this distribution's README.
"""

from chronica_agent_framework.history import ChronicaHistoryProvider
from chronica_agent_framework.mapping import NATIVE_FORMAT, PART_FORMAT, foreign_message, message_parts

__all__ = ["NATIVE_FORMAT", "PART_FORMAT", "ChronicaHistoryProvider", "foreign_message", "message_parts"]
