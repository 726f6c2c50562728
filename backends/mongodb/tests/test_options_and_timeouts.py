"""Option values of every shape are checked at open, and ``operation_timeout`` bounds an
operation when the server stops answering (through a loopback proxy that can be frozen)."""

from __future__ import annotations

import asyncio
import gc
import uuid
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import pytest
from chronica_conformance.freezable_proxy import FreezableProxy
from chronica_conformance.option_values import opens_or_names_it, option_values
from chronica_conformance.timeout_contract import check_frozen_server, check_frozen_server_async
from chronica_mongodb import AsyncMongoStore, MongoStore
from chronica_mongodb.store import BOUNDED_CLIENT_OPTIONS, DEFAULT_SERVER_SELECTION_TIMEOUT_MS
from hypothesis import given, settings
from hypothesis import strategies as st
from pymongo import MongoClient
from pymongo.errors import ServerSelectionTimeoutError

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicum,
    InvalidOption,
    StoreError,
    new_actum_id,
    open_async_store,
    open_store,
)

UNREACHABLE = "mongodb://127.0.0.1:9/chronica"  # nothing listens: options are checked before connecting
OPTIONS = ("operation_timeout", "auto_migrate", *BOUNDED_CLIENT_OPTIONS)
TIMEOUT = 1.0
GENEROUS = 10 * TIMEOUT
"""An upper bound no timed-out operation may reach (no tight timing is asserted)."""


def message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=new_actum_id())


def use(url: str, database: str, options: dict[str, Any]) -> None:
    """Open the blocking and the asyncio store with ``options``; write and read with each."""
    chronicum_id = f"options-{uuid.uuid4().hex}"
    with MongoStore(url, database=database, **options) as store:
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        store.record(message(chronicum_id, "blocking"))

    async def scenario() -> list[str]:
        async_store = AsyncMongoStore(url, database=database, **options)
        try:
            await async_store.record(message(chronicum_id, "asyncio"))
            return [actum.content for actum in await async_store.acta(chronicum_id, ActaQuery())]
        finally:
            await async_store.close()

    assert asyncio.run(scenario()) == ["blocking", "asyncio"]


@pytest.fixture(scope="module")
def options_database(mongodb_server_url: str, admin_client: MongoClient[dict[str, Any]]) -> Iterator[str]:
    """One database for every example of the property test below, dropped afterwards.

    Migrated here, once: an example's time is then that of opening and using a store, not that of
    creating every index (which the first example would otherwise do, within the deadline).
    """
    name = f"chronica_test_{uuid.uuid4().hex[:12]}"
    try:
        MongoStore(mongodb_server_url, database=name).close()
        yield name
    finally:
        admin_client.drop_database(name)


@settings(deadline=None)  # each example opens a client and talks to the server: its time is the machine's
@given(name=st.sampled_from(OPTIONS), value=option_values())
def test_any_option_value_opens_a_working_store_or_is_named(
    mongodb_server_url: str, options_database: str, name: str, value: object
) -> None:
    database = options_database
    options: dict[str, Any] = {name: value}

    def open_and_use() -> None:
        if name == "auto_migrate":  # a true value would migrate at once: the async store defers it
            asyncio.run(AsyncMongoStore(UNREACHABLE, **options).close())  # checked, no connection
        else:
            MongoStore(UNREACHABLE, auto_migrate=False, **options).close()  # checked, no connection
        if name == "minPoolSize" and int(str(value).strip()) > 2:
            return  # accepted; opening hundreds of connections is not cheap
        use(mongodb_server_url, database, options)

    opens_or_names_it(open_and_use, "mongodb", name)


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("operation_timeout", 0.5, "expected seconds from 1 to 3600, got 0.5"),
        ("operation_timeout", float("nan"), "expected seconds from 1 to 3600, got nan"),
        ("timeoutMS", 0.001, "expected milliseconds from 1000 to 3.6e+06, got 0.001"),
        ("minPoolSize", 10**30, f"expected a whole number from 0 to 1000, got {10**30}"),
        ("heartbeatFrequencyMS", 1, "expected milliseconds from 500 to 3.6e+06, got 1"),
    ],
)
def test_an_out_of_range_option_is_named_with_its_bounds(option: str, value: object, reason: str) -> None:
    openers: list[Callable[..., Any]] = [MongoStore, AsyncMongoStore]
    for opener in openers:
        with pytest.raises(InvalidOption) as raised:
            opener(UNREACHABLE, auto_migrate=False, **{option: value})
        assert str(raised.value) == f"mongodb: option {option}: {reason}"


def test_operation_timeout_is_timeout_ms_and_not_both() -> None:
    with MongoStore(UNREACHABLE, auto_migrate=False, operation_timeout="2.5") as store:
        assert store.client.options.timeout == 2.5
    with pytest.raises(InvalidOption, match=r"^mongodb: option operation_timeout: give operation_timeout or"):
        MongoStore(UNREACHABLE, auto_migrate=False, operation_timeout=2, timeoutms=3000)


# -- operation_timeout: a server that stops answering ------------------------------------------


