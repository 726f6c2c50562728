"""How ADK's ``(app_name, user_id, session_id)`` becomes Chronica owners and chronicum ids.

Every name is written as a length-prefixed part, ``<number of characters>:<text>``, after the
prefix ``adk``, the parts joined by ``:``. Such a code is read back from the left without any
escaping, so no two different keys give the same string, whatever characters the names hold
(``:`` included), and an app's, a user's and a session's strings never equal one another:

| what | owner | chronicum id |
| --- | --- | --- |
| a session | ``adk:5:hotel:6:ardian`` | ``adk:5:hotel:6:ardian:3:s-1`` |
| a user's state (``user:`` keys) | ``adk:5:hotel:6:ardian`` | ``adk:5:hotel:6:ardian`` |
| an app's state (``app:`` keys) | ``adk:5:hotel`` | ``adk:5:hotel`` |

The owner of a session is therefore the pair (app, user): two apps never see each other's
sessions of one person, as in ADK. Chronica ids and owners hold at most 255 characters
(:data:`chronica_core.MAX_ID_LENGTH`); a key whose code is longer is refused with
:class:`InvalidSessionKey` before anything is read or written.
"""

from __future__ import annotations

from chronica_core import MAX_ID_LENGTH, ChronicaError

__all__ = [
    "InvalidSessionKey",
    "SessionKey",
    "app_state_id",
    "session_id_of",
    "user_owner",
]

PREFIX = "adk"


class InvalidSessionKey(ChronicaError, ValueError):
    """An ADK app name, user id or session id that Chronica cannot hold; nothing was read or written.

    Attributes:
        field: ``"app_name"``, ``"user_id"`` or ``"session_id"``.
        reason: what was wrong with it.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"invalid ADK session key: {field}: {reason}")


def _part(text: object, field: str) -> str:
    """Return ``text`` as one length-prefixed part, or raise naming ``field``."""
    if not isinstance(text, str):
        raise InvalidSessionKey(field, f"must be a str, not {type(text).__name__}")
    if not text:
        raise InvalidSessionKey(field, "must not be empty")
    if "\x00" in text:
        raise InvalidSessionKey(field, "must not contain NUL")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise InvalidSessionKey(field, f"cannot be encoded as UTF-8 ({error.reason})") from None
    return f"{len(text)}:{text}"


def _fitting(code: str, field: str) -> str:
    if len(code) > MAX_ID_LENGTH:
        raise InvalidSessionKey(
            field,
            f"the app name, user id and session id take {len(code)} characters as a Chronica id "
            f"({code[:40]!r}...), more than {MAX_ID_LENGTH}; use shorter ones",
        )
    return code


def app_state_id(app_name: str) -> str:
    """Return the owner and chronicum id of ``app_name``'s ``app:`` state (``adk:<n>:<app>``).

    Raises:
        InvalidSessionKey: ``app_name`` is empty, not text, holds NUL, or is too long.
    """
    return _fitting(f"{PREFIX}:{_part(app_name, 'app_name')}", "app_name")


class SessionKey:
    """One ADK session's place in Chronica: its owner and its chronicum id.

    Args:
        app_name: ADK's app name.
        user_id: ADK's user id; the writer (actor) of the person's events too.
        session_id: ADK's session id.

    Attributes:
        owner: the owner of the session and of the user's state, ``adk:<n>:<app>:<n>:<user>``.
        chronicum_id: the session's chronicum, the owner followed by ``:<n>:<session id>``.
        user_state_id: the chronicum holding the user's ``user:`` state (equal to ``owner``).
        app_state_id: owner and chronicum of the app's ``app:`` state.

    Raises:
        InvalidSessionKey: a name is empty, not text, holds NUL or a lone surrogate, or the
            chronicum id would be longer than 255 characters (``field`` names the name).
    """

    __slots__ = (
        "app_name",
        "app_state_id",
        "chronicum_id",
        "owner",
        "session_id",
        "user_id",
        "user_state_id",
    )

    def __init__(self, app_name: str, user_id: str, session_id: str) -> None:
        self.app_name = app_name
        self.user_id = user_id
        self.session_id = session_id
        self.app_state_id = app_state_id(app_name)
        self.owner = _fitting(f"{self.app_state_id}:{_part(user_id, 'user_id')}", "user_id")
        self.user_state_id = self.owner
        self.chronicum_id = _fitting(f"{self.owner}:{_part(session_id, 'session_id')}", "session_id")


def user_owner(app_name: str, user_id: str) -> str:
    """Return the owner of ``user_id``'s sessions in ``app_name`` (also their state's chronicum).

    Raises:
        InvalidSessionKey: a name is empty, not text, holds NUL, or the owner is too long.
    """
    return _fitting(f"{app_state_id(app_name)}:{_part(user_id, 'user_id')}", "user_id")


def session_id_of(owner: str, chronicum_id: str) -> str | None:
    """Return the ADK session id a chronicum id of ``owner`` codes, or ``None`` when it codes none.

    ``None`` for the user's state chronicum and for any chronicum not written by this package.
    """
    head = f"{owner}:"
    if not chronicum_id.startswith(head):
        return None
    length, colon, rest = chronicum_id[len(head) :].partition(":")
    if not colon or not length.isdigit() or str(int(length)) != length or len(rest) != int(length):
        return None
    return rest
