"""Every store operation on Redis, written once as a plan that does no I/O.

Each plan yields the operations of :mod:`chronica_redis.operations`, receives their answers, and
turns them into Chronica values and redis-py's exceptions into Chronica errors. The blocking and
the asyncio store perform them (:mod:`chronica_redis.clients`) and decide nothing.

An append, a batch and a keyed write are each one script on the chronicum's slot (one round trip,
atomic). Creating a chronicum takes two steps, because its owner's index lives in another slot:
first the index entry, then the chronicum (its own script, which refuses a taken id). A reader
of a listing checks each entry against the chronicum it names and skips those that do not match:
so if a process dies between the two steps, no chronicum exists, and the entry it left names
none: no reader ever sees it (``get`` says ``ChronicumNotFound``, a listing skips it). An erasure
goes the other way: the chronicum becomes its marker first, then its index entries go.

A fork's keys are in its family root's slot (see :mod:`chronica_redis.keys`): an operation is
sent to the keys a chronicum has as far as the plans know (its own slot's, or a remembered
fork's), and once more to its family's when it found nothing there and the home names a root
(:meth:`RedisPlans.on_chronicum`). The retention capability's plans are in
:mod:`chronica_redis.retention`, the history capability's in :mod:`chronica_redis.history`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from chronica_core import clock
from chronica_core.erasure import owner_digest
from chronica_core.errors import ChronicumExists, ChronicumNotFound, StoreError
from chronica_core.history import StaleLayout
from chronica_core.limits import check_actum_size
from chronica_core.model import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicum,
    ForkPoint,
    build_actum,
    recorded_at,
)
from chronica_core.plans import Plan
from chronica_core.retention import last_activity
from chronica_core.store import ListingPosition
from chronica_core.timeouts import WRITE_FATE_UNKNOWN
from chronica_redis import scripts
from chronica_redis.entries import extra_fields, read_extras
from chronica_redis.errors import WriteUnconfirmed
from chronica_redis.keys import (
    ChronicumKeys,
    chronicum_keys,
    family_keys,
    follow_channel,
    fork_keys,
    from_micros,
    idle_index_key,
    listing_member,
    micros,
    owner_idle_key,
    owner_index_key,
    parse_listing_member,
)
from chronica_redis.operations import Batch, Call, Operation, Run, Written

__all__ = [
    "CHRONICUM_FIELDS",
    "FOLLOWED_SECONDS",
    "FOLLOW_LOOK",
    "IDLE_STEP",
    "LISTING_PAGE",
    "RedisPlans",
    "chronicum_of",
    "entry_actum",
]

FOLLOW_LOOK: Final = 1000
"""How many acta one ``acta_after`` script looks back through for the follower's position, at most:
a position further back takes more round trips, none of which holds the server for long."""

FAMILIES: Final = 10_000
"""How many forks' family roots a store remembers (each saves a read of the fork's home)."""

ERASE_TRIES: Final = 10
"""How many times an erasure is tried again when forks were made while it read the fork set."""

LISTING_PAGE: Final = 1000
"""How many index entries ``erase_owner`` reads at a time."""

IDLE_STEP: Final = 60_000_000
"""How far, in microseconds, a chronicum's entry in the idle indexes may lag behind its last
activity: an append moves the entry only when it is that much older. An entry never stands after
the last activity, so a retention read checks what it finds and skips none it should return."""

FOLLOWED_SECONDS: Final = 120.0
"""How long a follower's mark on its chronicum lasts (appends to it publish while it does)."""

_KINDS: Final = tuple(ActumKind)
_ACTOR_KINDS: Final = tuple(ActorKind)


_PLAIN_FIELDS: Final = 12
"""How many items a stream entry's fields hold for an actum with no optional field."""

_KIND_OF: Final = {str(kind): kind for kind in ActumKind}
_ACTOR_KIND_OF: Final = {str(kind): kind for kind in ActorKind}


