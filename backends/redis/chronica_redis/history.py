"""The history capability on Redis: forks, layouts, windows over a lineage, acta by id, summaries.

A fork lives in its family root's slot (see :mod:`chronica_redis.keys`): its hash, stream and
lists sit beside its ancestors', so a window over its whole lineage, a fork (atomic with the
source's erasure) and an erasure of a chronicum with its forks are each one script on one node.
A fork's home, in its own slot, only names that root; the store remembers it once read.

A fork copies none of its ancestors' acta: its lineage names the ranges it shares, and each read
of a range is a bounded read of the ancestor's stream or index lists (see
:data:`chronica_redis.history_scripts.READ`). It copies the summary marks standing in its shared
prefix (a few short strings), so that its layout is one read.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from typing import Any, Final

from chronica_core.errors import ChronicumExists, ChronicumNotFound
from chronica_core.history import (
    Layout,
    Located,
    RangeRead,
    Segment,
    SummaryMark,
    WindowReads,
    WindowRows,
)
from chronica_core.model import ActorKind, Actum, ActumKind, Chronicum, ForkPoint
from chronica_core.plans import Plan
from chronica_redis import history_scripts
from chronica_redis.keys import ChronicumKeys, family_keys, fork_keys, from_micros, micros
from chronica_redis.operations import Call, Operation, Run
from chronica_redis.plans import FAMILIES, entry_actum
from chronica_redis.retention import RetentionPlans

__all__ = ["HistoryPlans", "decode_lineage", "encode_lineage"]

_NO_VERSION: Final = "\x01"
"""A layout version no chronicum has (a ``record_summary`` given another store's version writes nothing)."""

_KINDS: Final = tuple(ActumKind)
_ACTOR_KINDS: Final = tuple(ActorKind)


def encode_lineage(segments: Sequence[Segment]) -> str:
    """A fork's ancestor segments as its hash keeps them: ``id NUL after NUL upto NUL`` each."""
    return "".join(f"{segment.chronicum_id}\0{segment.after}\0{segment.upto}\0" for segment in segments)


def decode_lineage(text: str) -> tuple[Segment, ...]:
    """The segments :func:`encode_lineage` wrote (``()`` for ``""``)."""
    items = text.split("\0")[:-1]
    return tuple(
        Segment(items[index], int(items[index + 1]), int(items[index + 2]))
        for index in range(0, len(items), 3)
    )


def _mark(text: str) -> SummaryMark:
    position, first, last, actor_kind = text.split(":")
    return SummaryMark(int(position), int(first), int(last), ActorKind(actor_kind))


def _position(entry: Sequence[Any]) -> int:
    return int(entry[0].partition("-")[0])


class _Keys:
    """The ``KEYS`` of one script, each named once; :meth:`at` gives a key's index (from 1)."""

    def __init__(self, *first: str) -> None:
        self.keys: list[str] = []
        self._index: dict[str, int] = {}
        for key in first:
            self.at(key)

    def at(self, key: str) -> int:
        index = self._index.get(key)
        if index is None:
            self.keys.append(key)
            index = self._index[key] = len(self.keys)
        return index


class HistoryPlans(RetentionPlans):
    """:class:`chronica_redis.retention.RetentionPlans` with the history capability's plans."""

    def __init__(
        self, prefix: str, wait_replicas: int, wait_timeout: float, max_content_bytes: int | None
    ) -> None:
        super().__init__(prefix, wait_replicas, wait_timeout, max_content_bytes)
        self._reads: dict[str, tuple[WindowReads, ChronicumKeys, Run]] = {}
        """The script of the latest window read of each chronicum: the rules ask for the same
        reads (the very same object) over and over, and the script is then the same too."""
        self._reads_lock = threading.Lock()

    def _member(self, chronicum_id: str, keys: ChronicumKeys, member_id: str) -> ChronicumKeys:
        """The keys of ``member_id``, of the lineage of ``chronicum_id`` (whose keys are ``keys``)."""
        if member_id == chronicum_id:
            return keys
        return family_keys(self.prefix, self.root_of(chronicum_id), member_id)

    def _segments(
        self, chronicum_id: str, keys: ChronicumKeys, names: _Keys, segments: Sequence[Segment]
    ) -> list[str | int]:
        """The arguments that name ``segments`` to the scripts' ``locate``."""
        args: list[str | int] = [len(segments)]
        for segment in segments:
            member = self._member(chronicum_id, keys, segment.chronicum_id)
            args += [names.at(member.meta), names.at(member.positions), names.at(member.acta)]
            args += [segment.after, "" if segment.upto is None else segment.upto]
        return args

    def layout(self, chronicum_id: str) -> Plan[Operation, Layout]:
        """The chronicum, its lineage, its summary marks and its version, in one script.

        Raises ``ChronicumNotFound`` for a missing or erased chronicum.
        """
        answer, _ = yield from self.on_chronicum(
            chronicum_id,
            lambda keys: Run(history_scripts.LAYOUT, (keys.meta, keys.marks), ()),
            _absent,
            "read layout",
        )
        if answer is None:
            raise ChronicumNotFound(chronicum_id)
        owner, started, last, source, at, base, lineage, version, marks = answer
        chronicum = Chronicum(
            chronicum_id,
            owner,
            from_micros(started),
            from_micros(last) if last else None,
            ForkPoint(source, at) if source else None,
        )
        segments = (*decode_lineage(lineage), Segment(chronicum_id, int(base or 0), None))
        return Layout(chronicum, segments, tuple(map(_mark, marks)), (version, len(marks)))

    def window(self, chronicum_id: str, reads: WindowReads) -> Plan[Operation, WindowRows]:
        """Every read of ``reads`` in one script, with the chronicum's layout version.

        Raises ``ChronicumNotFound`` for a missing or erased chronicum.
        """

        def operation(keys: ChronicumKeys) -> Run:
            known = self._reads.get(chronicum_id)
            if known is not None and known[0] is reads and known[1] == keys:
                return known[2]
            run = build(keys)
            with self._reads_lock:
                self._reads[chronicum_id] = (reads, keys, run)
                if len(self._reads) > FAMILIES:
                    del self._reads[next(iter(self._reads))]
            return run

        def build(keys: ChronicumKeys) -> Run:
            names = _Keys(keys.meta, keys.marks)
            args: list[str | int] = [len(reads.reads)]
            for read in reads.reads:
                if isinstance(read, RangeRead):
                    segment = read.segment
                    member = self._member(chronicum_id, keys, segment.chronicum_id)
                    lists = _lists(member, read)
                    args += ["r", names.at(member.acta), names.at(member.marks), segment.after]
                    args += ["" if segment.upto is None else segment.upto, read.limit]
                    args += ["1" if read.newest else "0", "1" if read.summaries else "0", len(lists)]
                    args += [names.at(key) for key in lists]
                else:
                    member = self._member(chronicum_id, keys, read.chronicum_id)
                    args += ["p", names.at(member.acta), len(read.positions), *read.positions]
            if reads.answered_in is None:
                args.append(0)
            else:
                args += self._segments(chronicum_id, keys, names, reads.answered_in)
            return Run(history_scripts.READ, tuple(names.keys), tuple(args))

        answer, _ = yield from self.on_chronicum(chronicum_id, operation, _absent, "read window")
        if answer is None:
            raise ChronicumNotFound(chronicum_id)
        version, marks, results, found = answer
        acta: list[Actum] = []
        positions: list[int] = []
        for read, entries in zip(reads.reads, results, strict=True):
            if isinstance(read, RangeRead):
                member_id = read.segment.chronicum_id
                if read.newest:  # read newest first
                    entries.reverse()
            else:
                member_id = read.chronicum_id
            for entry in entries:
                acta.append(entry_actum(member_id, entry))
                positions.append(_position(entry))
        answered = []
        if reads.answered_in is not None:
            answered = [
                Located(_position(entry), entry_actum(reads.answered_in[segment - 1].chronicum_id, entry))
                for segment, entry in found
            ]
        return WindowRows(acta, positions, answered, (version, int(marks)))

    def locate(
        self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]
    ) -> Plan[Operation, dict[str, Located]]:
        """The acta of ``lineage`` with these ids, by id (one script; ids not found are left out)."""
        chronicum_id = lineage[-1].chronicum_id

        def operation(keys: ChronicumKeys) -> Run:
            names = _Keys(keys.meta)
            args = self._segments(chronicum_id, keys, names, lineage)
            return Run(history_scripts.LOCATE, tuple(names.keys), (*args, *actum_ids))

        answer, _ = yield from self.on_chronicum(chronicum_id, operation, _absent, "locate acta")
        if answer is None:
            return {}
        found: dict[str, Located] = {}
        for segment, entry in answer:
            actum = entry_actum(lineage[segment - 1].chronicum_id, entry)
            found[actum.id] = Located(_position(entry), actum)
        return found

    def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> Plan[Operation, None]:
        """Save the fork ``chronicum`` with ``lineage`` in its source's family slot.

        First its home is made to point at the family's root (``ChronicumExists`` if the id is
        taken), then its index entries are added, then one script checks the source and saves the
        fork (``ChronicumNotFound`` if the source is missing or erased: the home is then removed).
        """
        where = "fork chronicum"
        assert chronicum.forked_from is not None
        source_id = chronicum.forked_from.chronicum_id
        live, source = yield from self.on_chronicum(
            source_id, lambda keys: Call(("HEXISTS", keys.meta, "owner")), lambda answer: answer == 0, where
        )
        if live == 0:
            raise ChronicumNotFound(source_id)
        root = self.root_of(source_id)
        home = self.keys(chronicum.id)
        pointed = yield from self.run(Run(history_scripts.POINT, (home.meta,), (root,), writes=True), where)
        if pointed != 1:
            raise ChronicumExists(chronicum.id)
        self.remember_root(chronicum.id, root)
        yield from self._index(chronicum, where)
        keys = fork_keys(self.prefix, root, chronicum.id)
        ancestors = dict.fromkeys(segment.chronicum_id for segment in lineage[:-1])
        sets = [family_keys(self.prefix, root, ancestor).forks for ancestor in ancestors]
        last = chronicum.last_actum_at
        args = (
            chronicum.owner_id,
            micros(chronicum.started_at),
            "" if last is None else micros(last),
            source_id,
            chronicum.forked_from.actum_id,
            lineage[-1].after,
            encode_lineage(lineage[:-1]),
            "\0" + "".join(f"{ancestor}\0" for ancestor in ancestors),
            chronicum.id,
        )
        saved = yield from self.run(
            Run(
                history_scripts.FORK,
                (keys.meta, keys.marks, source.meta, source.marks, *sets),
                args,
                writes=True,
            ),
            where,
        )
        if saved != "ok":
            yield from self.run(Call(("DEL", home.meta), writes=True), where)
            raise ChronicumNotFound(source_id)

    def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Plan[Operation, Actum]:
        """Append the summary ``actum`` and its mark in one script, if the layout version is ``version``.

        Raises ``StaleLayout`` (nothing written) otherwise, unless ``key`` was used: then the
        actum that write stored is returned.
        """
        if isinstance(version, tuple) and len(version) == 2 and isinstance(version[0], str):
            summary = f"{version[0]}\0{version[1]}\0{first}\0{last}\0"
        else:
            summary = f"{_NO_VERSION}\0-1\0{first}\0{last}\0"
        stored = yield from self._append([actum], key, "record summary", summary)
        return stored[0]


def _lists(keys: ChronicumKeys, read: RangeRead) -> tuple[str, ...]:
    """The index lists a range read's filters name (``()``: no filter, the stream is read)."""
    kinds = _KINDS if read.actum_kinds is None else tuple(dict.fromkeys(read.actum_kinds))
    actor_kinds = _ACTOR_KINDS if read.actor_kinds is None else tuple(dict.fromkeys(read.actor_kinds))
    if len(kinds) == len(_KINDS) and len(actor_kinds) == len(_ACTOR_KINDS):
        return ()
    return tuple(keys.index(kind, actor_kind) for kind in kinds for actor_kind in actor_kinds)


def _absent(answer: Any) -> bool:
    return answer is None