def proxied(url: str, proxy: FreezableProxy) -> str:
    """``url`` with its host and port replaced by the proxy's (one host, no replica set)."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    netloc = f"{user}@127.0.0.1:{proxy.port}" if user else f"127.0.0.1:{proxy.port}"
    return parts._replace(netloc=netloc).geturl()


def proxy_for(url: str) -> FreezableProxy:
    parts = urlsplit(url)
    return FreezableProxy(parts.hostname or "127.0.0.1", parts.port or 27017)


def test_a_server_that_stops_answering_times_out_and_the_store_recovers(
    mongodb_server_url: str, fresh_database: Callable[[], str]
) -> None:
    database = fresh_database()
    with proxy_for(mongodb_server_url) as proxy:
        url = proxied(mongodb_server_url, proxy)
        with MongoStore(url, database=database, directConnection=True, operation_timeout=TIMEOUT) as store:
            check_frozen_server(store, proxy, "mongodb", GENEROUS)


def test_an_async_store_times_out_the_same_way_and_recovers(
    mongodb_server_url: str, fresh_database: Callable[[], str]
) -> None:
    database = fresh_database()

    async def scenario(proxy: FreezableProxy) -> None:
        url = proxied(mongodb_server_url, proxy)
        store = AsyncMongoStore(url, database=database, directConnection=True, operation_timeout=TIMEOUT)
        try:
            await check_frozen_server_async(store, proxy, "mongodb", GENEROUS)
        finally:
            await store.close()

    with proxy_for(mongodb_server_url) as proxy:
        asyncio.run(scenario(proxy))


@pytest.mark.parametrize(
    ("url", "options", "seconds"),
    [
        (UNREACHABLE, {}, DEFAULT_SERVER_SELECTION_TIMEOUT_MS / 1000),
        (UNREACHABLE, {"serverSelectionTimeoutMS": 2000}, 2.0),
        (UNREACHABLE, {"serverselectiontimeoutms": "2500"}, 2.5),
        (f"{UNREACHABLE}?serverSelectionTimeoutMS=1500", {}, 1.5),
        (f"{UNREACHABLE}?connectTimeoutMS=900&serverselectiontimeoutms=30000", {}, 30.0),
    ],
)
def test_a_server_is_waited_for_a_few_seconds_unless_told_otherwise(
    url: str, options: dict[str, Any], seconds: float
) -> None:
    with MongoStore(url, auto_migrate=False, **options) as store:
        assert store.client.options.server_selection_timeout == seconds
    async_store = AsyncMongoStore(url, auto_migrate=False, **options)
    assert async_store.client.options.server_selection_timeout == seconds
    asyncio.run(async_store.close())


def test_no_server_is_one_line_naming_the_wait_not_pymongos_topology() -> None:
    with pytest.raises(StoreError) as raised:
        MongoStore(UNREACHABLE, serverSelectionTimeoutMS=300)
    text = str(raised.value)
    assert text.startswith(
        "mongodb: connect: no server could be used within 0.3s (serverSelectionTimeoutMS): "
    )
    assert "127.0.0.1:9" in text
    assert text.endswith("; nothing was sent") and "may or may not" not in text
    assert "\n" not in text and "Topology Description" not in text and "ServerDescription" not in text
    assert isinstance(raised.value.__cause__, ServerSelectionTimeoutError)

    async def first_use() -> StoreError:
        store = AsyncMongoStore(UNREACHABLE, serverSelectionTimeoutMS=300)
        try:
            await store.get("anything")
        except StoreError as error:
            return error
        finally:
            await store.close()
        raise AssertionError("an unreachable server answered")

    text = str(asyncio.run(first_use()))
    assert "within 0.3s" in text and "Topology Description" not in text


# -- the URL a user types --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "option", "reason"),
    [
        ("bogus=1", "bogus", "no URI option pymongo knows"),
        ("wtimeout=5", "wtimeout", "wtimeoutms"),
        ("appName=x&readPreference=bogus", "readPreference", "Not a valid read preference"),
    ],
)
def test_a_query_parameter_pymongo_would_drop_or_refuse_is_named_before_connecting(
    query: str, option: str, reason: str
) -> None:
    openers: list[Callable[..., Any]] = [MongoStore, AsyncMongoStore, open_store, open_async_store]
    for opener in openers:
        with pytest.raises(InvalidOption) as raised:
            opener(f"{UNREACHABLE}?{query}")
        assert raised.value.option == option
        assert reason in raised.value.reason, raised.value.reason


def test_a_scheme_in_upper_case_and_pymongos_parameters_in_the_url_open_the_store(
    mongodb_server_url: str, database: str
) -> None:
    scheme, rest = mongodb_server_url.split("://", 1)
    base = rest.partition("?")[0].rstrip("/")
    url = f"{scheme.upper()}://{base}/{database}?appName=chronica-urls&serverSelectionTimeoutMS=5000"
    chronicum_id = f"urls-{uuid.uuid4().hex}"
    with open_store(url) as store:
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        store.record(message(chronicum_id, "hi"))

    async def read() -> list[str]:
        async_store = open_async_store(url)
        try:
            return [actum.content for actum in await async_store.acta(chronicum_id, ActaQuery())]
        finally:
            await async_store.close()

    assert asyncio.run(read()) == ["hi"]


def test_a_store_that_fails_to_open_closes_the_client_it_opened() -> None:
    """Its first operation (the migration) fails: the client is closed, not left to the collector."""

    def fail_to_open() -> str:
        try:
            open_store(f"{UNREACHABLE}?serverSelectionTimeoutMS=200")
        except StoreError as error:
            return error.where
        raise AssertionError("opened")

    gc.collect()  # what earlier tests left behind is not this test's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert fail_to_open() == "mongodb: connect"
        gc.collect()
    unclosed = [str(warning.message) for warning in caught if warning.category is ResourceWarning]
    assert [message for message in unclosed if "MongoClient" in message] == []
