"""Where a chronicum lives in Redis: its keys (all in one hash slot), its owner's index, its moments.

Every key of one chronicum carries the same hash tag, so Redis Cluster keeps them in one slot and
one Lua script can read and write them all atomically. A chronicum that is not a fork has the tag
``{<id>}`` (``%``, ``{`` and ``}`` percent-encoded): its own id, readable in ``redis-cli``. A fork
lives in its family root's slot: its keys are ``<prefix>:{<root id>}:x:<id>:...`` (``:``
percent-encoded too), beside its ancestors', so a window over its lineage, its creation (atomic
with its source's erasure) and an erasure with its forks are each one script. Its own slot keeps
only its home, ``<prefix>:{<id>}:c``, a hash holding ``root``. ``<tag>`` below is either prefix.

- ``<tag>:c``: a hash, the chronicum: ``owner``, ``started`` (microseconds since the Unix
  epoch), ``seq`` (its newest position), ``last`` (the newest actum's ``at``, in microseconds),
  ``v`` (where its layout version starts), ``x`` (where its idle index entries stand),
  ``shaped`` (set by its first summary or linked tool response); a fork's also ``base`` (the
  position it branched at), ``from`` and ``at`` (its fork point), ``lineage`` (its ancestors'
  segments) and ``anc`` (their ids). An erased chronicum's hash is its marker, holding
  ``erased`` (the owner's digest) and nothing else.
- ``<tag>:a``: a stream, the acta in order: entry ``<position>-0`` holds ``i`` (the actum id),
  ``k`` (kind), ``a`` (actor kind), ``r`` (actor), ``c`` (content), ``t`` (``at``) and the
  optional fields of :mod:`chronica_redis.entries`.
- ``<tag>:i:<kind>:<actor kind>``: a list of the position of each actum of that kind and actor
  kind, in order; at most twelve per chronicum. A filtered window reads the tail of the lists its
  filters name, so its cost does not grow with the history.
- ``<tag>:p``: a hash, actum id -> position. ``<tag>:s``: a list, the summary marks of its
  history. ``<tag>:d``: a set, the ids of the forks whose lineage names it.
- ``<tag>:k``: a hash, idempotency key -> ``<first position>:<count>`` of the write that used it.
- ``<tag>:f``: a string with an expiry, present while the chronicum is followed.

The owner's index is ``<prefix>:o:{<hex digest of the owner>}``, a sorted set (all scores 0) of
:func:`listing_member` strings, ordered as bytes: in another slot than the chronicum's, so it is
written in a step of its own (see :mod:`chronica_redis.plans`). Its key holds a digest, never the
owner id. The idle indexes (:func:`idle_index_key`, :func:`owner_idle_key`) share the slot
``{idle}``: sorted sets of chronicum ids scored by their last activity.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from chronica_core.model import ActorKind, ActumKind

__all__ = [
    "DEFAULT_PREFIX",
    "KEYS_PER_CHRONICUM",
    "ChronicumKeys",
    "chronicum_keys",
    "family_keys",
    "follow_channel",
    "fork_keys",
    "from_micros",
    "idle_index_key",
    "listing_member",
    "micros",
    "owner_idle_key",
    "owner_index_key",
    "parse_listing_member",
]

DEFAULT_PREFIX: Final = "chronica"
"""The prefix of every key the store writes, unless the ``prefix`` option names another."""

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_YEAR_ONE: Final = datetime(1, 1, 1, tzinfo=UTC)
_MEMBER_DIGITS: Final = 18
"""Digits of a listing member's moment (microseconds since year 1: fewer than 10**18 to 9999)."""

_ESCAPES: Final = str.maketrans({"%": "%25", "{": "%7B", "}": "%7D"})
_FORK_ESCAPES: Final = str.maketrans({"%": "%25", "{": "%7B", "}": "%7D", ":": "%3A"})


