"""The checks of the Chronicarius rules: owners, ids, kinds, queries and window shapes (rules R1, R2, R5, R6).

Pure functions, shared by :mod:`chronica_core.rules` and :mod:`chronica_core.history_rules`.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterable
from typing import TypeVar

from chronica_core.errors import ChronicumNotFound, EmptyOwnerID, InvalidActum, InvalidOwnerID, InvalidQuery
from chronica_core.history import ToolExchanges, View, WindowQuery
from chronica_core.model import MAX_ID_LENGTH, MAX_LAST_N, ActaQuery, ActorKind, ActumKind

__all__ = [
    "MAX_FOLLOW_TIMEOUT",
    "Shape",
    "acta_query",
    "check_owner",
    "checked_shape",
    "encoding_problem",
    "enum_value",
    "follow_timeout",
    "refused",
    "text_problem",
    "window_query",
]

MAX_FOLLOW_TIMEOUT = 86_400.0
"""The longest finite ``timeout`` a blocking follower takes, in seconds (a day); longer: ``None``."""


_log = logging.getLogger("chronica.chronicarius")


def refused(operation: str, owner_id: str, chronicum_id: str) -> ChronicumNotFound:
    """Rule R5's refusal of another owner's chronicum, logged; returned for the caller to raise.

    ``operation`` is what was refused, with its article: ``"a read"``, ``"a write"``, ``"an erasure"``.

    At INFO without any id (an operator sees that refusals happen); at DEBUG with the owner and
    the chronicum id, for whoever turns DEBUG on to trace one.
    """
    _log.info("refused %s: the chronicum belongs to another owner", operation)
    _log.debug("refused owner %r %s of chronicum %r, another owner's", owner_id, operation, chronicum_id)
    return ChronicumNotFound(chronicum_id)


Kind = TypeVar("Kind", ActumKind, ActorKind)


def text_problem(value: object) -> str | None:
    """Say why ``value`` cannot serve as an id or actor, or return ``None`` when it can."""
    if not isinstance(value, str):
        return f"must be a str, not {type(value).__name__}"
    if not value:
        return "must not be empty"
    if len(value) > MAX_ID_LENGTH:
        return f"must be at most {MAX_ID_LENGTH} characters, not {len(value)}"
    if "\x00" in value:
        return "must not contain NUL"
    return encoding_problem(value)


def checked_position(field: str, value: object) -> str | None:
    """Check a position argument (``after``, ``before``, ``at``): an actum id, or ``None``.

    Returns ``value``. Only its type and emptiness are checked here: any other str is looked up,
    and one that names no actum of the chronicum (an id no actum can have too: over
    ``MAX_ID_LENGTH`` characters, NUL, a lone surrogate) is ``ActumNotFound`` there.

    Raises:
        InvalidQuery: (``field``) ``value`` is not ``None`` and not a non-empty str.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidQuery(field, f"an actum id or None, not {type(value).__name__}")
    if not value:
        raise InvalidQuery(field, "an actum id or None, not an empty str")
    return value


def encoding_problem(value: str) -> str | None:
    """Say why ``value`` cannot be encoded as UTF-8 (a lone surrogate), or return ``None``."""
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"cannot be encoded as UTF-8 ({error.reason} at index {error.start})"
    return None


