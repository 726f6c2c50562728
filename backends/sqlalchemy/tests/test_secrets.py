"""A password in the store URL is never shown: not in errors, logs, the CLI's output or test ids.

Each URL holds the marker password of :mod:`chronica_conformance.secrecy`, as written (its ``/``
makes the URL malformed) and percent-encoded, in the user information or a query parameter, on
each dialect: on SQLite only a query parameter can carry one (SQLAlchemy ignores it, with a warning).
"""

from __future__ import annotations

import pytest
from chronica_conformance.secrecy import (
    ENCODED_SECRET,
    SECRET,
    assert_hidden,
    cli_says,
    conformance_says,
    opening_says,
)
from sqlalchemy.engine import make_url

SQLITE_DIALECTS = ("sqlite", "aiosqlite")
SPELLINGS = pytest.mark.parametrize("secret", [SECRET, ENCODED_SECRET], ids=["as-written", "encoded"])


def _server(database_url: str) -> tuple[str, str, str]:
    """The driver name, user and database of the session's URL."""
    url = make_url(database_url)
    return url.drivername, url.username or "", url.database or ""


def failing_urls(dialect: str, database_url: str, secret: str) -> list[str]:
    """URLs of the dialect that cannot open a store, each holding ``secret``."""
    driver, user, database = _server(database_url)
    mysql = [f"mysql+pymysql://{user}:{secret}@127.0.0.1:1/{database}"] if dialect == "mariadb" else []
    if dialect in SQLITE_DIALECTS:  # a file that cannot be created: its folder does not exist
        return [
            f"{driver}:////nonexistent-folder/chronica.db?password={secret}",
            f"{driver}//nonexistent-folder/chronica.db?password={secret}",  # no "://"
        ]
    return [
        f"{driver}://{user}:{secret}@127.0.0.1:1/{database}",  # nothing listens there
        f"{driver}://{user}:{secret}@[::1/{database}",  # SQLAlchemy cannot parse it
        f"{driver}://{user}@127.0.0.1:1/{database}?password={secret}",
        f"{driver.partition('+')[0]}//{user}:{secret}@127.0.0.1/{database}",  # no "://"
        *mysql,
    ]


def working_url(dialect: str, database_url: str) -> str:
    """The session's database with the (encoded) marker password as a query parameter, which
    SQLAlchemy hands to the driver (PostgreSQL trusts the test user; MariaDB refuses it; on SQLite
    it is no parameter: ``InvalidOption`` naming it, exit 4)."""
    return f"{database_url}?password={ENCODED_SECRET}"


@SPELLINGS
def test_opening_a_store_never_shows_the_password(dialect: str, database_url: str, secret: str) -> None:
    """The errors (their chained driver errors too), log records and warnings, sync and async."""
    for url in [*failing_urls(dialect, database_url, secret), working_url(dialect, database_url)]:
        assert_hidden(opening_says(url), f"opening {url}")


@SPELLINGS
def test_the_cli_never_shows_the_password_of_a_store_it_cannot_open(
    dialect: str, database_url: str, secret: str
) -> None:
    url = failing_urls(dialect, database_url, secret)[0 if dialect in SQLITE_DIALECTS else 2]
    assert_hidden(cli_says(url), f"chronica on {url}")


def test_the_cli_never_shows_the_password_of_a_store_it_opens(dialect: str, database_url: str) -> None:
    """``demo`` and ``migrate`` name the store they used: its password is shown as ``***``."""
    said = cli_says(working_url(dialect, database_url))
    assert_hidden(said, "chronica")
    if dialect == "postgresql":  # MariaDB refuses the password: the runs fail, and say nothing more
        assert said.count("-> exit 0") == 3, said
    elif dialect in SQLITE_DIALECTS:
        assert "InvalidOption: sqlalchemy: option password: " in said, said


def test_a_conformance_run_never_shows_the_password(dialect: str, database_url: str) -> None:
    """Test ids, failures (with each frame's arguments and locals), the summary."""
    url = (
        working_url(dialect, database_url)
        if dialect in SQLITE_DIALECTS
        else failing_urls(dialect, database_url, ENCODED_SECRET)[0]
    )
    said = conformance_says(url)
    assert "***" in said, said
    assert_hidden(said, "chronica conformance")