def micros(moment: datetime) -> int:
    """``moment`` (timezone-aware) as whole microseconds since the Unix epoch (negative before it)."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


def from_micros(value: int | str) -> datetime:
    """The UTC moment ``value`` microseconds after the Unix epoch."""
    return _EPOCH + timedelta(microseconds=int(value))


@dataclass(frozen=True, slots=True)
class ChronicumKeys:
    """The keys of one chronicum (see the module's text); all of them hash to one slot."""

    chronicum_id: str
    tag: str

    @property
    def meta(self) -> str:
        """The chronicum's hash (or its marker)."""
        return f"{self.tag}:c"

    @property
    def acta(self) -> str:
        """The stream of its acta."""
        return f"{self.tag}:a"

    @property
    def keys(self) -> str:
        """The hash of its idempotency keys."""
        return f"{self.tag}:k"

    @property
    def followed(self) -> str:
        """The key present while it is followed."""
        return f"{self.tag}:f"

    @property
    def positions(self) -> str:
        """The hash of its acta's positions, by actum id."""
        return f"{self.tag}:p"

    @property
    def marks(self) -> str:
        """The list of the summary marks of its history."""
        return f"{self.tag}:s"

    @property
    def forks(self) -> str:
        """The set of the ids of the forks whose lineage names it."""
        return f"{self.tag}:d"

    def index(self, kind: ActumKind | str, actor_kind: ActorKind | str) -> str:
        """The list of the positions of its acta of ``kind`` by ``actor_kind``."""
        return f"{self.tag}:i:{kind}:{actor_kind}"

    def every_index(self) -> tuple[str, ...]:
        """All twelve index lists (erasure deletes them all)."""
        return tuple(self.index(kind, actor_kind) for kind in ActumKind for actor_kind in ActorKind)

    def every_key(self) -> tuple[str, ...]:
        """Every key of the chronicum, its hash first (:data:`KEYS_PER_CHRONICUM` of them)."""
        return (
            self.meta,
            self.acta,
            self.keys,
            self.followed,
            self.positions,
            self.marks,
            self.forks,
            *self.every_index(),
        )


KEYS_PER_CHRONICUM: Final = 19
"""How many keys :meth:`ChronicumKeys.every_key` names."""


def chronicum_keys(prefix: str, chronicum_id: str) -> ChronicumKeys:
    """The keys of ``chronicum_id`` under ``prefix``, in its own slot (its hash is its home)."""
    return ChronicumKeys(chronicum_id, f"{prefix}:{{{chronicum_id.translate(_ESCAPES)}}}")


def fork_keys(prefix: str, root_id: str, chronicum_id: str) -> ChronicumKeys:
    """The keys of ``chronicum_id``, a fork (or an id once a fork), in the slot of its family's root."""
    tag = chronicum_keys(prefix, root_id).tag
    return ChronicumKeys(chronicum_id, f"{tag}:x:{chronicum_id.translate(_FORK_ESCAPES)}")


def family_keys(prefix: str, root_id: str, chronicum_id: str) -> ChronicumKeys:
    """The keys of ``chronicum_id``, of the family of ``root_id`` (the root's own, or a fork's)."""
    if chronicum_id == root_id:
        return chronicum_keys(prefix, root_id)
    return fork_keys(prefix, root_id, chronicum_id)


def owner_index_key(prefix: str, owner_digest: str) -> str:
    """The owner's index, from the owner's digest (``"sha256:<hex>"``, see ``chronica_core.erasure``)."""
    return f"{prefix}:o:{{{owner_digest.removeprefix('sha256:')}}}"


def idle_index_key(prefix: str) -> str:
    """The index of every chronicum's last activity: chronicum ids scored in microseconds."""
    return f"{prefix}:{{idle}}:all"


def owner_idle_key(prefix: str, owner_digest: str) -> str:
    """The index of the last activity of one owner's chronica, in the slot of :func:`idle_index_key`."""
    return f"{prefix}:{{idle}}:o:{owner_digest.removeprefix('sha256:')}"


def follow_channel(prefix: str) -> str:
    """The pub/sub channel on which appends to followed chronica, and erasures, name them."""
    return f"{prefix}:follow"


def listing_member(started_at: datetime, chronicum_id: str) -> str:
    """The owner index's member of a chronicum: its start (fixed width) then its id.

    Members compare as bytes, so the index orders chronica by ``started_at``, then by id in code
    points (UTF-8 keeps that order), as a listing needs.
    """
    moment = (started_at - _YEAR_ONE) // timedelta(microseconds=1)
    return f"{moment:0{_MEMBER_DIGITS}d}:{chronicum_id}"


def parse_listing_member(member: str) -> tuple[int, str]:
    """The start (microseconds since the Unix epoch) and chronicum id a :func:`listing_member` holds."""
    moment, _, chronicum_id = member.partition(":")
    since_year_one = timedelta(microseconds=int(moment))
    return micros(_YEAR_ONE + since_year_one), chronicum_id
