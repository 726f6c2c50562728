"""Listing an owner's chronica a page at a time: the limits and the opaque cursor.

A cursor is where the previous page ended, ``(started_at, id)`` of its last chronicum, plus a
short digest of the owner it was made for, encoded as URL-safe base64 of a small JSON array.
Pages are keyset pages: a walk that starts at the newest sees every chronicum that existed when
it began exactly once, however many are created meanwhile (one erased meanwhile is not seen).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime

from chronica_core.erasure import owner_digest
from chronica_core.errors import InvalidQuery
from chronica_core.model import MAX_ID_LENGTH, Chronicum
from chronica_core.store import ListingPosition

__all__ = ["DEFAULT_LIST_LIMIT", "MAX_LIST_LIMIT", "check_limit", "decode_cursor", "encode_cursor"]

DEFAULT_LIST_LIMIT = 50
"""How many chronica a page holds unless the caller says otherwise."""

MAX_LIST_LIMIT = 1000
"""The most chronica one page may hold."""

_OWNER_MARK_LENGTH = 16
"""Hex digits of the owner digest kept in a cursor: enough to tell owners apart, no more."""


def check_limit(limit: object) -> int:
    """Return ``limit`` if it is an int from 1 to :data:`MAX_LIST_LIMIT`; else ``InvalidQuery("limit")``."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidQuery("limit", f"must be an int, not {type(limit).__name__}")
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidQuery("limit", f"must be from 1 to {MAX_LIST_LIMIT}, not {limit}")
    return limit


def _owner_mark(owner_id: str) -> str:
    return owner_digest(owner_id).removeprefix("sha256:")[:_OWNER_MARK_LENGTH]


def encode_cursor(owner_id: str, last: Chronicum) -> str:
    """Return the cursor of the page after the one ending with ``last``, for ``owner_id``."""
    started = last.started_at.astimezone(UTC).isoformat()
    text = json.dumps([_owner_mark(owner_id), started, last.id], separators=(",", ":"), ensure_ascii=True)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(owner_id: str, cursor: object) -> ListingPosition:
    """Return the ``(started_at, id)`` position ``cursor`` holds.

    Raises:
        InvalidQuery: (``field="cursor"``) ``cursor`` is not a str this module made, or was
            made for another owner's listing.
    """
    if not isinstance(cursor, str):
        raise InvalidQuery(
            "cursor", f"must be a str from a previous page's next_cursor, not {type(cursor).__name__}"
        )
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        mark, started, chronicum_id = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        started_at = datetime.fromisoformat(started)
        valid = (
            isinstance(mark, str)
            and isinstance(chronicum_id, str)
            and 0 < len(chronicum_id) <= MAX_ID_LENGTH
            and "\x00" not in chronicum_id
            and started_at.tzinfo is not None
        )
        if valid:
            chronicum_id.encode()  # a lone surrogate cannot be a stored id
            started_at = started_at.astimezone(UTC)  # out of range near year 1 or 9999
    except (ValueError, TypeError, UnicodeError, OverflowError, binascii.Error):
        valid = False
    if not valid:
        raise InvalidQuery("cursor", "is not a cursor from a previous page's next_cursor")
    if mark != _owner_mark(owner_id):
        raise InvalidQuery("cursor", "was made for another owner's listing")
    return started_at, chronicum_id
