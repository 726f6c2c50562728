"""A password in the store URL is never shown: not in errors, logs, the CLI's output or test ids.

Each URL holds the marker password of :mod:`chronica_conformance.secrecy`, as written (its ``/``
makes the URL malformed) and percent-encoded, in the user information or a query parameter.
A server that does not answer is given up on after :data:`GIVE_UP` (``serverSelectionTimeoutMS``).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

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

GIVE_UP = "serverSelectionTimeoutMS=300"

FAILING_URLS = (
    "mongodb://root:{secret}@127.0.0.1:1/test?" + GIVE_UP,  # nothing listens there
    "mongodb://root:{secret}@[::1/test",  # a host that is no host
    "mongodb://root:{secret}%zz@127.0.0.1:1/test?" + GIVE_UP,
    "mongodb://root@127.0.0.1:1/test?password={secret}&" + GIVE_UP,
    "mongodb//root:{secret}@127.0.0.1/test",  # no "://": the registry refuses it
)


@SPELLINGS
@pytest.mark.parametrize("template", FAILING_URLS)
def test_opening_a_store_never_shows_the_password(template: str, secret: str) -> None:
    """The errors (their chained driver errors too), log records and warnings, sync and async."""
    assert_hidden(opening_says(template.format(secret=secret)), f"opening {template}")


@SPELLINGS
def test_the_cli_never_shows_the_password_of_a_store_it_cannot_open(secret: str) -> None:
    url = FAILING_URLS[0].format(secret=secret)
    assert_hidden(cli_says(url), f"chronica on {url}")


def test_the_cli_never_shows_the_password_of_a_store_it_opens(mongodb_server_url: str, database: str) -> None:
    """``demo`` and ``migrate`` name the store they used: a secret in its query is shown as ``***``.

    The secret is a URI option's that takes effect only with MONGODB-AWS: the store opens without it.
    """
    parts = urlsplit(mongodb_server_url)
    query = f"authMechanismProperties=AWS_SESSION_TOKEN:{ENCODED_SECRET}"
    url = urlunsplit(parts._replace(path=f"/{database}", query=query))
    said = cli_says(url)
    assert_hidden(said, "chronica on the test server")
    assert said.count("-> exit 0") == 3, said
    assert "authMechanismProperties=***" in said, said


@SPELLINGS
def test_a_conformance_run_never_shows_the_password(secret: str) -> None:
    """Test ids, failures (with each frame's arguments and locals), the summary."""
    said = conformance_says(FAILING_URLS[0].format(secret=secret))
    assert "mongodb://root:***@127.0.0.1:1/test" in said, said
    assert_hidden(said, "chronica conformance")
