"""Creating the tables, or bringing them to the current schema version, safe with many processes.

Serialised per database (and schema) by the dialect room's lock: SQLite by ``BEGIN IMMEDIATE``
(its DDL is transactional), PostgreSQL by a transaction-scoped advisory lock, MariaDB/MySQL by
``GET_LOCK`` (its DDL commits by itself). Every ``CREATE`` also says ``IF NOT EXISTS``. Tables
this package did not create are refused, never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Column, CursorResult, Index, Table, func, insert, select, text, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.schema import CreateColumn, CreateIndex, CreateSchema, CreateTable

from chronica_core.errors import StoreError
from chronica_core.plans import Plan
from chronica_sqlalchemy.dialects import StoreDialect
from chronica_sqlalchemy.schema import OTHER_BACKEND_VERSIONS, SCHEMA_VERSION, Tables
from chronica_sqlalchemy.steps import COMMIT, DROP_CONNECTION, ROLLBACK, Step, execute

__all__ = ["Migrations"]

_COMPONENT = "chronica"
_log = logging.getLogger("chronica.sqlalchemy")


class Migrations:
    """The migration plans of one store.

    Args:
        tables: the store's tables at :data:`SCHEMA_VERSION`.
        rules: the store's dialect room.
        listing_index: the listing index, built once on ``tables``.
        indexes: the indexes version 3 adds to ``chronica`` and ``acta``, built once on ``tables``.
    """

    def __init__(
        self, tables: Tables, rules: StoreDialect, listing_index: Index, indexes: tuple[Index, ...]
    ) -> None:
        self.tables, self.rules, self.listing_index, self.indexes = tables, rules, listing_index, indexes
        self.schema = rules.schema
        self._version = select(tables.versions.c.version).where(tables.versions.c.component == _COMPONENT)

    def migrate(self, target: int = SCHEMA_VERSION) -> Plan[Step, None]:
        """Bring the tables to ``target`` under the lock (an older one only to build an older release's)."""
        locked = yield from self.rules.lock()
        try:
            yield from self._create_tables(target)
        except GeneratorExit:
            raise
        except BaseException:
            if locked:
                yield from self._release_lock()
            raise
        if locked:
            failed = yield from self._release_lock()
            if failed is not None:
                raise failed

    def _release_lock(self) -> Plan[Step, SQLAlchemyError | None]:
        """Release the lock; if that fails, end the session (and the lock with it): return the error."""
        try:
            yield from self.rules.unlock()
        except SQLAlchemyError as error:
            yield DROP_CONNECTION
            return error
        return None

    def _create_tables(self, target: int) -> Plan[Step, None]:
        tables = self.tables
        found = yield from self._own_tables("migrate")
        if tables.versions.name not in found:
            if self.schema is not None and self.rules.creates_schemas:
                yield execute(CreateSchema(self.schema, if_not_exists=True), write=True)
            yield execute(CreateTable(tables.versions, if_not_exists=True), write=True)
        result: CursorResult[Any] = yield execute(self._version)
        version: int | None = result.scalar()
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                "sqlalchemy: migrate",
                f"the database is at schema version {version}, newer than this chronica-sqlalchemy "
                f"knows ({SCHEMA_VERSION}); upgrade chronica-sqlalchemy",
            )
        if version is None:
            created = tables if target == SCHEMA_VERSION else Tables.build(self.schema, target)
            yield execute(CreateTable(created.chronica, if_not_exists=True))
            yield execute(CreateTable(created.acta, if_not_exists=True))
            if target >= 2:
                yield execute(CreateIndex(self.listing_index, if_not_exists=True))
            if target >= 3:
                yield from self._history_tables()
            if target >= 4:
                yield from self.rules.keyed_acta_only()
            yield execute(insert(tables.versions), {"component": _COMPONENT, "version": target})
        elif version < target:
            for step in range(version + 1, target + 1):
                yield from self._step(step)
            versions = tables.versions
            yield execute(update(versions).where(versions.c.component == _COMPONENT).values(version=target))
        yield COMMIT
        where = f"schema {self.schema!r}" if self.schema is not None else "the default schema"
        if version is None:
            _log.info("created the tables at schema version %d in %s", target, where)
        elif version < target:
            _log.info("migrated the tables from schema version %d to %d in %s", version, target, where)

    def _step(self, version: int) -> Plan[Step, None]:
        """The step from ``version - 1`` to ``version``.

        2. ``chronica.owner_digest`` and ``acta.batch_size`` (nullable: existing rows are live
           chronica and unbatched acta) and the listing index.
        3. The columns of native forms, forks, summaries, tool exchanges and retention (nullable,
           or with a default: existing acta read back as before, with plain positions, since a
           plain chronicum's positions are its ``seq``), the tables ``lineages`` and
           ``summaries``, the indexes, and each live chronicum's ``last_active``.
        4. On PostgreSQL, the idempotency key's unique index of the keyed acta only.
        5. ``last_active`` of each live chronicum before its ``started_at`` (a fork's that an
           earlier release set to its shared actum's ``at``) moved to ``started_at``.
        """
        tables = self.tables
        if version == 2:
            yield from self._add_columns(
                ((tables.chronica, tables.chronica.c.owner_digest), (tables.acta, tables.acta.c.batch_size))
            )
            yield execute(CreateIndex(self.listing_index, if_not_exists=True))
        elif version == 3:
            since_3 = Tables.build(self.schema, 2)
            added = [
                (table, column)
                for table, old in ((tables.chronica, since_3.chronica), (tables.acta, since_3.acta))
                for column in table.columns
                if column.name not in old.columns
            ]
            yield from self._add_columns(added)
            yield from self._history_tables()
            chronica = tables.chronica
            yield execute(
                update(chronica)
                .where(chronica.c.owner_digest.is_(None))
                .values(last_active=func.coalesce(chronica.c.last_actum_at, chronica.c.started_at))
            )
        elif version == 4:
            yield from self.rules.keyed_acta_only()
        elif version == 5:
            chronica = tables.chronica
            yield execute(
                update(chronica)
                .where(chronica.c.last_active < chronica.c.started_at)
                .values(last_active=chronica.c.started_at)
            )
        else:
            raise StoreError("sqlalchemy: migrate", f"no migration step to schema version {version}")

    def _add_columns(self, added: Iterable[tuple[Table, Column[Any]]]) -> Plan[Step, None]:
        dialect = self.rules.dialect
        for table, column in added:
            created = CreateColumn(column).compile(dialect=dialect)
            name = dialect.identifier_preparer.format_table(table)
            yield execute(text(f"ALTER TABLE {name} ADD COLUMN{self.rules.add_column_guard} {created}"))

    def _history_tables(self) -> Plan[Step, None]:
        """Version 3's tables and indexes (each ``IF NOT EXISTS``)."""
        tables = self.tables
        for table in (tables.lineages, tables.summaries):
            yield execute(CreateTable(table, if_not_exists=True))
            for index in sorted(table.indexes, key=lambda index: str(index.name)):
                yield execute(CreateIndex(index, if_not_exists=True))
        for index in self.indexes:
            yield execute(CreateIndex(index, if_not_exists=True))

    def check(self) -> Plan[Step, None]:
        """What a store opened without ``auto_migrate`` runs: one look at the catalog (and the version).

        Raises:
            StoreError: ``"sqlalchemy: open"`` for tables that are not this package's own (see
                :meth:`_own_tables`), or at an older schema version than :data:`SCHEMA_VERSION`.
        """
        found = yield from self._own_tables("open")
        if self.tables.versions.name in found:
            result: CursorResult[Any] = yield execute(self._version)
            version = result.scalar()
            if version is not None and version < SCHEMA_VERSION:
                raise StoreError(
                    "sqlalchemy: open",
                    f"the database is at schema version {version}, older than this chronica-sqlalchemy "
                    f"needs ({SCHEMA_VERSION}); migrate it: run `chronica migrate --store URL` or open "
                    "the store with auto_migrate=True",
                )
        yield ROLLBACK

    def _own_tables(self, operation: str) -> Plan[Step, set[str]]:
        """Which of the store's tables exist, once they are known to be this package's own.

        Someone else's: ``chronica`` or ``acta`` without ``chronica_schema`` (another application's,
        or chronica-postgres's), or chronica-postgres's ``chronica_schema_version`` at all.
        """
        tables = self.tables
        names = (tables.chronica.name, tables.acta.name, tables.versions.name, OTHER_BACKEND_VERSIONS)
        query = self.rules.catalog(names)
        if query is None:  # a database whose catalog is not known here
            return set()
        # a migration's first step: on SQLite it begins the write transaction that serialises it
        result: CursorResult[Any] = yield execute(query, write=operation == "migrate")
        found = {str(name) for (name,) in result}
        data = found & {tables.chronica.name, tables.acta.name}
        if OTHER_BACKEND_VERSIONS in found or (data and tables.versions.name not in found):
            raise self._foreign(operation, sorted(found))
        return found

    def _foreign(self, operation: str, found: list[str]) -> StoreError:
        """The refusal of a database holding tables this package did not create."""
        postgres = OTHER_BACKEND_VERSIONS in found
        where = f"schema {self.schema!r}" if self.schema is not None else "the database"
        whose = (
            f"chronica-postgres's (its version table {OTHER_BACKEND_VERSIONS} is there)"
            if postgres
            else "another application's"
        )
        return StoreError(
            f"sqlalchemy: {operation}",
            f"{where} holds {', '.join(found)}: tables chronica-sqlalchemy did not create, they look "
            f"like {whose}; chronica-sqlalchemy uses only tables it created and has left these "
            f"untouched. {self.rules.elsewhere}"
            + (", or open this one with chronica-postgres" if postgres else ""),
        )
