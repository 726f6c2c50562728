"""The URL a user types: its scheme in any case, and query parameters libpq does or does not know."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import psycopg
import pytest

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicum,
    InvalidOption,
    new_actum_id,
    open_async_store,
    open_store,
)

NOWHERE = "postgresql://postgres@127.0.0.1:1/test"
"""Nothing listens there: an error other than a refused connection was raised before connecting."""


def _with_query(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


@pytest.mark.parametrize(
    ("query", "option"),
    [("bogus=1", "bogus"), ("sslmode=disable&Application_Name=x", "Application_Name"), ("ssl=false", "ssl")],
)
def test_a_query_parameter_libpq_does_not_know_is_named_before_connecting(query: str, option: str) -> None:
    url = _with_query(NOWHERE, query)
    with pytest.raises(InvalidOption) as raised:
        open_store(url)
    assert raised.value.option == option
    assert f'"{option}"' in raised.value.reason, raised.value.reason
    with pytest.raises(InvalidOption) as raised_async:
        open_async_store(url)
    assert raised_async.value.option == option


def test_libpq_parameters_in_the_url_reach_the_server(postgres_url: str, schema: str) -> None:
    name = f"chronica-urls-{uuid.uuid4().hex[:8]}"
    url = _with_query(
        postgres_url, f"sslmode=disable&application_name={name}&connect_timeout=5&schema={schema}"
    )
    with open_store(url) as store, psycopg.connect(postgres_url) as admin:
        chronicum_id = f"pg-urls-{uuid.uuid4().hex}"
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        found = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,))
        assert (found.fetchone() or (0,))[0] >= 1


@pytest.mark.parametrize("scheme", ["PostgreSQL", "POSTGRES"])
def test_a_scheme_in_any_case_opens_the_same_store(postgres_url: str, schema: str, scheme: str) -> None:
    chronicum_id = f"pg-urls-{uuid.uuid4().hex}"
    url = _with_query(scheme + postgres_url[postgres_url.index("://") :], f"schema={schema}")
    with open_store(url) as typed:
        typed.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        typed.record(
            Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi", id=new_actum_id())
        )

    async def read() -> list[str]:
        async_store = open_async_store(url)
        try:
            return [actum.content for actum in await async_store.acta(chronicum_id, ActaQuery())]
        finally:
            await async_store.close()

    assert asyncio.run(read()) == ["hi"]
