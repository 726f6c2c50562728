"""A URL's query and port: what the drivers would refuse as they connect, without naming it.

Values every driver here reads (``?timeout=abc``, ``?charset=bogus``, a missing ``ssl_ca``
file, a port that is no number) and parameters the driver does not take (``?bogus=1``) are
``InvalidOption`` naming the parameter, before any engine is created, and the ``chronica``
command prints one line with exit 4. A driver name SQLAlchemy does not know is
``UnknownBackend`` suggesting a real URL (exit 5). Whatever else a driver raises while
connecting leaves the store as ``StoreError("sqlalchemy: connect", ...)`` chained to it, blocking
and asyncio, and the command prints it on one line with exit 6."""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import UTC, datetime

import pytest
from chronica_sqlalchemy import open_async_sqlalchemy_store
from chronica_sqlalchemy.store import SQLAlchemyStore
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from chronica_core import Chronicum, InvalidOption, StoreError, UnknownBackend, open_async_store, open_store
from chronica_core.cli import EXIT_BACKEND, EXIT_INVALID, EXIT_STORE, main
from chronica_core.redaction import linked_exceptions

PASSWORD = "pw-never-shown-7q"

# Query strings each driver would take apart as it connects and refuse with a plain Python
# exception naming no parameter, or ignore (SQLite): checked first, each is InvalidOption naming
# the parameter.
INVALID_QUERIES = {
    "sqlite": [
        "timeout=abc",
        "check_same_thread=maybe",
        "timeout=-1",
        "cached_statements=many",
        "bogus=1",
        "mode=ro",
        "isolation_level=SERIALIZABLE",
    ],
    "aiosqlite": ["timeout=abc", "check_same_thread=maybe", "bogus=1", "mode=ro"],
    "mariadb": [
        "connect_timeout=abc",
        "connect_timeout=0",
        "read_timeout=abc",
        "write_timeout=1.5",
        "charset=bogus",
        "port=abc",
        "local_infile=maybe",
        "ssl_ca=/nonexistent/ca.pem",
        "ssl_cert=/nonexistent/cert.pem",
        "ssl_key=/nonexistent/key.pem",
        "bogus=1",
    ],
    "postgresql": ["connect_timeout=abc", "bogus=1", "Sslmode=disable"],
}

# What no check here can judge: the driver or the server refuses the value as it connects.
BAD_QUERIES = {
    "sqlite": [],
    "aiosqlite": [],
    "mariadb": ["sql_mode=NO_SUCH_MODE"],
    "postgresql": ["sslmode=bogus"],
}


def with_password(dialect: str, database_url: str) -> str:
    url = make_url(database_url)
    if dialect == "mariadb":
        url = url.set(password=PASSWORD)
    return url.render_as_string(hide_password=False)


def bad_urls(dialect: str, database_url: str) -> list[str]:
    return [f"{with_password(dialect, database_url)}?{query}" for query in BAD_QUERIES[dialect]]


def invalid_urls(dialect: str, database_url: str) -> list[tuple[str, str]]:
    """(URL, the parameter InvalidOption must name) for each invalid query, and for bad ports."""
    base = with_password(dialect, database_url)
    urls = [(f"{base}?{query}", query.partition("=")[0]) for query in INVALID_QUERIES[dialect]]
    if dialect in ("mariadb", "postgresql"):
        url = make_url(base)
        urls.append((url.set(port=99999).render_as_string(hide_password=False), "port"))
        host = f"{url.host}:abc"
        urls.append((base.replace(f"{url.host}:{url.port}", host, 1), "port"))
    return urls


def test_a_query_value_no_driver_takes_is_invalid_option_naming_it(dialect: str, database_url: str) -> None:
    for url, parameter in invalid_urls(dialect, database_url):
        for opener in (SQLAlchemyStore.open, open_async_sqlalchemy_store, open_store, open_async_store):
            with pytest.raises(InvalidOption) as raised:
                opener(url)
            assert raised.value.option == parameter, (url, raised.value)
            assert raised.value.backend == "sqlalchemy"
            for linked in linked_exceptions(raised.value):
                assert PASSWORD not in str(linked)


def test_the_command_prints_an_invalid_query_on_one_line_and_exits_4(
    dialect: str, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for url, parameter in invalid_urls(dialect, database_url):
        assert main(["acta", "some-id", "--owner", "ardian", "--store", url]) == EXIT_INVALID, url
        printed = capsys.readouterr().err.strip().splitlines()
        assert len(printed) == 1, printed
        assert printed[0].startswith(f"chronica: InvalidOption: sqlalchemy: option {parameter}: "), printed
        assert PASSWORD not in printed[0]


DRIVER_TYPOS = {
    "sqlite": ("sqlite+pysqlte", "sqlite+pysqlite://"),
    "aiosqlite": ("sqlite+aiosqlte", "sqlite+aiosqlite://"),
    "mariadb": ("mysql+pymsql", "mysql+pymysql://"),
    "postgresql": ("postgresql+psycopj", "postgresql+psycopg://"),
}


def test_a_driver_typo_is_unknown_backend_suggesting_a_real_url(
    dialect: str, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    typo, suggestion = DRIVER_TYPOS[dialect]
    url = make_url(with_password(dialect, database_url)).set(drivername=typo)
    text = url.render_as_string(hide_password=False)
    for opener in (SQLAlchemyStore.open, open_async_sqlalchemy_store, open_store, open_async_store):
        with pytest.raises(UnknownBackend, match=rf"did you mean {re.escape(suggestion)}\?"):
            opener(text)
    assert main(["show", "some-id", "--owner", "ardian", "--store", text]) == EXIT_BACKEND
    printed = capsys.readouterr().err.strip().splitlines()
    assert len(printed) == 1 and f"did you mean {suggestion}?" in printed[0], printed
    assert PASSWORD not in printed[0]


def check(error: BaseException) -> None:
    assert isinstance(error, StoreError), repr(error)
    assert error.__cause__ is not None
    assert error.where == "sqlalchemy: connect"
    if not isinstance(error.__cause__, SQLAlchemyError):
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