def follow_timeout(timeout: object) -> float | None:
    """Check a follower's ``timeout``; return it in seconds, or ``None`` for no limit.

    ``None`` and ``math.inf`` mean no limit; otherwise a real number (not a bool) from 0 (read
    once, end at once if nothing is new) to :data:`MAX_FOLLOW_TIMEOUT`.

    Raises:
        InvalidQuery: (``field="timeout"``) anything else: a bool, a str, NaN, a negative number,
            or more than :data:`MAX_FOLLOW_TIMEOUT` but finite.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise InvalidQuery("timeout", f"seconds as a number, or None for no limit, not {timeout!r}")
    if timeout == math.inf:
        return None
    if not (0 <= timeout <= MAX_FOLLOW_TIMEOUT):  # NaN fails every comparison
        raise InvalidQuery(
            "timeout",
            f"seconds, from 0 to {MAX_FOLLOW_TIMEOUT:g}, or None (or inf) for no limit, not {timeout!r}",
        )
    return float(timeout)


def check_owner(owner_id: object) -> str:
    """Rule R1: a non-empty owner, checked before anything else."""
    if (  # the usual owner, in one expression: every call checks one
        type(owner_id) is str
        and 0 < len(owner_id) <= MAX_ID_LENGTH
        and owner_id.isascii()
        and "\x00" not in owner_id
    ):
        return owner_id
    if owner_id is None or owner_id == "":
        raise EmptyOwnerID()
    problem = text_problem(owner_id)
    if problem is not None:
        raise InvalidOwnerID(problem)
    return owner_id  # type: ignore[return-value]


def enum_value(enum: type[Kind], value: object, field: str) -> Kind:
    """Return ``value`` as a member of ``enum``; ``InvalidActum`` naming ``field`` for anything else."""
    if type(value) is enum:
        return value
    try:
        return enum(value)  # type: ignore[arg-type]  # anything not a member is refused below
    except ValueError:
        known = ", ".join(member.value for member in enum)
        raise InvalidActum(field, f"unknown {field} {value!r}; expected one of {known}") from None


def _query_kinds(
    enum: type[Kind], values: tuple[Kind | str, ...] | None, field: str
) -> tuple[Kind, ...] | None:
    if values is None:
        return None
    try:
        kinds = {enum(value) for value in values}
    except (ValueError, TypeError):
        known = ", ".join(member.value for member in enum)
        raise InvalidQuery(field, f"expected values among {known}, got {list(values)!r}") from None
    return tuple(sorted(kinds)) or None


@functools.lru_cache(maxsize=256)
def _cached_query(
    actum_kinds: tuple[ActumKind | str, ...] | None,
    actor_kinds: tuple[ActorKind | str, ...] | None,
    last_n: int,
) -> ActaQuery:
    """Agents ask for the same few windows over and over; build each query once."""
    return ActaQuery(
        actum_kinds=_query_kinds(ActumKind, actum_kinds, "actum_kinds"),
        actor_kinds=_query_kinds(ActorKind, actor_kinds, "actor_kinds"),
        last_n=0 if last_n > MAX_LAST_N else max(last_n, 0),
    )


def _as_tuple(values: Iterable[Kind | str] | None, field: str) -> tuple[Kind | str, ...] | None:
    if values is None or isinstance(values, str):
        return None if values is None else (values,)
    try:
        return tuple(values)
    except TypeError:
        raise InvalidQuery(field, f"must be an iterable of kinds, not {type(values).__name__}") from None


def acta_query(
    actum_kinds: Iterable[ActumKind | str] | None,
    actor_kinds: Iterable[ActorKind | str] | None,
    last_n: int,
) -> ActaQuery:
    """Rule R6's query: filters as sorted tuples of enums (``None`` for every kind), then the limit."""
    if isinstance(last_n, bool) or not isinstance(last_n, int):
        raise InvalidQuery("last_n", f"must be an int, not {type(last_n).__name__}")
    kinds, actors = _as_tuple(actum_kinds, "actum_kinds"), _as_tuple(actor_kinds, "actor_kinds")
    try:
        return _cached_query(kinds, actors, last_n)
    except TypeError:  # an unhashable value cannot be a kind
        field = "actum_kinds" if _unhashable(kinds) else "actor_kinds"
        raise InvalidQuery(field, "expected kinds (enums or their string values)") from None


def _unhashable(values: tuple[object, ...] | None) -> bool:
    try:
        hash(values)
    except TypeError:
        return True
    return False


Shape = tuple[str | None, bool, View | str, ToolExchanges | str] | None
"""``(before, newest_first, view, tool_exchanges)`` of a window, or ``None`` for the defaults."""

_DEFAULT_SHAPE: tuple[None, bool, View, ToolExchanges] = (None, False, View.SUMMARIZED, ToolExchanges.WHOLE)


def checked_shape(shape: Shape) -> tuple[str | None, bool, View, ToolExchanges]:
    """Check a window's shape (see :data:`Shape`); ``InvalidQuery`` names the argument at fault."""
    if shape is None:
        return _DEFAULT_SHAPE
    before, newest_first, view, exchanges = shape
    before = checked_position("before", before)
    if not isinstance(newest_first, bool):
        raise InvalidQuery("newest_first", f"must be a bool, not {type(newest_first).__name__}")
    return (
        before,
        newest_first,
        _option(View, view, "view"),
        _option(ToolExchanges, exchanges, "tool_exchanges"),
    )


Option = TypeVar("Option", View, ToolExchanges)


def _option(enum: type[Option], value: object, field: str) -> Option:
    try:
        return enum(value)  # type: ignore[arg-type]  # anything not a member is refused below
    except ValueError:
        known = ", ".join(member.value for member in enum)
        raise InvalidQuery(field, f"expected one of {known}, not {value!r}") from None


@functools.lru_cache(maxsize=256)
def window_query(query: ActaQuery, newest_first: bool, view: View, exchanges: ToolExchanges) -> WindowQuery:
    """Agents ask for the same few windows over and over; build each once."""
    return WindowQuery(
        query.actum_kinds, query.actor_kinds, query.last_n, None, newest_first, view, exchanges
    )
