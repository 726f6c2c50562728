"""Every store operation written once, as a plan that does no I/O (see :mod:`chronica_core.plans`).

A plan yields :class:`~chronica_sqlalchemy.steps.Step` values and receives each step's outcome; it
builds the statements' parameters, turns rows into :class:`Actum` and :class:`Chronicum`, and
SQLAlchemy errors into Chronica errors. What differs between databases comes from the store's
dialect room (:mod:`chronica_sqlalchemy.dialects`); :mod:`.executor` runs a plan on one connection.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CursorResult,
    Dialect,
    Executable,
    Integer,
    String,
    and_,
    bindparam,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import DBAPIError, IntegrityError

from chronica_core import clock
from chronica_core.errors import ActumTooLarge, ChronicumExists, ChronicumNotFound
from chronica_core.history import Layout, Located, Segment, StaleLayout, WindowReads, WindowRows
from chronica_core.limits import actum_size, check_actum_size
from chronica_core.model import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, recorded_at
from chronica_core.plans import Plan
from chronica_core.retention import last_activity
from chronica_core.rows import check_row, check_rows
from chronica_core.store import ListingPosition
from chronica_sqlalchemy.acta_rows import ACTOR_KINDS, KINDS, actum_of, chronicum_columns, chronicum_of
from chronica_sqlalchemy.dialects import StoreDialect, store_dialect_class
from chronica_sqlalchemy.dialects.postgresql import follow_channel
from chronica_sqlalchemy.erasure import EMPTIED, Erasure
from chronica_sqlalchemy.history import HistoryPlans
from chronica_sqlalchemy.migrations import Migrations
from chronica_sqlalchemy.schema import SCHEMA_VERSION, Identifier, Tables, UTCDateTime
from chronica_sqlalchemy.steps import COMMIT, ROLLBACK, Step, again_if_disconnected, execute, translated

__all__ = ["Plans"]

_BATCH_COLUMNS = 15  # the parameters one row of a batch's INSERT takes
_BATCH_ROW_RESERVE = 8 * 1024  # bytes of a batch row's other values, escaped, at their largest
_KINDS, _ACTOR_KINDS = KINDS, ACTOR_KINDS


@functools.lru_cache(maxsize=256)
def _padded(name: str, kinds: tuple[ActumKind | ActorKind, ...], count: int) -> dict[str, str]:
    """The values of ``kinds`` in ``count`` parameters ``name_0``..., the last repeated (``IN`` ignores it).

    A fixed number of parameters keeps one statement per window shape. The caller copies the dict.
    """
    values = [kind.value for kind in kinds[:count]]
    return {f"{name}_{index}": values[min(index, len(values) - 1)] for index in range(count)}


def _first(plan: Plan[Step, list[Actum]]) -> Plan[Step, Actum]:
    return (yield from plan)[0]


def _slots(name: str, count: int) -> list[Any]:
    return [bindparam(f"{name}_{index}", type_=String()) for index in range(count)]


class Plans:
    """The statements of one store, built once for its dialect and tables, and its operations as plans.

    Each operation is one transaction; on PostgreSQL those that are one statement (a read, an
    append, a batch, a create, a reopen) run in the driver's autocommit mode instead, one round
    trip each (see :mod:`chronica_sqlalchemy.dialects.postgresql`).

    Args:
        tables: the table definitions (see :class:`chronica_sqlalchemy.schema.Tables`).
        dialect: the engine's SQLAlchemy dialect; it chooses the dialect room (:attr:`rules`).
        schema: the schema (database, on MariaDB/MySQL) holding the tables; ``None``: the default.
        max_content_bytes: a limit on content below the database's own (``None``: the database's).
        reads_in_autocommit: the reads (one statement each) ask for autocommit: on MariaDB/MySQL
            the store then runs them on its read engine, whose connections are in autocommit.
    """

    def __init__(
        self,
        tables: Tables,
        dialect: Dialect,
        schema: str | None = None,
        max_content_bytes: int | None = None,
        reads_in_autocommit: bool = False,
    ) -> None:
        self.tables, self.dialect, self.schema = tables, dialect, schema
        self.rules: StoreDialect = store_dialect_class(dialect.name)(tables, dialect, schema)
        self.max_content_bytes = max_content_bytes
        self.channel = follow_channel(schema)  # PostgreSQL: the channel appends and erasures notify
        self.autocommit = self.rules.autocommit_writes
        self.read_autocommit = self.autocommit or reads_in_autocommit
        self._content_limit: int | None = None  # the database's, read once (see content_limit)
        self.listing_index = self.rules.listing_index()
        self._migrations = Migrations(tables, self.rules, self.listing_index, self.rules.history_indexes())
        self._erasure = Erasure(tables, self.rules, dialect, self.read_autocommit)
        self._history = HistoryPlans(tables, self.rules, dialect, self.read_autocommit)
        chronica, acta = tables.chronica, tables.acta
        live = chronica.c.owner_digest.is_(None)  # not an erased chronicum's marker
        by_id = chronica.c.id == bindparam("chronicum_id")
        self._chronicum_columns = chronicum_columns(chronica)
        self._select_chronicum = select(*self._chronicum_columns).where(by_id, live)
        self._select_any_chronicum = select(chronica.c.id).where(by_id)
        keyed = acta.alias("keyed")  # a key's write: the keyed actum and the batch_size - 1 after it
        self._select_keyed = (
            select(acta.c.chronicum_id, *self.rules.actum_columns())
            .select_from(
                keyed.join(
                    acta,
                    and_(
                        acta.c.chronicum_id == keyed.c.chronicum_id,
                        acta.c.seq >= keyed.c.seq,
                        acta.c.seq < keyed.c.seq + func.coalesce(keyed.c.batch_size, 1),
                    ),
                )
            )
            .where(
                keyed.c.chronicum_id == bindparam("chronicum_id"),
                keyed.c.idempotency_key == bindparam("idempotency_key"),
            )
            .order_by(acta.c.seq)
        )
        reopen = (
            update(chronica)
            .where(by_id, chronica.c.owner_digest == bindparam("digest"))
            .values(
                owner_id=bindparam("owner", type_=Identifier()),
                started_at=bindparam("started", type_=UTCDateTime()),
                last_actum_at=bindparam("last", type_=UTCDateTime()),
                last_active=bindparam("active", type_=UTCDateTime()),
                last_seq=0,
                owner_digest=None,
                layout_version=chronica.c.layout_version + 1,
            )
        )
        summaries = tables.summaries
        self._insert_summary = insert(summaries).from_select(
            [
                summaries.c.chronicum_id,
                summaries.c.position,
                summaries.c.first_position,
                summaries.c.last_position,
                summaries.c.actor_kind,
            ],
            select(
                acta.c.chronicum_id,
                acta.c.seq,
                bindparam("first", type_=Integer()),
                bindparam("last", type_=Integer()),
                acta.c.actor_kind,
            ).where(acta.c.chronicum_id == bindparam("chronicum_id"), acta.c.id == bindparam("actum_id")),
        )
        self._reopen = self.rules.returning(reopen, chronica.c.id)
        empty = (chronica.c.last_seq == 0, chronica.c.forked_from_id.is_(None))  # a plain one, no acta
        withdraw = (
            update(chronica)
            .where(by_id, live, *empty)
            .values(**EMPTIED, owner_digest=bindparam("digest", type_=Identifier()))
        )
        self._withdraw = self.rules.returning(withdraw, *self.rules.notify((chronica.c.id,)))
        listing = select(*self._chronicum_columns).where(chronica.c.owner_id == bindparam("owner"), live)
        after = self.rules.after(
            bindparam("after_at", type_=UTCDateTime()), bindparam("after_id", type_=Identifier())
        )
        listing = listing.order_by(chronica.c.started_at.desc(), self.rules.listed_id().desc())
        limit = bindparam("limit", type_=Integer())
        self._listings = {False: listing.limit(limit), True: listing.where(after).limit(limit)}
        self._windows: dict[tuple[bool, bool, bool], Executable] = {}

    # --- the operations -------------------------------------------------------------------

    def create(self, chronicum: Chronicum) -> Plan[Step, None]:
        """Save ``chronicum``; ``ChronicumExists`` if its id is taken (read back to be sure)."""
        return translated("create chronicum", self._create(chronicum))

    def get(self, chronicum_id: str) -> Plan[Step, Chronicum]:
        """Return the chronicum; ``ChronicumNotFound`` if there is none."""
        return translated("get chronicum", again_if_disconnected(lambda: self._get(chronicum_id)))

    def record(self, actum: Actum) -> Plan[Step, Actum]:
        """Append ``actum`` at the chronicum's next place; ``ChronicumNotFound`` if there is none."""
        return translated("record actum", _first(self._record([actum], None)))

    def record_idempotent(self, actum: Actum, key: str) -> Plan[Step, Actum]:
        """Append ``actum`` under ``key``, or return the actum the key already holds in the chronicum."""
        return translated("record actum", again_if_disconnected(lambda: _first(self._record([actum], key))))

    def acta(self, chronicum_id: str, query: ActaQuery, *, own: bool = False) -> Plan[Step, list[Actum]]:
        """Return the context window in one query; ``ChronicumNotFound`` if the chronicum is missing.

        Raises ``StaleLayout`` for a chronicum with a summary or an answer (see ``HistoryStore``),
        unless ``own``: then its own acta are read whatever it holds (for followers).
        """
        return translated("get acta", again_if_disconnected(lambda: self._acta(chronicum_id, query, own)))

    def record_many(self, acta: Sequence[Actum], key: str | None) -> Plan[Step, list[Actum]]:
        """Append ``acta`` (one chronicum's, at least one) in one transaction, consecutively.

        With ``key``, returns what the key's write stored if it was used in the chronicum.
        Raises ``ChronicumNotFound`` or ``ActumTooLarge``, nothing written.
        """
        batch = list(acta)
        if key is None:
            return translated("record acta", self._record(batch, None))
        return translated("record acta", again_if_disconnected(lambda: self._record(batch, key)))

    def list_chronica(
        self, owner_id: str, limit: int, after: ListingPosition | None
    ) -> Plan[Step, list[Chronicum]]:
        """Return up to ``limit`` of the owner's live chronica, newest first, after ``after``; one query."""
        return translated(
            "list chronica", again_if_disconnected(lambda: self._list_chronica(owner_id, limit, after))
        )

    def erase(self, chronicum_id: str, owner_digest: str) -> Plan[Step, int]:
        """Erase the chronicum and its forks into markers in one transaction; return the acta deleted.

        Raises ``ChronicumNotFound`` when there is no live chronicum with that id.
        """
        return translated("erase chronicum", self._erasure.erase(chronicum_id, owner_digest))

    def erase_owner(self, owner_id: str, owner_digest: str) -> Plan[Step, int]:
        """Erase every live chronicum of ``owner_id``, each in its own transaction; return how many."""
        return translated("erase owner", self._erasure.erase_owner(owner_id, owner_digest))

    def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> Plan[Step, list[Chronicum]]:
        """See :meth:`chronica_core.RetentionStore.idle_chronica`: one query, on the idle index."""
        return translated(
            "idle chronica",
            again_if_disconnected(lambda: self._erasure.idle_chronica(idle_before, owner_id, after, limit)),
        )

    def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> Plan[Step, int]:
        """See :meth:`chronica_core.RetentionStore.erase_idle`: one transaction."""
        return translated("erase idle", self._erasure.erase_idle(chronicum_id, idle_before, owner_digest))

    def layout(self, chronicum_id: str) -> Plan[Step, Layout]:
        """See :meth:`chronica_core.HistoryStore.layout`: one query."""
        return translated("layout", again_if_disconnected(lambda: self._history.layout(chronicum_id)))

    def window(self, chronicum_id: str, reads: WindowReads) -> Plan[Step, WindowRows]:
        """See :meth:`chronica_core.HistoryStore.window`: one query."""
        return translated("window", again_if_disconnected(lambda: self._history.window(chronicum_id, reads)))

    def locate(
        self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]
    ) -> Plan[Step, dict[str, Located]]:
        """See :meth:`chronica_core.HistoryStore.locate`: one query."""
        return translated("locate", again_if_disconnected(lambda: self._history.locate(lineage, actum_ids)))

    def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> Plan[Step, None]:
        """See :meth:`chronica_core.HistoryStore.fork`: one transaction."""
        return translated("fork chronicum", self._history.fork(chronicum, lineage))

    def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Plan[Step, Actum]:
        """See :meth:`chronica_core.HistoryStore.record_summary`: appended while the layout is ``version``."""
        if key is None:
            return translated("record summary", self._summary(actum, first, last, version, key))
        return translated(
            "record summary", again_if_disconnected(lambda: self._summary(actum, first, last, version, key))
        )

    def withdraw(self, chronicum_id: str, owner_digest: str) -> Plan[Step, bool]:
        """Turn the chronicum into its marker if it holds no acta; one ``UPDATE``.

        A writer moves ``last_seq`` under the row's lock in the transaction that appends, so the
        ``UPDATE``, which waits for that lock, sees every actum that landed. Returns whether it
        withdrew the chronicum (``False``: it holds acta, is missing or a marker; nothing changed).
        """
        parameters = {"chronicum_id": chronicum_id, "digest": owner_digest}
        return translated(
            "withdraw chronicum", self._update_one(self._withdraw, parameters, "withdraw chronicum")
        )

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> Plan[Step, bool]:
        """Turn the marker of ``chronicum.id`` holding ``owner_digest`` into ``chronicum``; one ``UPDATE``.

        Returns whether it did (``False``: no such marker; nothing changed).
        """
        return translated("reopen chronicum", self._reopen_marker(chronicum, owner_digest))

    def migrate(self, version: int = SCHEMA_VERSION) -> Plan[Step, None]:
        """Create the tables, or bring them to ``version`` (see :class:`.migrations.Migrations`)."""
        return translated("migrate", self._migrations.migrate(version))

    def check(self) -> Plan[Step, None]:
        """Refuse tables that are not this package's own, or not at the current version (one query)."""
        return translated("open", self._migrations.check())

    def content_limit(self) -> Plan[Step, int | None]:
        """Return the largest content ``record`` accepts, in bytes of UTF-8 (``None``: not known).

        Read from the database on first use (the dialect room says how), then kept; read again
        after the database refused a write as too large. Never above ``max_content_bytes``.
        """
        return translated("read content limit", self._limit(write=False))

    # --- the plans ------------------------------------------------------------------------

    def _limit(self, *, write: bool) -> Plan[Step, int | None]:
        limit = self._content_limit
        if limit is None:
            limit = yield from self.rules.content_limit(write)
            self._content_limit = limit = None if limit is None else max(limit, 0)
        if self.max_content_bytes is not None and (limit is None or self.max_content_bytes < limit):
            return self.max_content_bytes
        return limit

    def _create(self, chronicum: Chronicum) -> Plan[Step, None]:
        row = {
            "id": chronicum.id,
            "owner_id": chronicum.owner_id,
            "started_at": chronicum.started_at,
            "last_actum_at": chronicum.last_actum_at,
            "last_active": last_activity(chronicum),
            "last_seq": 0,
        }
        try:
            yield execute(insert(self.tables.chronica), row, write=True, autocommit=self.autocommit)
            yield COMMIT
        except IntegrityError:
            yield ROLLBACK  # taken by a chronicum or by an erased one's marker
            existing: CursorResult[Any] = yield execute(
                self._select_any_chronicum, {"chronicum_id": chronicum.id}
            )
            if existing.first() is not None:
                raise ChronicumExists(chronicum.id) from None
            raise

    def _get(self, chronicum_id: str) -> Plan[Step, Chronicum]:
        parameters = {"chronicum_id": chronicum_id}
        result: CursorResult[Any] = yield execute(
            self._select_chronicum, parameters, autocommit=self.read_autocommit
        )
        row: Any = result.first()
        if row is None:
            raise ChronicumNotFound(chronicum_id)
        check_row("sqlalchemy: get chronicum", "chronicum id", chronicum_id, row[0])
        return chronicum_of(row)

    def _summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Plan[Step, Actum]:
        """The key's write if it was used; else the append, if the layout is still ``version``."""
        if key is not None:
            kept = yield from self._keyed(actum.chronicum_id, key)
            if kept:
                return kept[0]
        if not isinstance(version, int) or isinstance(version, bool):
            raise StaleLayout(actum.chronicum_id)  # no layout of this store has that version
        try:
            stored = yield from self._record([actum], key, (first, last, version))
        except ChronicumNotFound:
            yield ROLLBACK
            itself: CursorResult[Any] = yield execute(
                self._select_chronicum, {"chronicum_id": actum.chronicum_id}, autocommit=self.read_autocommit
            )
            if itself.first() is not None:
                raise StaleLayout(actum.chronicum_id) from None
            raise
        return stored[0]

    def _record(
        self, acta: list[Actum], key: str | None, summary: tuple[int, int, int] | None = None
    ) -> Plan[Step, list[Actum]]:
        """Check every actum's size, move the counter by ``len(acta)``, insert them, commit.

        One ``at`` for the whole batch; the key and the batch's size on the first actum. A key
        another write holds makes the insert fail: that write's acta are read back instead.
        ``summary``: ``(first, last, version)`` of a summary (one actum), appended only while
        the layout is at ``version`` (else ``ChronicumNotFound``), and marked in ``summaries``.
        """
        limit = yield from self._limit(write=True)
        for actum in acta:
            check_actum_size(actum, limit)
        sizes = [actum_size(actum) for actum in acta]
        try:
            try:
                version = None if summary is None else summary[2]
                at = yield from self.rules.append(acta, key, clock.now(), self._chunks(sizes), version)
            except DBAPIError as error:
                yield from self._refused_as_too_large(
                    error, acta[max(range(len(acta)), key=sizes.__getitem__)]
                )
                raise
            if summary is not None:
                parameters = {
                    "chronicum_id": acta[0].chronicum_id,
                    "actum_id": acta[0].id,
                    "first": summary[0],
                    "last": summary[1],
                }
                yield execute(self._insert_summary, parameters)
            yield COMMIT
        except IntegrityError:
            if key is None:
                raise
            yield ROLLBACK
            kept = yield from self._keyed(acta[0].chronicum_id, key)
            if not kept:
                raise
            return kept
        return [recorded_at(actum, at) for actum in acta]

    def _chunks(self, sizes: list[int]) -> list[int]:
        """Where each ``INSERT`` of a batch of contents of ``sizes`` bytes ends (exclusive indices).

        A statement holds at most the dialect's parameters' worth of rows, and at most its budget
        of content (counting a reserve a row for the other values); usually one holds them all.
        """
        rows = self.rules.most_parameters // _BATCH_COLUMNS
        budget = self.rules.batch_budget(self._content_limit)
        ends: list[int] = []
        start, used = 0, 0
        for index, size in enumerate(sizes):
            cost = size + _BATCH_ROW_RESERVE
            if index > start and (index - start >= rows or (budget is not None and used + cost > budget)):
                ends.append(index)
                start, used = index, 0
            used += cost
        ends.append(len(sizes))
        return ends

    def _keyed(self, chronicum_id: str, key: str) -> Plan[Step, list[Actum]]:
        """What the write keyed ``key`` stored in the chronicum, in order (``[]``: nothing)."""
        parameters = {"chronicum_id": chronicum_id, "idempotency_key": key}
        result: CursorResult[Any] = yield execute(self._select_keyed, parameters)
        rows: list[Any] = list(result.all())
        check_rows("sqlalchemy: record actum", "chronicum id", chronicum_id, rows)
        return [actum_of(row[0], row[1:]) for row in rows]

    def _refused_as_too_large(self, error: DBAPIError, actum: Actum) -> Plan[Step, None]:
        """Raise ``ActumTooLarge`` if the database refused ``actum`` as too large.

        That happens only when its limit went down after the store read it: the transaction is
        rolled back, the limit read again (on a new connection: the failed one was ended), and
        the content is too large if it is over that. Otherwise this returns and the error stands.
        """
        self._content_limit = None
        if not self.rules.too_large(error):
            return
        yield ROLLBACK
        limit = yield from self._limit(write=False)
        size = actum_size(actum)
        if limit is not None and size > limit:
            raise ActumTooLarge(size, limit) from error

    def _list_chronica(
        self, owner_id: str, limit: int, after: ListingPosition | None
    ) -> Plan[Step, list[Chronicum]]:
        parameters: dict[str, Any] = {"owner": owner_id, "limit": limit}
        if after is not None:
            parameters["after_at"], parameters["after_id"] = after
        statement = self._listings[after is not None]
        result: CursorResult[Any] = yield execute(statement, parameters, autocommit=self.read_autocommit)
        rows: list[Any] = list(result.all())
        check_rows("sqlalchemy: list chronica", "owner id", owner_id, rows, column=1)
        return [chronicum_of(row) for row in rows]

    def _reopen_marker(self, chronicum: Chronicum, owner_digest: str) -> Plan[Step, bool]:
        parameters = {
            "chronicum_id": chronicum.id,
            "digest": owner_digest,
            "owner": chronicum.owner_id,
            "started": chronicum.started_at,
            "last": chronicum.last_actum_at,
            "active": last_activity(chronicum),
        }
        return (yield from self._update_one(self._reopen, parameters, "reopen chronicum"))

    def _update_one(self, statement: Executable, parameters: dict[str, Any], what: str) -> Plan[Step, bool]:
        """Run an ``UPDATE`` of the row of ``parameters["chronicum_id"]``; commit it if it changed the row.

        Returns whether it did (``False``: no row matched; rolled back).
        """
        updated: CursorResult[Any] = yield execute(
            statement, parameters, write=True, autocommit=self.autocommit
        )
        if self.dialect.update_returning:
            row: Any = updated.first()
            if row is not None:
                check_row(f"sqlalchemy: {what}", "chronicum id", parameters["chronicum_id"], row[0])
            done = row is not None
        else:
            done = updated.rowcount == 1
        yield COMMIT if done else ROLLBACK
        return done

    def _acta(self, chronicum_id: str, query: ActaQuery, own: bool) -> Plan[Step, list[Actum]]:
        statement, parameters = self.window_for(chronicum_id, query)
        result: CursorResult[Any] = yield execute(statement, parameters, autocommit=self.read_autocommit)
        rows = list(result.all())
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        check_rows("sqlalchemy: get acta", "chronicum id", chronicum_id, rows)
        if not own and any(row[-1] for row in rows):
            raise StaleLayout(chronicum_id)
        return [
            actum_of(row[0], row[2:-1])
            for row in self.rules.in_order(rows, query.last_n > 0)
            if row[1] is not None
        ]

    def window_for(self, chronicum_id: str, query: ActaQuery) -> tuple[Executable, dict[str, Any]]:
        """The context-window statement for ``query`` (built once per shape) and its parameters.

        Parameters: ``chronicum_id``; ``actum_kind_0`` to ``actum_kind_3`` and ``actor_kind_0`` to
        ``actor_kind_2`` (the wanted values, the last repeated to fill every slot); ``last_n``.
        Rows: see :meth:`chronica_sqlalchemy.dialects.StoreDialect.window`.
        """
        parameters: dict[str, Any] = {"chronicum_id": chronicum_id}
        if query.actum_kinds:
            parameters.update(_padded("actum_kind", tuple(query.actum_kinds), len(_KINDS)))
        if query.actor_kinds:
            parameters.update(_padded("actor_kind", tuple(query.actor_kinds), len(_ACTOR_KINDS)))
        if query.last_n > 0:
            parameters["last_n"] = query.last_n
        shape = (bool(query.actum_kinds), bool(query.actor_kinds), query.last_n > 0)
        statement = self._windows.get(shape)
        if statement is None:
            acta = self.tables.acta
            filters: list[ColumnElement[bool]] = []
            if shape[0]:
                filters.append(acta.c.kind.in_(_slots("actum_kind", len(_KINDS))))
            if shape[1]:
                filters.append(acta.c.actor_kind.in_(_slots("actor_kind", len(_ACTOR_KINDS))))
            statement = self._windows[shape] = self.rules.window(filters, shape[2])
        return statement, parameters
