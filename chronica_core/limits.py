r"""How large an actum's content may be: one size, one check and one option, shared by every store.

The size of an actum is the size of its content encoded as UTF-8, in bytes (``"é"`` is 2, an
emoji 4), plus that of its native data where it has a native form (:class:`chronica_core.Native`).
A store has one limit on that size, stated in its README, which holds for any content
(every character, quotes and ``"\x00"`` included) and any valid ids: a store reserves room for
the rest of the row or document at its largest. Content above it raises :class:`ActumTooLarge`
before anything is sent.
"""

from __future__ import annotations

from typing import Final

from chronica_core.errors import ActumTooLarge, InvalidOption
from chronica_core.model import Actum

__all__ = [
    "MAX_CONTENT_OPTION",
    "POSTGRESQL_MAX_CONTENT_BYTES",
    "actum_size",
    "check_actum_size",
    "check_content_size",
    "content_limit_option",
    "content_size",
]

MAX_CONTENT_OPTION: Final = "max_content_bytes"
"""The store option that lowers a store's content limit (every backend knows it)."""

_UTF8_MOST_BYTES: Final = 4  # a code point takes at most 4 bytes in UTF-8

_POSTGRESQL_MAX_ALLOC: Final = 0x3FFFFFFF  # MaxAllocSize: the largest value a server process allocates
_POSTGRESQL_ROW_RESERVE: Final = 64 * 1024  # the rest of a result row: ids, kind, time, lengths
_POSTGRESQL_HEX_FRAME: Final = 3  # bytea's hex text: "\x" before the digits, a terminating NUL after

POSTGRESQL_MAX_CONTENT_BYTES: Final = (
    _POSTGRESQL_MAX_ALLOC - _POSTGRESQL_ROW_RESERVE - _POSTGRESQL_HEX_FRAME
) // 2
r"""The largest content both PostgreSQL backends accept: 536,838,142 bytes (just under 512 MiB).

Content is stored as ``bytea`` where it holds ``"\x00"`` (chronica-postgres) or always
(chronica-sqlalchemy), and the server sends ``bytea`` back as hex text, two characters a byte,
in one value and one result row that must each stay below PostgreSQL's allocation limit of
1 GiB (``MaxAllocSize``, fixed when PostgreSQL is built, no setting). So half of that limit,
less room for the row's other columns, is what can be written *and read back*."""


def content_size(content: str) -> int:
    """Return the size of ``content`` as Chronica counts it: its UTF-8 encoding, in bytes.

    Args:
        content: text that can be encoded as UTF-8 (``Chronicarius`` refuses any other).

    Raises:
        UnicodeEncodeError: ``content`` holds a lone surrogate.
    """
    if content.isascii():
        return len(content)
    return len(content.encode("utf-8"))


def check_content_size(content: str, limit: int | None) -> None:
    """Raise :class:`ActumTooLarge` when ``content`` is larger than ``limit`` bytes.

    Cheap for ordinary content: the exact size is computed only when ``content`` could exceed
    the limit (more than a quarter as many characters as the limit has bytes).

    Args:
        content: the actum's content.
        limit: the most bytes of UTF-8 the store accepts; ``None`` for no limit.

    Raises:
        ActumTooLarge: ``.size`` is the content's size in bytes, ``.limit`` the limit.
    """
    if limit is None or len(content) * _UTF8_MOST_BYTES <= limit:
        return
    size = content_size(content)
    if size > limit:
        raise ActumTooLarge(size, limit)


def actum_size(actum: Actum) -> int:
    """Return the size of ``actum`` as Chronica counts it: its content's and its native data's.

    In bytes of UTF-8: :func:`content_size` of the content plus that of ``actum.native.data``
    (``0`` without a native form). A store's limit holds for this sum.
    """
    size = content_size(actum.content)
    if actum.native is not None:
        size += content_size(actum.native.data)
    return size


def check_actum_size(actum: Actum, limit: int | None) -> None:
    """Raise :class:`ActumTooLarge` when ``actum`` is larger than ``limit`` bytes (see :func:`actum_size`).

    Cheap for ordinary acta, as :func:`check_content_size` is.

    Args:
        actum: the actum a store is about to write.
        limit: the most bytes of UTF-8 the store accepts for content and native data together;
            ``None`` for no limit.

    Raises:
        ActumTooLarge: ``.size`` is the actum's size in bytes, ``.limit`` the limit.
    """
    if actum.native is None:
        check_content_size(actum.content, limit)
        return
    if limit is None or (len(actum.content) + len(actum.native.data)) * _UTF8_MOST_BYTES <= limit:
        return
    size = actum_size(actum)
    if size > limit:
        raise ActumTooLarge(size, limit)


def content_limit_option(backend: str, value: object, ceiling: int) -> int:
    """Read the ``max_content_bytes`` option of ``backend``: a whole number from 0 to ``ceiling``.

    Args:
        backend: the backend's name, for the error (``"postgres"``).
        value: the option as given: an int, or its digits as text.
        ceiling: the largest value the backend can honour, in bytes.

    Returns:
        The limit, in bytes of UTF-8 content.

    Raises:
        InvalidOption: ``value`` is not a whole number, or not within 0 to ``ceiling``
            (the message names both bounds).
    """
    bounds = f"a whole number of bytes from 0 to {ceiling}"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidOption(backend, MAX_CONTENT_OPTION, f"expected {bounds}, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise InvalidOption(backend, MAX_CONTENT_OPTION, f"expected {bounds}, got {value!r}") from None
    if not 0 <= number <= ceiling:
        raise InvalidOption(backend, MAX_CONTENT_OPTION, f"expected {bounds}, got {number}")
    return number
