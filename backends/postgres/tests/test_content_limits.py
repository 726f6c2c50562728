"""Content size on chronica-postgres: its fixed limit, the option that lowers it, kept exactly."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest
from chronica_conformance import NativeContract, SizeContract
from chronica_postgres import AsyncPostgresStore, Options, PostgresStore

from chronica_core import InvalidOption
from chronica_core.limits import POSTGRESQL_MAX_CONTENT_BYTES

SMALL = 1024 * 1024
"""The limit the contract runs at: PostgreSQL's own (about 512 MiB) is too large to write in CI."""


class TestSizeContractAtALoweredLimit(SizeContract, NativeContract):
    """The size and native contracts with ``max_content_bytes`` lowered to 1 MiB, in both flavours.

    Native data counts against the limit with the content: the native contract checks it here.
    """

    declares_capabilities = ("native",)

    @pytest.fixture
    def store(self, postgres_url: str, schema: str) -> Iterator[PostgresStore]:
        with PostgresStore(postgres_url, schema=schema, max_content_bytes=SMALL) as store:
            yield store

    @pytest.fixture
    def async_store(self, postgres_url: str, schema: str) -> AsyncPostgresStore:
        return AsyncPostgresStore(postgres_url, schema=schema, max_content_bytes=str(SMALL))


def test_the_default_limit_is_postgresqls(store: PostgresStore, async_store: AsyncPostgresStore) -> None:
    assert Options().max_content_bytes == POSTGRESQL_MAX_CONTENT_BYTES == 536_838_142
    assert store.max_content_bytes() == POSTGRESQL_MAX_CONTENT_BYTES

    async def in_a_loop() -> int | None:
        try:
            return await async_store.max_content_bytes()
        finally:
            await async_store.close()

    assert asyncio.run(in_a_loop()) == POSTGRESQL_MAX_CONTENT_BYTES


def test_the_server_allocates_at_most_what_the_limit_is_derived_from(postgres_url: str) -> None:
    """A value of 1 GiB is refused outright (no memory is taken): ``MaxAllocSize`` is below it."""
    with (
        psycopg.connect(postgres_url, autocommit=True) as connection,
        pytest.raises(psycopg.errors.ProgramLimitExceeded, match="requested length too large"),
    ):
        connection.execute("SELECT length(repeat('x', %s))", (1024 * 1024 * 1024 - 4 + 1,))
    # the largest content's hex text ("\\x", two digits a byte, NUL) and 64 KiB for the rest of its row
    assert 2 + 2 * POSTGRESQL_MAX_CONTENT_BYTES + 1 + 64 * 1024 <= 1024 * 1024 * 1024 - 1


@pytest.mark.parametrize("value", [-1, "lots", 1.5, POSTGRESQL_MAX_CONTENT_BYTES + 1])
def test_the_option_is_range_checked(value: object) -> None:
    with pytest.raises(InvalidOption) as raised:
        Options.parse({"max_content_bytes": value})
    assert raised.value.option == "max_content_bytes"
    assert raised.value.reason.startswith(
        f"expected a whole number of bytes from 0 to {POSTGRESQL_MAX_CONTENT_BYTES}"
    )


def test_the_option_lowers_the_limit(postgres_url: str, schema: str) -> None:
    with PostgresStore(postgres_url, schema=schema, max_content_bytes="12") as store:
        assert store.max_content_bytes() == 12
