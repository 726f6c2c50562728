"""A password in the store URL is never shown: not in errors, logs, the CLI's output or test ids.

Each URL holds the marker password of :mod:`chronica_conformance.secrecy`, as written (its ``/``
makes the URL malformed) and percent-encoded, in the user information or a query parameter.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from chronica_conformance.secrecy import (
    ENCODED_SECRET,
    SECRET,
    assert_hidden,
    cli_says,
    conformance_says,
    opening_says,
)

SPELLINGS = pytest.mark.parametrize("secret", [SECRET, ENCODED_SECRET], ids=["as-written", "encoded"])

FAILING_URLS = (
    "postgresql://postgres:{secret}@127.0.0.1:1/test",  # nothing listens there
    "postgresql://postgres:{secret}@[::1/test",  # libpq quotes the whole URI back
    "postgresql://postgres:{secret}%zz@127.0.0.1:1/test",  # libpq quotes the malformed token
    "postgres://postgres@127.0.0.1:1/test?password={secret}&schema=x",
    "postgresql://postgres@127.0.0.1:1/test?password={secret}&nosuchparameter=1",
    "postgresql//postgres:{secret}@127.0.0.1/test",  # no "://": the registry refuses it
)


def with_password(url: str, secret: str, *, in_query: bool) -> str:
    """``url`` with ``secret`` as its password, in the user information or as ``?password=``."""
    parts = urlsplit(url)
    if in_query:
        query = "&".join(item for item in (parts.query, f"password={secret}") if item)
        return urlunsplit(parts._replace(query=query))
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or "postgres"
    return urlunsplit(parts._replace(netloc=f"{user}:{secret}@{host}"))


@SPELLINGS
@pytest.mark.parametrize("template", FAILING_URLS)
def test_opening_a_store_never_shows_the_password(template: str, secret: str) -> None:
    """The errors (their chained driver errors too), log records and warnings, sync and async."""
    assert_hidden(opening_says(template.format(secret=secret)), f"opening {template}")


@SPELLINGS
@pytest.mark.parametrize("template", [FAILING_URLS[1], FAILING_URLS[3]])
def test_the_cli_never_shows_the_password_of_a_store_it_cannot_open(template: str, secret: str) -> None:
    assert_hidden(cli_says(template.format(secret=secret)), f"chronica on {template}")


@pytest.mark.parametrize("in_query", [False, True], ids=["userinfo", "query"])
def test_the_cli_never_shows_the_password_of_a_store_it_opens(
    postgres_url: str, fresh_schema: str, in_query: bool
) -> None:
    """``demo`` and ``migrate`` name the store they used: its password is shown as ``***``."""
    url = with_password(postgres_url, ENCODED_SECRET, in_query=in_query)
    said = cli_says(url, f"schema={fresh_schema}")
    assert_hidden(said, "chronica on the test server")
    if _server_takes(url):  # a server that trusts the test user takes any password
        assert said.count("-> exit 0") == 3, said
        assert "postgres:***@" in said or "password=***" in said, said


@SPELLINGS
def test_a_conformance_run_never_shows_the_password(secret: str) -> None:
    """Test ids, failures (with each frame's arguments and locals: libpq's conninfo), the summary."""
    said = conformance_says(f"postgresql://postgres:{secret}@127.0.0.1:1/test")
    assert "postgresql://postgres:***@127.0.0.1:1/test-sync" in said, said
    assert_hidden(said, "chronica conformance")


def _server_takes(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.OperationalError:
        return False
    return True
