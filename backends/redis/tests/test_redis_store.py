"""The Redis store's own behaviour on the session's server or cluster: keys, options, clock, crashes."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import subprocess
import sys
import textwrap
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import redis.utils
from chronica_redis import AsyncRedisStore, RedisStore
from chronica_redis.keys import chronicum_keys
from conftest import store_options
from redis.crc import key_slot

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    InvalidOption,
    StoreError,
    new_actum_id,
    open_async_store,
    open_store,
)


def _actum(chronicum_id: str, content: str, kind: ActumKind = ActumKind.MESSAGE) -> Actum:
    actor_kind = ActorKind.HUMAN if kind is ActumKind.MESSAGE else ActorKind.AGENT
    return Actum(chronicum_id, kind, actor_kind, "ardian", content, new_actum_id())


def _raw(store: RedisStore) -> Any:
    return store.client


def test_replies_are_parsed_by_hiredis() -> None:
    """chronica-redis depends on ``redis[hiredis]``: redis-py then reads replies with hiredis, in C.

    Without it a last-20 window's reply (hundreds of fields) is parsed line by line in Python, by
    an ``asyncio.StreamReader`` on the asyncio store: twice the blocking store's client CPU.
    """
    assert redis.utils.HIREDIS_AVAILABLE


def test_every_key_of_a_chronicum_is_in_one_slot(store: RedisStore) -> None:
    """Ids with braces, percent signs and spaces: one slot each, and never another id's keys."""
    ids = ["dinner-friday", "a{b}c", "{", "}", "%7B", "100% sure", "ümlaut {x}"]
    tags = set()
    for chronicum_id in ids:
        keys = chronicum_keys(store.plans.prefix, chronicum_id)
        names = [keys.meta, keys.acta, keys.keys, keys.followed, *keys.every_index()]
        assert len({key_slot(name.encode()) for name in names}) == 1, chronicum_id
        tags.add(keys.tag)
    assert len(tags) == len(ids)
    chronicarius = Chronicarius(store)
    for chronicum_id in ids:
        chronicarius.record_actum("ardian", _actum(chronicum_id, f"in {chronicum_id}"))
    for chronicum_id in ids:
        assert [actum.content for actum in chronicarius.get_acta("ardian", chronicum_id)] == [
            f"in {chronicum_id}"
        ]


def test_what_an_append_writes(store: RedisStore) -> None:
    """The stream entry, the index list of its kind, the chronicum's counter and clock, the key."""
    chronicarius = Chronicarius(store)
    first = chronicarius.record_actum("ardian", _actum("layout", "hello"))
    thought = chronicarius.record_actum(
        "ardian", _actum("layout", "hmm", ActumKind.THOUGHT), idempotency_key="key-1"
    )
    keys = chronicum_keys(store.plans.prefix, "layout")
    raw = _raw(store)
    entries = raw.xrange(keys.acta)
    assert [entry_id for entry_id, _ in entries] == ["1-0", "2-0"]
    assert entries[0][1]["i"] == first.id and entries[1][1]["c"] == "hmm"
    assert raw.lrange(keys.index("message", "human"), 0, -1) == ["1"]
    assert raw.lrange(keys.index("thought", "agent"), 0, -1) == ["2"]
    assert raw.hget(keys.keys, "key-1") == "2:1"
    meta = raw.hgetall(keys.meta)
    assert meta["seq"] == "2" and meta["owner"] == "ardian"
    assert thought.at is not None and int(meta["last"]) == int(thought.at.timestamp() * 1_000_000)


def test_at_comes_from_the_server_and_never_decreases(store: RedisStore) -> None:
    """``at`` is the server's TIME, taken in the script; along the order it never goes back."""
    chronicarius = Chronicarius(store)
    acta = [chronicarius.record_actum("ardian", _actum("clock", f"m{index}")) for index in range(20)]
    moments = [actum.at for actum in acta]
    assert all(moment is not None for moment in moments)
    assert moments == sorted(moments)  # type: ignore[type-var]
    seconds, micros = _raw(store).time()
    server_now = datetime.fromtimestamp(seconds + micros / 1e6, UTC)
    assert moments[-1] is not None and abs((server_now - moments[-1]).total_seconds()) < 5
    assert store.get("clock").last_actum_at == moments[-1]


