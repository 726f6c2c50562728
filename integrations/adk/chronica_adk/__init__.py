"""Chronica for Google ADK: :class:`ChronicaSessionService`, ADK's session service kept in chronica.

Every ADK session is one chronicum of the person (``user_id``), every event one actum with
readable content and the event's JSON as its native form, and the state lives in snapshots
read by one-actum context windows: see
:mod:`chronica_adk.service`, :mod:`chronica_adk.ids`, :mod:`chronica_adk.mapping` and this
distribution's README. :func:`register_session_services` lets ADK's command line open it from a
``chronica+URL``.
"""

from chronica_adk.ids import (
    InvalidSessionKey,
    SessionKey,
    app_state_id,
    legacy_owner,
    session_id_of,
    user_state_id,
)
from chronica_adk.mapping import (
    NATIVE_FORMAT,
    STATE_ACTOR,
    event_actum,
    event_kind,
    event_of_actum,
    event_text,
)
from chronica_adk.registry import register_session_services, session_service_from_url
from chronica_adk.service import ChronicaSessionService

__all__ = [
    "NATIVE_FORMAT",
    "STATE_ACTOR",
    "ChronicaSessionService",
    "InvalidSessionKey",
    "SessionKey",
    "app_state_id",
    "event_actum",
    "event_kind",
    "event_of_actum",
    "event_text",
    "legacy_owner",
    "register_session_services",
    "session_id_of",
    "session_service_from_url",
    "user_state_id",
]
