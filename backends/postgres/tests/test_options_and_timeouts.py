"""Option values of every shape are checked at open, and ``operation_timeout`` bounds a statement
when the server stops answering (through a loopback proxy that can be frozen)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from chronica_conformance.freezable_proxy import FreezableProxy
from chronica_conformance.option_values import opens_or_names_it, option_values
from chronica_conformance.timeout_contract import check_frozen_server, check_frozen_server_async
from chronica_postgres import AsyncPostgresStore, PostgresStore
from chronica_postgres.plans import Options
from chronica_postgres.timeout import OperationTimedOut
from hypothesis import given
from hypothesis import strategies as st

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicum,
    InvalidOption,
    StoreError,
    new_actum_id,
)

OPTIONS = (
    "min_size",
    "max_size",
    "max_idle",
    "connect_timeout",
    "pool_timeout",
    "operation_timeout",
    "auto_migrate",
    "notify",
)
TIMEOUT = 1.0
GENEROUS = 10 * TIMEOUT
"""An upper bound no timed-out operation may reach (no tight timing is asserted)."""


def message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=new_actum_id())


def new_id() -> str:
    return f"pg-options-{uuid.uuid4().hex}"


def use(store: PostgresStore) -> None:
    chronicum_id = new_id()
    store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
    store.record(message(chronicum_id, "hello"))
    assert [actum.content for actum in store.acta(chronicum_id, ActaQuery())] == ["hello"]


async def use_async(store: AsyncPostgresStore) -> None:
    chronicum_id = new_id()
    try:
        await store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        await store.record(message(chronicum_id, "hello"))
        assert [actum.content for actum in await store.acta(chronicum_id, ActaQuery())] == ["hello"]
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("pool_timeout", 0, "expected seconds from 1 to 3600, got 0"),
        ("pool_timeout", 0.001, "expected seconds from 1 to 3600, got 0.001"),
        ("pool_timeout", 10**30, "expected seconds from 1 to 3600, got " + repr(10**30)),
        ("connect_timeout", float("nan"), "expected seconds from 1 to 3600, got nan"),
        ("connect_timeout", "inf", "expected seconds from 1 to 3600, got 'inf'"),
        ("operation_timeout", -1, "expected seconds from 1 to 3600, got -1"),
        ("min_size", 10**30, "expected a whole number from 0 to 1000, got " + repr(10**30)),
        ("min_size", 2.0, "expected a whole number from 0 to 1000, got 2.0"),
        ("max_size", 0, "expected a whole number from 1 to 1000, got 0"),
        ("max_size", True, "expected a whole number from 1 to 1000, got True"),
        ("max_idle", 0, "expected seconds from 1 to 86400, got 0"),
        ("max_idle", "a minute", "expected seconds from 1 to 86400, got 'a minute'"),
        ("notify", "sometimes", "expected true or false, got 'sometimes'"),
    ],
)
def test_an_out_of_range_option_is_named_with_its_bounds(option: str, value: object, reason: str) -> None:
    openers: list[Callable[..., object]] = [PostgresStore, AsyncPostgresStore]
    for opener in openers:
        with pytest.raises(InvalidOption) as raised:
            opener("postgresql://postgres@127.0.0.1:1/test", **{option: value})  # refused before connecting
        assert (raised.value.option, raised.value.reason) == (option, reason)
        assert str(raised.value) == f"postgres: option {option}: {reason}"


def test_the_default_pool_serves_forty_at_once_and_shrinks_when_idle(postgres_url: str, schema: str) -> None:
    """40 connections at most (an agent server's worker threads), shrinking by one per 10 s of idleness."""
    assert (Options().min_size, Options().max_size, Options().max_idle) == (1, 40, 10.0)
    with PostgresStore(postgres_url, schema=schema) as store:  # the pool opens only what it needs
        assert (store._pool.min_size, store._pool.max_size, store._pool.max_idle) == (1, 40, 10.0)
    with PostgresStore(postgres_url, schema=schema, min_size=0, max_size="3", max_idle="5") as store:
        assert (store._pool.min_size, store._pool.max_size, store._pool.max_idle) == (0, 3, 5.0)
        use(store)
    assert Options.parse({"min_size": 50}).max_size == 50  # never below min_size


def test_the_smallest_timeouts_open_a_working_store(postgres_url: str, schema: str) -> None:
    options: dict[str, Any] = {
        "schema": schema,
        "pool_timeout": 1,
        "connect_timeout": "1",
        "operation_timeout": 1,
        "min_size": 0,
    }
    with PostgresStore(postgres_url, **options) as store:
        use(store)
    asyncio.run(use_async(AsyncPostgresStore(postgres_url, **options)))


def test_statements_are_prepared_unless_a_pooler_is_found_or_prepared_statements_is_false(
    postgres_url: str, schema: str
) -> None:
    """No pooler before the server here: ``auto`` keeps psycopg's preparing; ``false`` turns it off."""
    for value, threshold in (("auto", 5), ("false", None), (True, 5)):
        with PostgresStore(postgres_url, schema=schema, prepared_statements=value) as store:
            use(store)
            with store._pool.connection() as connection:
                assert connection.prepare_threshold == threshold, value


@given(name=st.sampled_from(OPTIONS), value=option_values())
def test_any_option_value_opens_a_working_store_or_is_named(
    postgres_url: str, schema: str, name: str, value: object
) -> None:
    options: dict[str, Any] = {"schema": schema, name: value}

    def open_and_use() -> None:
        parsed = Options.parse(options)
        if parsed.min_size > 2:  # accepted; opening hundreds of connections is not cheap
            return
        with PostgresStore(postgres_url, **options) as store:
            use(store)
        asyncio.run(use_async(AsyncPostgresStore(postgres_url, **options)))

    opens_or_names_it(open_and_use, "postgres", name)


# -- operation_timeout: a server that stops answering ------------------------------------------


def through(proxy: FreezableProxy, url: str) -> str:
    """``url`` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    netloc = f"{user}@127.0.0.1:{proxy.port}" if user else f"127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def proxy_for(url: str) -> FreezableProxy:
    parts = urlsplit(url)
    return FreezableProxy(parts.hostname or "127.0.0.1", parts.port or 5432)


def test_a_server_that_stops_answering_times_out_and_the_store_recovers(
    postgres_url: str, schema: str
) -> None:
    with (
        proxy_for(postgres_url) as proxy,
        PostgresStore(through(proxy, postgres_url), schema=schema, operation_timeout=TIMEOUT) as store,
    ):
        check_frozen_server(store, proxy, "postgres", GENEROUS)


def test_an_async_store_times_out_the_same_way_and_recovers(postgres_url: str, schema: str) -> None:
    async def scenario(proxy: FreezableProxy) -> None:
        store = AsyncPostgresStore(through(proxy, postgres_url), schema=schema, operation_timeout=TIMEOUT)
        try:
            await check_frozen_server_async(store, proxy, "postgres", GENEROUS)
        finally:
            await store.close()

    with proxy_for(postgres_url) as proxy:
        asyncio.run(scenario(proxy))


def test_the_timeout_error_says_what_timed_out_and_is_chained(postgres_url: str, schema: str) -> None:
    with (
        proxy_for(postgres_url) as proxy,
        PostgresStore(through(proxy, postgres_url), schema=schema, operation_timeout=TIMEOUT) as store,
    ):
        chronicum_id = new_id()
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        proxy.freeze()
        try:
            with pytest.raises(StoreError) as raised:
                store.record(message(chronicum_id, "frozen"))
        finally:
            proxy.thaw()
    assert str(raised.value) == (
        "postgres: record actum: timed out: no answer within operation_timeout (1 s), so the connection"
        " was cut; a write may or may not have been committed (retry it with its idempotency key)"
    )
    assert isinstance(raised.value.__cause__, OperationTimedOut)
    assert isinstance(raised.value.__cause__.__cause__, psycopg.OperationalError)


def _libpq_connect_timeout(store: PostgresStore) -> str:
    with store._pool.connection() as connection:
        return str(connection.info.get_parameters().get("connect_timeout", ""))


def test_a_connect_timeout_in_the_url_is_the_option(postgres_url: str, schema: str) -> None:
    url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}connect_timeout=7"
    with PostgresStore(url, schema=schema) as store:
        assert store.options.connect_timeout == 7.0
        assert _libpq_connect_timeout(store) == "7"
        use(store)
    with PostgresStore(url, schema=schema, connect_timeout=5) as store:  # the option wins
        assert store.options.connect_timeout == 5.0
        assert _libpq_connect_timeout(store) == "5"
    async_store = AsyncPostgresStore(url, schema=schema)
    assert async_store.options.connect_timeout == 7.0
    asyncio.run(use_async(async_store))


@pytest.mark.parametrize(
    ("value", "reason"), [("abc", "expected seconds"), ("0", "from 1"), ("99999", "3600")]
)
def test_a_malformed_connect_timeout_in_the_url_is_invalid(
    postgres_url: str, value: str, reason: str
) -> None:
    url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}connect_timeout={value}"
    for opener in (PostgresStore, AsyncPostgresStore):
        with pytest.raises(InvalidOption) as raised:
            opener(url)
        assert raised.value.option == "connect_timeout"
        assert reason in raised.value.reason, raised.value.reason