def test_a_filtered_window_reads_only_its_index_lists(store: RedisStore) -> None:
    """The last messages among many thoughts: found through the message list, in order."""
    chronicarius = Chronicarius(store)
    for index in range(300):
        kind = ActumKind.MESSAGE if index % 50 == 0 else ActumKind.THOUGHT
        chronicarius.record_actum("ardian", _actum("sparse", f"{kind}-{index}", kind))
    window = store.acta("sparse", ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=3))
    assert [actum.content for actum in window] == ["message-150", "message-200", "message-250"]
    keys = chronicum_keys(store.plans.prefix, "sparse")
    assert _raw(store).llen(keys.index("message", "human")) == 6


def test_options_are_checked_before_connecting() -> None:
    """Unknown and malformed options are InvalidOption naming the option; nothing connects."""
    nowhere = "redis://127.0.0.1:1/0"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"wait_replica": 1}, "wait_replica"),
        ({"prefix": "a{b}"}, "prefix"),
        ({"wait_replicas": -1}, "wait_replicas"),
        ({"wait_timeout": "soon"}, "wait_timeout"),
        ({"max_content_bytes": 2**40}, "max_content_bytes"),
        ({"accept_restart_loss": "maybe"}, "accept_restart_loss"),
        ({"socket_timeout": 0}, "socket_timeout"),
        ({"wait_replicas": 1, "wait_timeout": 5, "socket_timeout": 2}, "socket_timeout"),
        ({"decode_responses": False}, "decode_responses"),
    ]
    for options, name in cases:
        for opener in (open_store, open_async_store):
            with pytest.raises(InvalidOption) as refused:
                opener(nowhere, **options)
            assert refused.value.option == name
    with pytest.raises(InvalidOption) as unknown:
        open_store(nowhere, wait_replica=1)
    assert "did you mean wait_replicas" in str(unknown.value)


def test_urls() -> None:
    """A cluster URL with a database or a host that is not host:port is refused; so is another scheme."""
    for url in ("redis+cluster://127.0.0.1:1/3", "redis+cluster://127.0.0.1:1,host:port", "redis+cluster://"):
        with pytest.raises(StoreError) as refused:
            open_store(url)
        assert refused.value.where == "redis: open"
    with pytest.raises(StoreError, match="redis: open"):
        RedisStore("memcached://127.0.0.1:1")


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:1/abc", "rediss://127.0.0.1:1/1/2", "redis://127.0.0.1:1/-1"]
)
def test_a_database_that_is_not_a_number_is_refused_at_open(url: str) -> None:
    """redis-py reads ``/abc`` as database 0 and ``/1/2`` as 12: the store refuses both, naming the path."""
    for opener in (open_store, open_async_store):
        with pytest.raises(StoreError) as refused:
            opener(url, socket_connect_timeout=1)
        assert refused.value.where == "redis: open"
        assert "the database in a redis:// URL is a number" in str(refused.value)


def test_an_unreachable_server_is_a_store_error_at_open_with_the_password_hidden() -> None:
    with pytest.raises(StoreError) as refused:
        open_store("redis://:s3cret-pw@127.0.0.1:1/0", socket_connect_timeout=1)
    assert refused.value.where == "redis: open"
    assert "s3cret-pw" not in str(refused.value)

    async def first_operation() -> None:
        store = open_async_store("redis://:s3cret-pw@127.0.0.1:1/0", socket_connect_timeout=1)
        try:
            await store.get("anything")
        finally:
            await store.close()

    with pytest.raises(StoreError) as later:
        asyncio.run(first_operation())
    assert "s3cret-pw" not in str(later.value)


def test_store_options_ride_in_the_url(redis_url: str, prefix: str) -> None:
    """``?prefix=...`` in the URL; an option given as an argument wins over the URL's."""
    separator = "&" if "?" in redis_url else "?"
    options = {name: value for name, value in store_options().items() if name != "prefix"}
    with RedisStore(f"{redis_url}{separator}prefix={prefix}-url", **options) as store:
        assert store.plans.prefix == f"{prefix}-url"
    with RedisStore(f"{redis_url}{separator}prefix={prefix}-url", prefix=prefix, **options) as store:
        assert store.plans.prefix == prefix


