"""How ADK's ``(app_name, user_id, session_id)`` becomes Chronica owners and chronicum ids.

The owner of a person's sessions and of their ``user:`` state is the person: ADK's ``user_id``,
the id every other agent and the CLI use for them (``chronica record ... --owner ardian``), so
``erase_owner(user_id)`` erases all of it. The chronicum ids code the app, the user and the
session: every name is written as a length-prefixed part, ``<number of characters>:<text>``,
after the prefix ``adk``, the parts joined by ``:``. Such a code is read back from the left
without any escaping, so no two different keys give the same string, whatever characters the
names hold (``:`` included):

| what | owner | chronicum id |
| --- | --- | --- |
| a session's events | ``ardian`` | ``adk:5:hotel:6:ardian:3:s-1`` |
| a session's state | ``ardian`` | ``adk:5:hotel:6:ardian:3:s-1:state`` |
| a user's state (``user:`` keys) | ``ardian`` | ``adk:5:hotel:6:ardian`` |
| an app's state (``app:`` keys) | ``adk:5:hotel`` | ``adk:5:hotel`` |

Two apps never share a session of one person (the app is in the id), as in ADK. Earlier
releases made the owner the pair (app, user), coded as ``adk:5:hotel:6:ardian``
(:attr:`SessionKey.legacy_owner`), with the same chronicum ids and each session's state inside
its events' chronicum; the service still reads and writes those chronica under that owner.
Chronica ids and owners hold at most 255 characters (:data:`chronica_core.MAX_ID_LENGTH`); a
key whose code is longer is refused with :class:`InvalidSessionKey` before anything is read or
written.
"""

from __future__ import annotations

from chronica_core import MAX_ID_LENGTH, ChronicaError

__all__ = [
    "STATE_SUFFIX",
    "InvalidSessionKey",
    "SessionKey",
    "app_state_id",
    "legacy_owner",
    "session_id_of",
    "user_state_id",
]

PREFIX = "adk"

STATE_SUFFIX = ":state"
"""What a session's state chronicum adds to its events' chronicum id."""


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
    """One ADK session's place in Chronica: its owner and its chronicum ids.

    Args:
        app_name: ADK's app name.
        user_id: ADK's user id: the owner, and the writer (actor) of the person's events.
        session_id: ADK's session id.

    Attributes:
        owner: the owner of the session and of the user's state: ``user_id``.
        chronicum_id: the session's events, ``adk:<n>:<app>:<n>:<user>:<n>:<session id>``.
        state_id: the session's state snapshots, ``chronicum_id`` followed by ``:state``.
        user_state_id: the chronicum holding the user's ``user:`` state, ``adk:<n>:<app>:<n>:<user>``.
        app_state_id: owner and chronicum of the app's ``app:`` state.
        legacy_owner: the owner earlier releases gave the session and the user's state (equal
            to ``user_state_id``).

    Raises:
        InvalidSessionKey: a name is empty, not text, holds NUL or a lone surrogate, or a
            chronicum id would be longer than 255 characters (``field`` names the name).
    """

    __slots__ = (
        "app_name",
        "app_state_id",
        "chronicum_id",
        "legacy_owner",
        "owner",
        "session_id",
        "state_id",
        "user_id",
        "user_state_id",
    )

    def __init__(self, app_name: str, user_id: str, session_id: str) -> None:
        self.app_name = app_name
        self.user_id = user_id
        self.session_id = session_id
        self.app_state_id = app_state_id(app_name)
        self.user_state_id = user_state_id(app_name, user_id)
        self.owner = user_id
        self.legacy_owner = self.user_state_id
        self.chronicum_id = f"{self.user_state_id}:{_part(session_id, 'session_id')}"
        self.state_id = _fitting(self.chronicum_id + STATE_SUFFIX, "session_id")


def user_state_id(app_name: str, user_id: str) -> str:
    """Return the chronicum of ``user_id``'s ``user:`` state in ``app_name``.

    It is also the prefix of their sessions' ids, and the owner earlier releases gave both
    (:func:`legacy_owner`).

    Raises:
        InvalidSessionKey: a name is empty, not text, holds NUL, or the id is too long.
    """
    return _fitting(f"{app_state_id(app_name)}:{_part(user_id, 'user_id')}", "user_id")


def legacy_owner(app_name: str, user_id: str) -> str:
    """Return the owner earlier releases gave ``user_id``'s sessions and state in ``app_name``.

    Erase it too to erase everything such a release wrote for the person:
    ``erase_owner(legacy_owner(app_name, user_id))``.

    Raises:
        InvalidSessionKey: a name is empty, not text, holds NUL, or the owner is too long.
    """
    return user_state_id(app_name, user_id)


def session_id_of(prefix: str, chronicum_id: str, suffix: str = "") -> str | None:
    """Return the ADK session id ``chronicum_id`` codes, or ``None`` when it codes none.

    The session id is coded after ``prefix`` (a user's state id) and before ``suffix`` (``""``
    for a session's events, :data:`STATE_SUFFIX` for its state).
    """
    head = f"{prefix}:"
    if not chronicum_id.startswith(head) or not chronicum_id.endswith(suffix):
        return None
    coded = chronicum_id[len(head) : len(chronicum_id) - len(suffix)]
    length, colon, rest = coded.partition(":")
    if not colon or not length.isdigit() or str(int(length)) != length or len(rest) != int(length):
        return None
    return rest
