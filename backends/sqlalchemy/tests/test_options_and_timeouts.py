"""Option values of every shape are checked at open, and ``operation_timeout`` bounds an
operation when the server stops answering (through a loopback proxy that can be frozen)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from chronica_conformance.freezable_proxy import FreezableProxy
from chronica_conformance.option_values import opens_or_names_it, option_values
from chronica_conformance.timeout_contract import check_frozen_server, check_frozen_server_async
from chronica_sqlalchemy import open_async_sqlalchemy_store
from chronica_sqlalchemy.engines import EngineOptions
from chronica_sqlalchemy.store import SQLAlchemyStore
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, InvalidOption, new_actum_id

OPTIONS = (
    "busy_timeout",
    "pool_size",
    "max_overflow",
    "operation_timeout",
    "auto_migrate",
    "echo",
    "synchronous",
)
TIMEOUT = 1.0
GENEROUS = 10 * TIMEOUT
"""An upper bound no timed-out operation may reach (no tight timing is asserted)."""


def message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=new_actum_id())


def use(url: str, options: dict[str, Any]) -> None:
    """Open the blocking and the asyncio store with ``options``; write and read with each."""
    chronicum_id = f"options-{uuid.uuid4().hex}"
    with SQLAlchemyStore.open(url, **options) as store:
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        store.record(message(chronicum_id, "blocking"))

    async def scenario() -> list[str]:
        async_store = open_async_sqlalchemy_store(url, **options)
        try:
            await async_store.record(message(chronicum_id, "asyncio"))
            return [actum.content for actum in await async_store.acta(chronicum_id, ActaQuery())]
        finally:
            await async_store.close()

    assert asyncio.run(scenario()) == ["blocking", "asyncio"]


@settings(deadline=None)  # each example opens a store: its time is the machine's load
@given(name=st.sampled_from(OPTIONS), value=option_values())
def test_any_option_value_opens_a_working_store_or_is_named(
    database_url: str, shared_store: SQLAlchemyStore, name: str, value: object
) -> None:
    opens_or_names_it(lambda: use(database_url, {name: value}), "sqlalchemy", name)


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("operation_timeout", 0.5, "expected seconds from 1 to 3600, got 0.5"),
        ("operation_timeout", float("nan"), "expected seconds from 1 to 3600, got nan"),
        ("max_overflow", 10**30, f"expected a whole number from 0 to 1000, got {10**30}"),
        ("busy_timeout", float("inf"), "expected seconds from 0 to 3600, got inf"),
    ],
)
def test_an_out_of_range_option_is_named_with_its_bounds(option: str, value: object, reason: str) -> None:
    with pytest.raises(InvalidOption) as raised:
        EngineOptions({option: value})
    assert str(raised.value) == f"sqlalchemy: option {option}: {reason}"


def test_operation_timeout_needs_a_driver_that_can_honour_it() -> None:
    with pytest.raises(InvalidOption) as raised:
        SQLAlchemyStore.open("postgresql+pg8000://127.0.0.1:1/x", operation_timeout=5)
    assert str(raised.value) == (
        "sqlalchemy: option operation_timeout: "
        "not supported with the pg8000 driver (use pymysql, asyncmy or psycopg)"
    )


# -- operation_timeout: a server that stops answering ------------------------------------------


def through(proxy: FreezableProxy, url: str) -> str:
    """``url`` with its host and port replaced by the proxy's."""
    return make_url(url).set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)


def proxy_for(url: str) -> FreezableProxy:
    parsed = make_url(url)
    default_port = 5432 if parsed.get_backend_name() == "postgresql" else 3306
    return FreezableProxy(parsed.host or "127.0.0.1", parsed.port or default_port)


@pytest.mark.dialects("mariadb", "postgresql")
def test_a_server_that_stops_answering_times_out_and_the_store_recovers(
    dialect: str, database_url: str, shared_store: SQLAlchemyStore
) -> None:
    with (
        proxy_for(database_url) as proxy,
        SQLAlchemyStore.open(through(proxy, database_url), operation_timeout=TIMEOUT) as store,
    ):
        check_frozen_server(store, proxy, "sqlalchemy", GENEROUS)


@pytest.mark.dialects("mariadb", "postgresql")
def test_an_async_store_times_out_the_same_way_and_recovers(
    dialect: str, database_url: str, shared_store: SQLAlchemyStore
) -> None:
    async def scenario(proxy: FreezableProxy) -> None:
        store = open_async_sqlalchemy_store(through(proxy, database_url), operation_timeout=TIMEOUT)
        try:
            await check_frozen_server_async(store, proxy, "sqlalchemy", GENEROUS)
        finally:
            await store.close()

    with proxy_for(database_url) as proxy:
        asyncio.run(scenario(proxy))