@pytest.mark.parametrize(
    ("url", "option"),
    [
        ("redis://127.0.0.1:1/0?bogus=1", "bogus"),
        ("rediss://127.0.0.1:1/0?socket_timeout=2&Socket_Timeout=2", "Socket_Timeout"),
        ("redis+cluster://127.0.0.1:1/?readonly=yes", "readonly"),
        ("redis+cluster://127.0.0.1:1/?bogus=1", "bogus"),
    ],
)
def test_a_query_parameter_redis_py_would_not_take_is_named_before_connecting(url: str, option: str) -> None:
    for opener in (open_store, open_async_store):
        with pytest.raises(InvalidOption) as refused:
            opener(url)
        assert refused.value.option == option


def test_a_scheme_in_any_case_and_redis_py_parameters_in_the_url_open_the_store(
    redis_url: str, prefix: str
) -> None:
    scheme, rest = redis_url.split("://", 1)
    separator = "&" if "?" in rest else "?"
    url = f"{scheme.upper()}://{rest}{separator}prefix={prefix}&client_name=chronica-urls&socket_timeout=5"
    chronicum_id = f"urls-{uuid.uuid4().hex}"
    with open_store(url, **store_options()) as store:
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        store.record(_actum(chronicum_id, "hi"))

    async def read() -> list[str]:
        async_store = open_async_store(url, **store_options())
        try:
            return [actum.content for actum in await async_store.acta(chronicum_id, ActaQuery())]
        finally:
            await async_store.close()

    assert asyncio.run(read()) == ["hi"]


_CREATE_THEN_DIE = textwrap.dedent(
    """
    import os, sys
    from datetime import UTC, datetime
    from chronica_core import Chronicum
    from chronica_redis import RedisStore
    from chronica_redis.operations import Run

    store = RedisStore(sys.argv[1], prefix=sys.argv[2], max_content_bytes=1000)
    perform = store._client.perform

    def perform_then_die(operation):
        if isinstance(operation, Run) and operation.script.name == "create":
            os._exit(17)  # the index entry is written; the chronicum never is
        return perform(operation)

    store._client.perform = perform_then_die
    store.create(Chronicum(sys.argv[3], "ardian", datetime.now(UTC)))
    """
)


def test_a_process_dying_between_the_index_entry_and_the_chronicum_leaves_nothing_seen(
    redis_url: str, prefix: str, store: RedisStore
) -> None:
    """The owner's index has an entry, the chronicum does not exist: no reader sees it, anywhere.

    ``get`` says not found, a listing skips the entry, and the owner's next first write
    creates the chronicum, listed once.
    """
    died = subprocess.run(
        [sys.executable, "-c", _CREATE_THEN_DIE, redis_url, prefix, "half-made"], check=False, timeout=60
    )
    assert died.returncode == 17
    with pytest.raises(ChronicumNotFound):
        store.get("half-made")
    assert store.list_chronica("ardian", 10, None) == []
    chronicarius = Chronicarius(store)
    with pytest.raises(ChronicumNotFound):
        chronicarius.get_acta("ardian", "half-made")
    written = chronicarius.record_actum("ardian", _actum("half-made", "now for real"))
    listed = store.list_chronica("ardian", 10, None)
    assert [chronicum.id for chronicum in listed] == ["half-made"]
    assert chronicarius.get_acta("ardian", "half-made") == [written]
    assert chronicarius.erase_owner("ardian") == 1
    assert store.list_chronica("ardian", 10, None) == []


def test_a_lost_create_race_leaves_no_second_listing_entry(store: RedisStore) -> None:
    """Two creates of one id by one owner: one chronicum, listed once."""
    first = Chronicum("raced", "ardian", datetime(2026, 1, 1, tzinfo=UTC))
    store.create(first)
    with pytest.raises(ChronicumExists):
        store.create(Chronicum("raced", "ardian", datetime(2026, 1, 2, tzinfo=UTC)))
    assert [chronicum.started_at for chronicum in store.list_chronica("ardian", 10, None)] == [
        first.started_at
    ]


def _child_uses(store_kind: str, url: str, prefix: str, queue: Any) -> None:
    """In a forked child: write and read through the store the parent opened."""
    try:
        if store_kind == "sync":
            store = _INHERITED[0]
            chronicarius = Chronicarius(store)
            chronicarius.record_actum("ardian", _actum("forked", "from the child"))
            queue.put([actum.content for actum in chronicarius.get_acta("ardian", "forked")])
        else:
            async_store = _INHERITED[1]

            async def use() -> list[str]:
                await async_store.record(_actum("forked", "from the child"))
                return [actum.content for actum in await async_store.acta("forked", ActaQuery())]

            queue.put(asyncio.run(use()))
    except BaseException as error:  # noqa: BLE001 - reported to the parent
        queue.put(repr(error))


