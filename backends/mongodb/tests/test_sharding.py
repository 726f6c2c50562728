"""The backend's indexes and commands keep to the shard keys the sharding docs give.

On a sharded cluster MongoDB enforces a unique index only when it starts with the shard key, and
sends a command to one shard only when its filter names the shard key. So: every unique index of
the backend starts with its collection's shard key (:data:`chronica_mongodb.core.SHARD_KEYS`),
every index of ``acta`` does, the indexes that cannot (the listing, the marker sweep, the batch
tails' deletion) are exactly the documented ones and none is unique, the server holds exactly
these indexes after a migration, and every command a whole scenario sends names the shard key
but the documented ones (opening's look at one document, the listing, ``erase_owner``'s sweeps,
``erase``'s deletion of batch tails, a migration's look for forks earlier builds left).
"""

from __future__ import annotations

from typing import Any

import pytest
from chronica_mongodb import MongoStore
from chronica_mongodb.core import (
    ACTA,
    BATCH_ACTA,
    BATCH_ACTUM_ID_INDEX,
    BATCH_CHRONICUM_INDEX,
    BATCH_HEAD_INDEX,
    CHRONICA,
    DATABASE,
    FORKS_INDEX,
    IDLE_INDEX,
    INDEX_SPECS,
    LISTING_INDEX,
    MARKER_INDEX,
    OWNER_IDLE_INDEX,
    SHARD_KEYS,
    Command,
)
from pymongo import MongoClient

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, ChronicumNotFound

NOT_PREFIXED = {
    LISTING_INDEX: CHRONICA,
    MARKER_INDEX: CHRONICA,
    IDLE_INDEX: CHRONICA,
    OWNER_IDLE_INDEX: CHRONICA,
    FORKS_INDEX: CHRONICA,
    BATCH_CHRONICUM_INDEX: BATCH_ACTA,
    BATCH_ACTUM_ID_INDEX: BATCH_ACTA,
    BATCH_HEAD_INDEX: ACTA,
}
"""The indexes that cannot start with their collection's shard key, as the docs list them."""


def prefixed(keys: list[tuple[str, int]], collection: str) -> bool:
    return keys[0][0] == SHARD_KEYS[collection]


def test_every_unique_index_starts_with_its_collections_shard_key() -> None:
    unique = [
        (collection, name)
        for collection, specs in INDEX_SPECS.items()
        for name, keys, options in specs
        if options.get("unique")
    ]
    assert sorted(unique) == [
        (ACTA, "chronicum_idempotency_key"),
        (ACTA, "chronicum_seq"),
        (BATCH_ACTA, "batch_pos"),
    ]
    for collection, specs in INDEX_SPECS.items():
        for name, keys, options in specs:
            if options.get("unique"):
                assert prefixed(keys, collection), f"unique index {name} of {collection}: {keys}"


def test_only_the_documented_indexes_do_not_start_with_the_shard_key_and_none_is_unique() -> None:
    assert set(INDEX_SPECS) == {ACTA, CHRONICA, BATCH_ACTA}
    assert all(prefixed(keys, ACTA) for name, keys, _ in INDEX_SPECS[ACTA] if name != BATCH_HEAD_INDEX)
    others = {
        name: collection
        for collection, specs in INDEX_SPECS.items()
        for name, keys, options in specs
        if not prefixed(keys, collection)
    }
    assert others == NOT_PREFIXED
    assert not any(
        options.get("unique")
        for specs in INDEX_SPECS.values()
        for name, _, options in specs
        if name in others
    )


def test_the_server_holds_exactly_these_indexes_after_a_migration(store: MongoStore) -> None:
    for collection, specs in INDEX_SPECS.items():
        listed = {
            index["name"]: list(index["key"].items()) for index in store.database[collection].list_indexes()
        }
        listed.pop("_id_")
        assert listed == {name: keys for name, keys, _ in specs}, collection


class RecordingStore(MongoStore):
    """A store that remembers every command it performs."""

    def __init__(self, *arguments: Any, **options: Any) -> None:
        self.commands: list[Command] = []
        super().__init__(*arguments, **options)

    def _perform(self, command: Command) -> Any:
        self.commands.append(command)
        return super()._perform(command)


def names_shard_key(command: Command) -> bool:
    """Whether ``command``'s filter (or inserted documents) names its collection's shard key."""
    if command.collection == DATABASE:
        return True  # a command to the server itself (hello: its limits), not to a collection
    field = SHARD_KEYS[command.collection]
    first: Any = command.args[0] if command.args else {}
    if command.method == "aggregate":
        first = first[0].get("$match", {})
    if command.method == "insert_many":
        return all(field in document for document in first)
    if command.method in ("create_index", "list_indexes", "index_information"):
        return True  # administrative: once per collection
    return isinstance(first, dict) and field in first


def first_stage(command: Command) -> dict[str, Any]:
    """The filter of ``command`` (an aggregation's first ``$match``)."""
    first: Any = command.args[0] if command.args else {}
    if command.method == "aggregate":
        first = first[0].get("$match", {})
    return first if isinstance(first, dict) else {}


def test_every_command_of_a_whole_scenario_names_the_shard_key_but_the_documented_ones(
    mongodb_server_url: str, database: str, admin_client: MongoClient[dict[str, Any]]
) -> None:
    with RecordingStore(mongodb_server_url, database=database) as store:
        chronicarius = Chronicarius(store)
        said = [
            Actum("dinner", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", text) for text in ("a", "b", "c")
        ]
        chronicarius.record_actum("ardian", said[0], idempotency_key="k-1")
        chronicarius.record_actum("ardian", said[0], idempotency_key="k-1")
        chronicarius.record_acta("ardian", said, idempotency_key="k-2")
        chronicarius.record_acta("ardian", said)
        assert len(chronicarius.get_acta("ardian", "dinner", actum_kinds=[ActumKind.MESSAGE], last_n=4)) == 4
        chronicarius.get_chronicum("ardian", "dinner")
        chronicarius.list_chronica("ardian")
        with pytest.raises(ChronicumNotFound):
            chronicarius.get_acta("rafa", "dinner")
        chronicarius.record_actum("ardian", Actum("lunch", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "d"))
        chronicarius.erase_chronicum("ardian", "dinner")
        chronicarius.erase_owner("ardian")
        broadcast = {
            (command.collection, command.method, tuple(sorted(first_stage(command))))
            for command in store.commands
            if not names_shard_key(command)
        }
    assert broadcast == {
        (ACTA, "find_one", ()),  # opening: one document of each collection, to tell it is ours
        (CHRONICA, "find_one", ()),
        (CHRONICA, "aggregate", ("owner_id",)),  # the listing, along owner_started
        (CHRONICA, "find", ("owner_id",)),  # erase_owner: the owner's chronica, along owner_started
        (CHRONICA, "find", ("owner_digest", "unfinished")),  # erase_owner: unfinished markers
        (BATCH_ACTA, "delete_many", ("chronicum_id",)),  # erase: the batch tails, along batch_chronicum
        (CHRONICA, "find", ("lineage.chronicum_id", "owner_id")),  # erase: the forks, along forks
        (ACTA, "distinct", ()),  # migrating a database made before positions: once
        (CHRONICA, "find", ("active_at", "owner_id")),  # the same, for last activity
        (CHRONICA, "find", ("$expr", "active_at", "lineage")),  # migrate: old forks, along forks
    }