def entry_actum(chronicum_id: str, entry: Sequence[Any]) -> Actum:
    """The actum a stream entry holds.

    An entry is ``[entry id, [i, id, k, kind, a, actor kind, r, actor, c, content, t, at, ...]]``,
    then the optional fields of :func:`chronica_redis.entries.extra_fields` (an entry written
    without them reads back with no native form, no ``answers`` and no ``summarizes``). Kinds are
    looked up in dicts (a context window builds twenty of these per read).
    """
    fields = entry[1]
    if len(fields) == _PLAIN_FIELDS:
        return build_actum(
            chronicum_id,
            _KIND_OF[fields[3]],
            _ACTOR_KIND_OF[fields[5]],
            fields[7],
            fields[9],
            fields[1],
            from_micros(fields[11]),
        )
    native, answers, summarizes = read_extras(fields[_PLAIN_FIELDS:])
    return build_actum(
        chronicum_id,
        _KIND_OF[fields[3]],
        _ACTOR_KIND_OF[fields[5]],
        fields[7],
        fields[9],
        fields[1],
        from_micros(fields[11]),
        native,
        answers,
        summarizes,
    )


class RedisPlans:
    """The store operations as plans, shared by :class:`chronica_redis.RedisStore` and its asyncio twin.

    Args:
        prefix: the prefix of every key (see :mod:`chronica_redis.keys`).
        wait_replicas: how many replicas must confirm each write (0: none; the clients then send
            no ``WAIT``).
        wait_timeout: how long a write waits for them, in seconds.
        max_content_bytes: a limit on content below the server's, in bytes of UTF-8 (``None``:
            the server's).
    """

    def __init__(
        self, prefix: str, wait_replicas: int, wait_timeout: float, max_content_bytes: int | None
    ) -> None:
        self.prefix = prefix
        self.wait_replicas = wait_replicas
        self.wait_timeout = wait_timeout
        self.max_content_bytes = max_content_bytes
        self.server_content_limit: int | None = None
        """The server's limit on content (set by the durability check when the store opens)."""
        self.channel = follow_channel(prefix)
        self.idle_step = IDLE_STEP
        self._roots: dict[str, str] = {}
        """Fork id -> the root of its family (whose slot it lives in), for the forks met so far."""
        self._roots_lock = threading.Lock()
        """How far an idle index entry may lag (microseconds; tests set it to 0)."""

    def keys(self, chronicum_id: str) -> ChronicumKeys:
        """The keys of ``chronicum_id`` in its own slot (its home: a fork's holds only its family's root)."""
        return chronicum_keys(self.prefix, chronicum_id)

    # -- finding a chronicum's keys -----------------------------------------------------------

    def root_of(self, chronicum_id: str) -> str:
        """The root of the chronicum's family, as far as known without I/O (itself unless remembered)."""
        return self._roots.get(chronicum_id, chronicum_id)

    def keys_of(self, chronicum_id: str) -> ChronicumKeys:
        """The chronicum's keys as far as known without I/O: in its family's slot if it is a known fork."""
        return family_keys(self.prefix, self.root_of(chronicum_id), chronicum_id)

    def moved(self, keys: ChronicumKeys, where: str) -> Plan[Operation, ChronicumKeys | None]:
        """After an operation found no chronicum at ``keys``: its keys in its family's slot, if it has any.

        Reads the home's ``root`` (a fork's home names its family's root; see
        :mod:`chronica_redis.keys`) and remembers it: a home never changes what it points to.
        ``None`` when ``keys`` were the family's already, or the home names no root.
        """
        chronicum_id = keys.chronicum_id
        if keys != self.keys(chronicum_id):
            return None
        root = yield from self.run(Call(("HGET", keys.meta, "root")), where)
        if root is None:
            return None
        self.remember_root(chronicum_id, root)
        return fork_keys(self.prefix, root, chronicum_id)

    def remember_root(self, chronicum_id: str, root_id: str) -> None:
        """Remember that ``chronicum_id`` lives in the family of ``root_id`` (at most :data:`FAMILIES`)."""
        with self._roots_lock:
            roots = self._roots
            roots[chronicum_id] = root_id
            if len(roots) > FAMILIES:
                del roots[next(iter(roots))]

    def on_chronicum(
        self,
        chronicum_id: str,
        operation: Callable[[ChronicumKeys], Run | Call],
        missing: Callable[[Any], bool],
        where: str,
    ) -> Plan[Operation, tuple[Any, ChronicumKeys]]:
        """Perform ``operation`` on the chronicum's keys; once more on its family's if it was ``missing``.

        Returns the answer and the keys it was given by.
        """
        keys = self.keys_of(chronicum_id)
        answer = yield from self.run(operation(keys), where)
        if missing(answer):
            moved = yield from self.moved(keys, where)
            if moved is not None:
                keys = moved
                answer = yield from self.run(operation(keys), where)
        return answer, keys

    # -- running operations -------------------------------------------------------------------

    def run(self, operation: Operation, where: str) -> Plan[Operation, Any]:
        """Perform ``operation``; redis-py's errors become ``StoreError("redis: <where>: ...")``.

        A write (``writes=True``) answers its value once ``wait_replicas`` replicas confirmed it,
        else raises :class:`~chronica_redis.errors.WriteUnconfirmed`. A write whose connection
        failed or timed out says that its fate is unknown.
        """
        writes = isinstance(operation, Run | Call) and operation.writes
        try:
            answer = yield operation
        except RedisTimeoutError as error:
            fate = f"; {WRITE_FATE_UNKNOWN}" if writes else ""
            raise StoreError(f"redis: {where}", f"timed out: {error}{fate}") from error
        except RedisConnectionError as error:
            fate = f"; {WRITE_FATE_UNKNOWN}" if writes else ""
            raise StoreError(f"redis: {where}", f"{error}{fate}") from error
        except (RedisError, RedisClusterException) as error:
            raise StoreError(f"redis: {where}", str(error)) from error
        if not writes:
            return answer
        assert isinstance(answer, Written)
        if answer.replicas is not None and answer.replicas < self.wait_replicas:
            raise WriteUnconfirmed(f"redis: {where}", answer.replicas, self.wait_replicas, self.wait_timeout)
        return answer.value

    # -- the store operations ----------------------------------------------------------------

    def content_limit(self) -> Plan[Operation, int | None]:
        """The largest content a write accepts, in bytes of UTF-8 (read at open; no I/O)."""
        limit = self.server_content_limit
        if self.max_content_bytes is not None and (limit is None or self.max_content_bytes < limit):
            limit = self.max_content_bytes
        return limit
        yield  # a plan, though it performs nothing

    def create(self, chronicum: Chronicum) -> Plan[Operation, None]:
        """The owner's index entry, then the chronicum; ``ChronicumExists`` if the id is taken (or erased)."""
        yield from self._index(chronicum, "create chronicum")
        keys = self.keys(chronicum.id)
        created = yield from self.run(
            Run(
                scripts.CREATE, (keys.meta,), (chronicum.owner_id, micros(chronicum.started_at)), writes=True
            ),
            "create chronicum",
        )
        if created != 1:
            raise ChronicumExists(chronicum.id)

    def get(self, chronicum_id: str) -> Plan[Operation, Chronicum]:
        """Read the chronicum (one ``HMGET``). Raises ``ChronicumNotFound`` (an erased one too)."""
        row, _ = yield from self.on_chronicum(
            chronicum_id,
            lambda keys: Call(("HMGET", keys.meta, *CHRONICUM_FIELDS)),
            lambda row: row[0] is None,
            "get chronicum",
        )
        chronicum = chronicum_of(chronicum_id, row)
        if chronicum is None:
            raise ChronicumNotFound(chronicum_id)
        return chronicum

    def record(self, actum: Actum) -> Plan[Operation, Actum]:
        """Append ``actum`` (one script). Raises ``ChronicumNotFound``, ``ActumTooLarge``, ``StoreError``."""
        stored = yield from self._append([actum], None, "record actum")
        return stored[0]

    def record_idempotent(self, actum: Actum, key: str) -> Plan[Operation, Actum]:
        """Append ``actum`` unless ``key`` was used in its chronicum; else return that write's first actum."""
        stored = yield from self._append([actum], key, "record idempotent actum")
        return stored[0]

    def record_many(self, acta: Sequence[Actum], key: str | None) -> Plan[Operation, list[Actum]]:
        """Append ``acta`` (one chronicum's) consecutively in one script: all land or none."""
        return (yield from self._append(acta, key, "record acta"))

    def _append(
        self, acta: Sequence[Actum], key: str | None, where: str, summary: str = ""
    ) -> Plan[Operation, list[Actum]]:
        """Append ``acta`` in one script (``summary``: see :data:`chronica_redis.scripts.RECORD`)."""
        limit = yield from self.content_limit()
        for actum in acta:
            check_actum_size(actum, limit)
        chronicum_id = acta[0].chronicum_id
        touch = "1" if self.wait_replicas else ""

        def operation(keys: ChronicumKeys) -> Run:
            now = micros(clock.now())  # the clock started_at came from (not the server's TIME)
            lists: dict[str, int] = {}
            fields: list[str | int] = []
            for actum in acta:
                index = keys.index(actum.kind, actum.actor_kind)
                number = lists.setdefault(index, len(lists) + 1)
                extras = extra_fields(actum)
                fields += [actum.id, str(actum.kind), str(actum.actor_kind), actum.actor, actum.content]
                fields += [number, len(extras), *extras]
            return Run(
                scripts.RECORD,
                (keys.meta, keys.acta, keys.keys, keys.followed, keys.positions, keys.marks, *lists),
                (
                    chronicum_id,
                    self.channel,
                    key or "",
                    touch,
                    len(acta),
                    self.idle_step,
                    summary,
                    now,
                    *fields,
                ),
                writes=True,
            )

        answer, _ = yield from self.on_chronicum(
            chronicum_id, operation, lambda answer: answer[0] == "missing", where
        )
        if answer[0] == "missing":
            raise ChronicumNotFound(chronicum_id)
        if answer[0] == "stale":
            raise StaleLayout(chronicum_id)
        if answer[0] == "kept":
            return [entry_actum(chronicum_id, entry) for entry in answer[1]]
        if answer[2]:
            digest = owner_digest(answer[2])
            yield from self.idle(scripts.IDLE_TOUCH, digest, chronicum_id, int(answer[1]), where)
        at = from_micros(answer[1])
        return [recorded_at(actum, at) for actum in acta]

    def acta(self, chronicum_id: str, query: ActaQuery) -> Plan[Operation, list[Actum]]:
        """The context window in one script: the filters' index lists, then the last ``last_n``.

        Raises ``ChronicumNotFound`` for a missing or erased chronicum (an empty one gives ``[]``).
        """
        kinds = _KINDS if query.actum_kinds is None else tuple(dict.fromkeys(query.actum_kinds))
        actor_kinds = _ACTOR_KINDS if query.actor_kinds is None else tuple(dict.fromkeys(query.actor_kinds))
        filtered = len(kinds) < len(_KINDS) or len(actor_kinds) < len(_ACTOR_KINDS)

        def operation(keys: ChronicumKeys) -> Run:
            lists: tuple[str, ...] = ()
            if filtered:
                lists = tuple(keys.index(kind, actor_kind) for kind in kinds for actor_kind in actor_kinds)
            return Run(scripts.WINDOW, (keys.meta, keys.acta, *lists), (max(query.last_n, 0),))

        entries, _ = yield from self.on_chronicum(chronicum_id, operation, _absent, "read acta")
        if entries is None:
            raise ChronicumNotFound(chronicum_id)
        if entries == "stale":
            raise StaleLayout(chronicum_id)
        return [entry_actum(chronicum_id, entry) for entry in entries]

    def acta_after(
        self, chronicum_id: str, after: str | None, limit: int
    ) -> Plan[Operation, list[Actum] | None]:
        """Up to ``limit`` acta after the actum ``after`` (see ``FollowStore.acta_after``).

        The script looks back from the newest actum for ``after``, :data:`FOLLOW_LOOK` acta a round
        trip. When the store waits for replicas, the script also marks the chronicum followed (a
        write) and ``WAIT`` then confirms that the replicas hold everything it read: unconfirmed,
        the page is withheld (``[]``), so a follower never yields an actum a failover could lose.
        """
        mark = str(int(FOLLOWED_SECONDS * 1000)) if self.wait_replicas else ""
        below = ""
        keys: ChronicumKeys | None = None
        while True:

            def operation(keys: ChronicumKeys, below: str = below) -> Run:
                return Run(
                    scripts.ACTA_AFTER,
                    (keys.meta, keys.acta, keys.followed),
                    (after or "", limit, FOLLOW_LOOK, below, mark),
                    writes=bool(mark),
                )

            try:
                if keys is None:
                    answer, keys = yield from self.on_chronicum(
                        chronicum_id, operation, _absent, "read acta after"
                    )
                else:
                    answer = yield from self.run(operation(keys), "read acta after")
            except WriteUnconfirmed:
                return []
            if answer is None:
                raise ChronicumNotFound(chronicum_id)
            if answer[0] == "page":
                return [entry_actum(chronicum_id, entry) for entry in answer[1]]
            if answer[0] == "absent":
                return None
            below = answer[1]

    def newest(self, chronicum_id: str, mark: bool) -> Plan[Operation, str | None]:
        """The id of the chronicum's newest actum (``None``: it has none), marking it followed if ``mark``.

        Raises ``ChronicumNotFound`` for a missing or erased chronicum.
        """
        ttl = str(int(FOLLOWED_SECONDS * 1000)) if mark else ""
        answer, _ = yield from self.on_chronicum(
            chronicum_id,
            lambda keys: Run(scripts.NEWEST, (keys.meta, keys.acta, keys.followed), (ttl,), writes=False),
            _absent,
            "wait for acta",
        )
        if answer is None:
            raise ChronicumNotFound(chronicum_id)
        return answer or None

    # -- listing and erasure ------------------------------------------------------------------

    def _index(self, chronicum: Chronicum, where: str) -> Plan[Operation, None]:
        """Add the chronicum's entries to its owner's index and the idle indexes (a create's first step).

        An idle entry already there is left as it is: a lost create race must not move the
        winner's.
        """
        digest = owner_digest(chronicum.owner_id)
        index = owner_index_key(self.prefix, digest)
        member = listing_member(chronicum.started_at, chronicum.id)
        yield from self.run(Call(("ZADD", index, 0, member), writes=True), where)
        activity = micros(last_activity(chronicum))
        yield from self.idle(scripts.IDLE_ADD, digest, chronicum.id, activity, where)

    def idle(
        self, script: scripts.Script, digest: str, chronicum_id: str, activity: int | None, where: str
    ) -> Plan[Operation, None]:
        """Run an idle index ``script`` on the chronicum's entries (``activity``: ``None`` to drop them)."""
        keys = (idle_index_key(self.prefix), owner_idle_key(self.prefix, digest))
        args = (chronicum_id,) if activity is None else (activity, chronicum_id)
        yield from self.run(Run(script, keys, args, writes=True), where)

    def list_chronica(
        self, owner_id: str, limit: int, after: ListingPosition | None
    ) -> Plan[Operation, list[Chronicum]]:
        """Up to ``limit`` of the owner's chronica, newest first, from the owner's index.

        Each entry read is checked against the chronicum it names (same owner, same start, not
        erased); entries that do not match (a create cut short, a lost create race, an erasure cut
        short) are skipped, and more are read until the page is full or the index ends.
        """
        where = "list chronica"
        index = owner_index_key(self.prefix, owner_digest(owner_id))
        top = "+" if after is None else "(" + listing_member(after[0], after[1])
        page: list[Chronicum] = []
        while len(page) < limit:
            wanted = limit - len(page)
            members: list[str] = yield from self.run(
                Call(("ZREVRANGEBYLEX", index, top, "-", "LIMIT", 0, wanted)), where
            )
            if not members:
                break
            entries = [parse_listing_member(member) for member in members]
            found = yield from self.chronica_of([chronicum_id for _, chronicum_id in entries], where)
            for (started, _), chronicum in zip(entries, found, strict=True):
                if (
                    chronicum is not None
                    and chronicum.owner_id == owner_id
                    and micros(chronicum.started_at) == started
                ):
                    page.append(chronicum)
            if len(members) < wanted:
                break
            top = "(" + members[-1]
        return page

    def erase(self, chronicum_id: str, owner_digest: str) -> Plan[Operation, int]:
        """Turn the chronicum and its forks into markers in one script, then drop their index entries.

        Returns how many acta were erased. Raises ``ChronicumNotFound`` when there is no live
        chronicum with that id.
        """
        erased = yield from self._erase(chronicum_id, owner_digest, "", "erase chronicum")
        if erased is None:
            raise ChronicumNotFound(chronicum_id)
        return erased[0]

    def _erase(
        self, chronicum_id: str, digest: str, owner_id: str, where: str, idle_before: str = ""
    ) -> Plan[Operation, tuple[int, int] | None]:
        """Erase the chronicum and its forks (of ``owner_id`` only, unless ``""``), then unindex them.

        With ``idle_before`` (microseconds), only if the last activity of each is before that
        moment. Returns how many acta and how many chronica were erased; ``None`` if none was.
        """
        answer = yield from self._erase_family(chronicum_id, digest, owner_id, idle_before, where)
        if answer[0] != "erased":
            return None
        erased = list(zip(answer[2::2], answer[3::2], strict=True))
        for erased_id, started in erased:
            yield from self._unindex(erased_id, digest, started, where)
        return int(answer[1]), len(erased)

    def _erase_family(
        self, chronicum_id: str, digest: str, owner_id: str, idle_before: str, where: str
    ) -> Plan[Operation, Any]:
        """Read the chronicum's fork set, then run :data:`chronica_redis.scripts.ERASE` on it and them.

        Tried again while forks are made between the two (the script finds another fork set).
        """
        keys = self.keys_of(chronicum_id)
        looked_further = False
        for _ in range(ERASE_TRIES):
            forks: list[str] = sorted((yield from self.run(Call(("SMEMBERS", keys.forks)), where)))
            root = self.root_of(chronicum_id)
            every = list(keys.every_key())
            for fork_id in forks:
                every += family_keys(self.prefix, root, fork_id).every_key()
            args: tuple[str | int, ...] = (digest, owner_id, chronicum_id, self.channel, idle_before)
            args += (len(forks), *forks)
            answer = yield from self.run(Run(scripts.ERASE, tuple(every), args, writes=True), where)
            if answer[0] in ("gone", "other") and not looked_further:
                looked_further = True
                moved = yield from self.moved(keys, where)
                if moved is not None:
                    keys = moved
                    continue
            if answer[0] != "retry":
                return answer
        raise StoreError(f"redis: {where}", "forks kept being made while the chronicum was erased")

    def _unindex(self, chronicum_id: str, digest: str, started: str, where: str) -> Plan[Operation, None]:
        """Drop an erased chronicum's entries from its owner's index and the idle indexes."""
        member = listing_member(from_micros(started), chronicum_id)
        yield from self.run(Call(("ZREM", owner_index_key(self.prefix, digest), member), writes=True), where)
        yield from self.idle(scripts.IDLE_DROP, digest, chronicum_id, None, where)

    def erase_owner(self, owner_id: str, owner_digest: str) -> Plan[Operation, int]:
        """Erase every chronicum the owner's index names that is the owner's (forks with their source).

        Returns how many were erased. Entries naming a marker or another owner's chronicum are
        dropped; an entry naming no chronicum at all is left (a create may be between its two steps).
        """
        where = "erase owner"
        index = owner_index_key(self.prefix, owner_digest)
        erased = 0
        top = "+"
        while True:
            members: list[str] = yield from self.run(
                Call(("ZREVRANGEBYLEX", index, top, "-", "LIMIT", 0, LISTING_PAGE)), where
            )
            for member in members:
                _, chronicum_id = parse_listing_member(member)
                answer = yield from self._erase_family(chronicum_id, owner_digest, owner_id, "", where)
                if answer[0] == "erased":
                    for erased_id, started in zip(answer[2::2], answer[3::2], strict=True):
                        erased += 1
                        yield from self._unindex(erased_id, owner_digest, started, where)
                elif answer[0] != "gone":
                    yield from self.run(Call(("ZREM", index, member), writes=True), where)
            if len(members) < LISTING_PAGE:
                return erased
            top = "(" + members[-1]

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> Plan[Operation, bool]:
        """The owner's index entry, then the marker replaced by ``chronicum`` if its digest matches."""
        yield from self._index(chronicum, "reopen chronicum")
        reopened, _ = yield from self.on_chronicum(
            chronicum.id,
            lambda keys: Run(
                scripts.REOPEN,
                (keys.meta,),
                (owner_digest, chronicum.owner_id, micros(chronicum.started_at)),
                writes=True,
            ),
            lambda answer: answer != 1,
            "reopen chronicum",
        )
        return bool(reopened == 1)

    def withdraw(self, chronicum_id: str, owner_digest: str) -> Plan[Operation, bool]:
        """Turn the chronicum into its marker if it holds no acta (one script), then drop its index entries.

        An append moves ``seq`` in its own script on the chronicum's slot, so the script sees every
        actum that landed. Returns whether it withdrew the chronicum (``False``: it holds acta, is
        missing, a marker or a fork; nothing changed).
        """
        where = "withdraw chronicum"
        keys = self.keys_of(chronicum_id)
        arguments = (owner_digest, chronicum_id, self.channel)
        started = yield from self.run(Run(scripts.WITHDRAW, keys.every_key(), arguments, writes=True), where)
        if started is None:
            return False
        yield from self._unindex(chronicum_id, owner_digest, started, where)
        return True

    def chronica_of(
        self, chronicum_ids: Sequence[str], where: str
    ) -> Plan[Operation, list[Chronicum | None]]:
        """The chronica with these ids, read together (``None`` for a missing or erased one).

        One read of their homes, and one more of their families' slots for those that are forks.
        """
        homes = yield from self.run(
            Batch(
                tuple(
                    ("HMGET", self.keys(chronicum_id).meta, *CHRONICUM_FIELDS, "root")
                    for chronicum_id in chronicum_ids
                )
            ),
            where,
        )
        found = [
            chronicum_of(chronicum_id, row) for chronicum_id, row in zip(chronicum_ids, homes, strict=True)
        ]
        forks = [
            (index, chronicum_ids[index], row[-1]) for index, row in enumerate(homes) if row[-1] is not None
        ]
        if forks:
            rows = yield from self.run(
                Batch(
                    tuple(
                        ("HMGET", fork_keys(self.prefix, root, fork_id).meta, *CHRONICUM_FIELDS)
                        for _, fork_id, root in forks
                    )
                ),
                where,
            )
            for (index, fork_id, root), row in zip(forks, rows, strict=True):
                self.remember_root(fork_id, root)
                found[index] = chronicum_of(fork_id, row)
        return found


CHRONICUM_FIELDS: Final = ("owner", "started", "last", "from", "at")
"""The fields of a chronicum's hash that :func:`chronicum_of` reads, in its order."""


def chronicum_of(chronicum_id: str, row: Sequence[Any]) -> Chronicum | None:
    """The chronicum a hash's :data:`CHRONICUM_FIELDS` hold (``None``: no owner, so none)."""
    owner, started, last, source, at = row[:5]
    if owner is None:
        return None
    return Chronicum(
        chronicum_id,
        owner,
        from_micros(started),
        None if last is None else from_micros(last),
        None if source is None else ForkPoint(source, at or ""),
    )


def _absent(answer: Any) -> bool:
    return answer is None