_INHERITED: list[Any] = []


@pytest.mark.parametrize("store_kind", ["sync", "async"])
def test_a_store_opened_before_a_fork_works_in_the_child_and_the_parent(
    redis_url: str, prefix: str, store_kind: str
) -> None:
    """The child gets connections of its own: its writes land, and the parent's keep working."""
    sync_store = RedisStore(redis_url, prefix=prefix, **store_options())
    async_store = AsyncRedisStore(redis_url, prefix=prefix, **store_options())
    _INHERITED[:] = [sync_store, async_store]
    try:
        chronicarius = Chronicarius(sync_store)
        chronicarius.record_actum("ardian", _actum("forked", "from the parent"))

        async def parent_reads() -> list[str]:
            return [actum.content for actum in await async_store.acta("forked", ActaQuery())]

        assert asyncio.run(parent_reads()) == ["from the parent"]
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_child_uses, args=(store_kind, redis_url, prefix, queue))
        child.start()
        answer = queue.get(timeout=60)
        child.join(timeout=60)
        assert answer == ["from the parent", "from the child"], answer
        assert child.exitcode == 0
        chronicarius.record_actum("ardian", _actum("forked", "the parent again"))
        assert [actum.content for actum in chronicarius.get_acta("ardian", "forked")] == [
            "from the parent",
            "from the child",
            "the parent again",
        ]
        assert asyncio.run(parent_reads())[-1] == "the parent again"
    finally:
        sync_store.close()
        asyncio.run(async_store.close())
        _INHERITED.clear()


def test_the_plugin_is_registered() -> None:
    from chronica_core.registry import registry

    for url in ("redis://h", "rediss://h", "redis+cluster://h:1", "rediss+cluster://h:1"):
        backend = registry().backend_for(url)
        assert backend.name == "redis"
        assert set(backend.capabilities) == {
            "batch",
            "listing",
            "erasure",
            "follow",
            "native",
            "history",
            "retention",
        }


def test_an_operation_overtaken_by_close_is_a_store_error(redis_url: str, prefix: str) -> None:
    """redis-py's reader fails in its own way when ``close`` pulls the connection away mid-command
    (an ``AttributeError``): the operation says the store is closed, as a StoreError."""
    store = RedisStore(redis_url, prefix=prefix, **store_options())

    def closed_underneath(operation: Any) -> Any:
        store.close()
        raise AttributeError("'NoneType' object has no attribute 'readline'")

    store._client.perform = closed_underneath  # type: ignore[method-assign]
    with pytest.raises(StoreError, match="the store is closed") as closed:
        store.get("anything")
    assert isinstance(closed.value.__cause__, AttributeError)


def test_an_async_operation_overtaken_by_close_is_a_store_error(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chronica_redis.clients import AsyncClient

    store = AsyncRedisStore(redis_url, prefix=prefix, **store_options())

    async def run() -> None:
        await store.create(Chronicum("overtaken", "ardian", datetime.now(UTC)))

        async def closed_underneath(client: AsyncClient, operation: Any) -> Any:
            await store.close()
            raise AttributeError("'NoneType' object has no attribute 'readline'")

        monkeypatch.setattr(AsyncClient, "perform", closed_underneath)
        await store.get("overtaken")

    with pytest.raises(StoreError, match="the store is closed"):
        asyncio.run(run())


def test_a_cancellation_the_driver_swallowed_is_honoured(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task cancelled as its command completes (Python 3.11's ``asyncio.wait_for`` then drops the
    cancellation) ends cancelled, instead of going on: a follower so cancelled polled for ever."""
    from chronica_redis.clients import AsyncClient

    store = AsyncRedisStore(redis_url, prefix=prefix, **store_options())
    perform = AsyncClient.perform

    async def swallowing(client: AsyncClient, operation: Any) -> Any:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):  # as wait_for does when its task just ended
            await asyncio.sleep(0)
        return await perform(client, operation)

    async def run() -> bool:
        await store.create(Chronicum("cancelled", "ardian", datetime.now(UTC)))
        monkeypatch.setattr(AsyncClient, "perform", swallowing)
        reader = asyncio.create_task(store.acta("cancelled", ActaQuery()))
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        monkeypatch.setattr(AsyncClient, "perform", perform)
        await store.close()
        return reader.cancelled()

    assert asyncio.run(run())
