"""Whatever a driver raises while connecting (its arguments come from the URL's query) leaves the
store as ``StoreError("sqlalchemy: open", ...)`` chained to it, blocking and asyncio, and the
``chronica`` command prints it on one line with exit 6."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from chronica_sqlalchemy import open_async_sqlalchemy_store
from chronica_sqlalchemy.store import SQLAlchemyStore
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from chronica_core import Chronicum, StoreError
from chronica_core.cli import EXIT_STORE, main
from chronica_core.redaction import linked_exceptions

PASSWORD = "pw-never-shown-7q"

# Query strings each driver takes apart as it connects, and refuses with a plain Python exception.
BAD_QUERIES = {
    "sqlite": ["timeout=abc", "check_same_thread=maybe"],
    "aiosqlite": ["timeout=abc", "check_same_thread=maybe"],
    "mariadb": [
        "connect_timeout=abc",
        "read_timeout=abc",
        "charset=bogus",
        "bogus=1",
        "port=abc",
        "local_infile=maybe",
        "ssl_ca=/nonexistent/ca.pem",
    ],
    "postgresql": ["bogus=1"],
}


def bad_urls(dialect: str, database_url: str) -> list[str]:
    url = make_url(database_url)
    if dialect == "mariadb":
        url = url.set(password=PASSWORD)
    urls = [f"{url.render_as_string(hide_password=False)}?{query}" for query in BAD_QUERIES[dialect]]
    if dialect == "mariadb":
        urls.append(url.set(port=99999).render_as_string(hide_password=False))
    return urls


def check(error: BaseException) -> None:
    assert isinstance(error, StoreError), repr(error)
    assert error.__cause__ is not None
    if not isinstance(error.__cause__, SQLAlchemyError):
        assert error.where == "sqlalchemy: open"
        assert type(error.__cause__).__name__ in error.detail
    for linked in linked_exceptions(error):
        assert PASSWORD not in str(linked)


def test_a_connect_argument_the_driver_refuses_is_a_store_error(dialect: str, database_url: str) -> None:
    for url in bad_urls(dialect, database_url):
        with pytest.raises(StoreError) as raised:
            SQLAlchemyStore.open(url)
        check(raised.value)


def test_an_async_store_reports_it_the_same_way(dialect: str, database_url: str) -> None:
    async def first_use(url: str) -> StoreError:
        try:  # refused at open, or at the first use, which connects
            store = open_async_sqlalchemy_store(url)
        except StoreError as error:
            return error
        try:
            await store.create(Chronicum(f"connect-{uuid.uuid4().hex}", "ardian", datetime.now(UTC)))
        except StoreError as error:
            return error
        finally:
            await store.close()
        raise AssertionError(f"{url} opened")

    for url in bad_urls(dialect, database_url):
        check(asyncio.run(first_use(url)))


def test_the_command_prints_one_line_and_exits_6(
    dialect: str, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for url in bad_urls(dialect, database_url):
        assert main(["migrate", "--store", url]) == EXIT_STORE
        printed = capsys.readouterr().err.strip().splitlines()
        assert len(printed) == 1 and printed[0].startswith("chronica: StoreError: "), printed
        assert PASSWORD not in printed[0]
