"""On servers of the tests' own: the durability check, WAIT with a replica, a quick restart with AOF."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import redis
from chronica_redis import RedisStore, WriteUnconfirmed
from servers import free_ports

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    StoreError,
    new_actum_id,
    open_async_store,
)

pytestmark = pytest.mark.standalone


def _actum(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, new_actum_id())


def _first_operation_of_async_store(url: str, **options: Any) -> None:
    async def run() -> None:
        store = open_async_store(url, **options)
        try:
            await store.get("anything")
        finally:
            await store.close()

    asyncio.run(run())


@pytest.mark.parametrize(
    ("settings", "option", "named"),
    [
        (("--appendonly", "no", "--save", ""), "accept_restart_loss", "keeps nothing on disk"),
        (
            ("--appendonly", "yes", "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"),
            "accept_eviction_loss",
            "maxmemory-policy allkeys-lru",
        ),
    ],
)
def test_a_server_that_loses_acknowledged_acta_is_refused_unless_the_risk_is_accepted(
    own_server: Any, settings: tuple[str, ...], option: str, named: str
) -> None:
    server = own_server(*settings)
    with pytest.raises(StoreError) as refused:
        RedisStore(server.url)
    assert refused.value.where == "redis: open"
    assert named in str(refused.value) and option in str(refused.value)
    assert f"127.0.0.1:{server.port}" in str(refused.value)
    with redis.Redis(port=server.port) as watcher:
        assert len(watcher.client_list()) == 1, "the refused store left its connection open"
    with pytest.raises(StoreError, match=option):
        _first_operation_of_async_store(server.url)
    with RedisStore(server.url, **{option: True}) as store:
        chronicarius = Chronicarius(store)
        chronicarius.record_actum("ardian", _actum("risky", "accepted"))
        assert [actum.content for actum in chronicarius.get_acta("ardian", "risky")] == ["accepted"]


def test_rdb_snapshots_alone_are_accepted(own_server: Any) -> None:
    server = own_server("--appendonly", "no", "--save", "60 1")
    with RedisStore(server.url) as store:
        assert store.max_content_bytes() == 512 * 1024 * 1024


def test_a_server_refusing_config_is_refused_unless_both_risks_are_accepted(own_server: Any) -> None:
    server = own_server("--appendonly", "yes", "--rename-command", "CONFIG", "")
    with pytest.raises(StoreError, match="refused CONFIG GET"):
        RedisStore(server.url)
    with pytest.raises(StoreError, match="refused CONFIG GET"):
        RedisStore(server.url, accept_restart_loss=True)
    with RedisStore(server.url, accept_restart_loss=True, accept_eviction_loss=True) as store:
        assert store.max_content_bytes() == 512 * 1024 * 1024


BOTH_RISKS_ACCEPTED: dict[str, bool] = {"accept_restart_loss": True, "accept_eviction_loss": True}


@pytest.mark.parametrize("options", [{}, BOTH_RISKS_ACCEPTED], ids=["checked", "risks-accepted"])
def test_a_database_the_server_lacks_is_refused_at_open_as_such(
    own_server: Any, options: dict[str, bool]
) -> None:
    server = own_server("--appendonly", "yes", "--databases", "2")
    url = server.url.removesuffix("/0") + "/5"
    with pytest.raises(StoreError, match="redis: open") as refused:
        RedisStore(url, **options)
    assert "DB index is out of range" in str(refused.value) and "CONFIG" not in str(refused.value)
    with pytest.raises(StoreError, match="redis: open") as refused_async:
        _first_operation_of_async_store(url, **options)
    assert "DB index is out of range" in str(refused_async.value) and "CONFIG" not in str(refused_async.value)


@pytest.mark.parametrize("options", [{}, BOTH_RISKS_ACCEPTED], ids=["checked", "risks-accepted"])
def test_a_server_out_of_reach_is_refused_at_open_as_such(options: dict[str, bool]) -> None:
    port = free_ports(1)[0]  # nothing listens there
    url = f"redis://127.0.0.1:{port}/0"
    with pytest.raises(StoreError, match="redis: open") as refused:
        RedisStore(url, **options)
    assert f"connecting to 127.0.0.1:{port}" in str(refused.value) and "CONFIG" not in str(refused.value)
    with pytest.raises(StoreError, match="redis: open") as refused_async:
        _first_operation_of_async_store(url, **options)
    assert f"connecting to 127.0.0.1:{port}" in str(refused_async.value)
    assert "CONFIG" not in str(refused_async.value)


def test_the_content_limit_is_the_servers(own_server: Any) -> None:
    server = own_server("--appendonly", "yes", "--proto-max-bulk-len", "2mb")
    with RedisStore(server.url) as store:
        assert store.max_content_bytes() == 2 * 1024 * 1024
    with RedisStore(server.url, max_content_bytes=1000) as lowered:
        assert lowered.max_content_bytes() == 1000


def _until_replicated(port: int) -> None:
    """Until the primary on ``port`` has a replica online (a full resync after a restart takes a moment)."""
    with redis.Redis(port=port, decode_responses=True) as watcher:
        for _ in range(400):
            if watcher.info("replication").get("slave0", {}).get("state") == "online":
                return
            threading.Event().wait(0.05)
    raise AssertionError("the replica did not come online")


def test_wait_for_a_replica_confirms_or_raises_a_typed_error_a_keyed_retry_settles(own_server: Any) -> None:
    """With a replica, writes are confirmed; without it, WriteUnconfirmed, and the keyed retry lands once."""
    primary = own_server("--appendonly", "yes", "--save", "")
    replica = own_server("--appendonly", "yes", "--save", "", "--replicaof", "127.0.0.1", str(primary.port))
    _until_replicated(primary.port)
    with RedisStore(primary.url, wait_replicas=1, wait_timeout=2) as store:
        chronicarius = Chronicarius(store)
        confirmed = chronicarius.record_actum("ardian", _actum("waited", "confirmed"))
        batch = chronicarius.record_acta("ardian", [_actum("waited", "b1"), _actum("waited", "b2")])
        replica.kill()
        with pytest.raises(WriteUnconfirmed) as unconfirmed:
            chronicarius.record_actum("ardian", _actum("waited", "unconfirmed"), idempotency_key="k")
        assert (unconfirmed.value.replicas, unconfirmed.value.required) == (0, 1)
        assert "may or may not be stored" in str(unconfirmed.value)
        assert isinstance(unconfirmed.value, StoreError)
        stored = chronicarius.get_acta("ardian", "waited")
        assert [actum.content for actum in stored] == ["confirmed", "b1", "b2", "unconfirmed"]
        with pytest.raises(WriteUnconfirmed):  # still no replica: the retry waits again, and says so
            chronicarius.record_actum("ardian", _actum("waited", "retry"), idempotency_key="k")
        replica.start()
        _until_replicated(primary.port)
        settled = chronicarius.record_actum("ardian", _actum("waited", "retry again"), idempotency_key="k")
        assert settled == stored[-1]
        final = chronicarius.get_acta("ardian", "waited")
        assert final == [confirmed, *batch, stored[-1]]
        with redis.Redis(port=replica.port, decode_responses=True) as read_replica:
            assert read_replica.xlen(store.plans.keys("waited").acta) == 4


def test_the_held_state_after_a_quick_restart_with_aof(own_server: Any) -> None:
    """Writers, a SIGKILL, a restart within a moment: every acknowledged actum is there, in order."""
    server = own_server("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    with RedisStore(server.url) as store:
        chronicarius = Chronicarius(store)
        acknowledged: dict[str, list[str]] = {}

        def write(chronicum_id: str) -> None:
            acknowledged[chronicum_id] = [
                chronicarius.record_actum("ardian", _actum(chronicum_id, f"{chronicum_id}-{index}")).id
                for index in range(100)
            ]

        threads = [threading.Thread(target=write, args=(f"held-{number}",)) for number in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        keyed = chronicarius.record_actum("ardian", _actum("held-0", "keyed"), idempotency_key="key")
        server.kill()
        server.start()
        for chronicum_id, ids in acknowledged.items():
            for attempt in range(3):
                try:
                    window = store.acta(chronicum_id, ActaQuery())
                    break
                except StoreError:  # the pool's connections died with the server: the next try reconnects
                    if attempt == 2:
                        raise
            expected = ids + ([keyed.id] if chronicum_id == "held-0" else [])
            assert [actum.id for actum in window] == expected
        again = chronicarius.record_actum("ardian", _actum("held-0", "again"), idempotency_key="key")
        assert again == keyed
        assert {chronicum.id for chronicum in store.list_chronica("ardian", 10, None)} == set(acknowledged)
