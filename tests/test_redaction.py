"""chronica_core.redaction: a URL as shown, and a URL's secrets taken out of any text or exception."""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chronica_core import ChronicumNotFound, StoreError
from chronica_core.redaction import MASK, masked_url, redact, redact_error, url_secrets


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cret@db:5432/chronica", "postgresql://app:***@db:5432/chronica"),
        ("postgresql://app@db/chronica", "postgresql://app@db/chronica"),
        ("memory://", "memory://"),
        ("sqlite:///chronica.db?mode=ro", "sqlite:///chronica.db?mode=ro"),
        ("sqlite:///chronica.db?password=s3cret", "sqlite:///chronica.db?password=***"),
        (
            "postgresql://db/c?sslpassword=a&Pass_Word=b;token=c&apiKey=d&schema=x#f",
            "postgresql://db/c?sslpassword=***&Pass_Word=***;token=***&apiKey=***&schema=x#f",
        ),
        ("mongodb://u:p%40ss@h1,h2/db?authSource=admin", "mongodb://u:***@h1,h2/db?authSource=admin"),
        (
            "mongodb://h/db?authMechanismProperties=AWS_SESSION_TOKEN:t0k",
            "mongodb://h/db?authMechanismProperties=***",
        ),
        ("postgresql://app:s3cret@[::1/test", "postgresql://app:***@[::1/test"),  # malformed
        ("postgresql://app:s3/cr@et@db/test", "postgresql://app:***@db/test"),  # "/" and "@" not encoded
        ("postgresql//app:s3cret@db/test", "postgresql//app:***@db/test"),  # no "://"
        ("postgres:s3cret@db/test://x", "postgres:***@db/test://x"),
        ("host=db user=app password='s3 cr\\'et' dbname=c", "host=db user=app password=*** dbname=c"),
        ("host=db password=s3cret", "host=db password=***"),
        ("postgresql://app:@db/test", "postgresql://app:@db/test"),  # an empty password: nothing to hide
    ],
)
def test_a_url_is_shown_with_each_secret_masked(url: str, shown: str) -> None:
    assert masked_url(url) == shown


PASSWORDS = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=30)


@given(PASSWORDS)
def test_any_password_in_the_user_information_is_masked_whole(password: str) -> None:
    """As written (``/``, ``@``, ``:``, ``?`` and ``#`` unencoded) or percent-encoded."""
    for written in (password, quote(password, safe="")):
        assert (
            masked_url(f"postgresql://app:{written}@db:5432/c?schema=x")
            == "postgresql://app:***@db:5432/c?schema=x"
        )


@given(PASSWORDS)
def test_any_password_in_a_query_parameter_is_masked_whole(password: str) -> None:
    url = f"postgresql://app@db/c?schema=x&password={quote(password, safe='')}&sslmode=require"
    assert masked_url(url) == "postgresql://app@db/c?schema=x&password=***&sslmode=require"


def _driver_texts(password: str) -> list[str]:
    """How drivers and Python write a password back: as given, decoded, encoded, escaped."""
    return [
        f'invalid URI: "postgresql://app:{quote(password, safe="")}@[db/test"',
        f"conninfo = 'user=app password={password} dbname=test'",
        f"password={password.replace(chr(92), chr(92) * 2).replace(chr(39), chr(92) + chr(39))}",
        f"url = {password!r}",
        f"json: {json.dumps(password)}",
        f"{quote_plus(password)} / {quote(password, safe='').lower()} / {password.upper()}",
    ]


@given(st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=4, max_size=30))
def test_every_spelling_of_a_password_is_redacted_from_driver_text(password: str) -> None:
    url = f"postgresql://app:{quote(password, safe='')}@db/test"
    for text in _driver_texts(password):
        redacted = redact(text, url)
        assert password not in redacted and password.lower() not in redacted.lower(), (text, redacted)


def test_a_piece_of_a_password_split_where_a_parser_splits_is_redacted() -> None:
    """libpq reads ``app:Sekr3t/Zq9x7@db`` as host ``app``, port ``Sekr3t``: it quotes a piece."""
    url = "postgresql://app:Sekr3t/Zq9x7@db/test"
    assert redact('invalid port number: "Sekr3t"', url) == 'invalid port number: "***"'
    assert redact("path 'Zq9x7@db/test'", url) == "path '***@db/test'"
    assert redact("a piece of two: 'ab'", "postgresql://app:ab/cd@db/test") == "a piece of two: 'ab'"


def test_text_and_urls_without_secrets_are_left_alone() -> None:
    assert url_secrets("postgresql://app@db/test?schema=x") == ()
    assert redact("connection refused", "postgresql://app@db/test") == "connection refused"
    assert redact("connection refused", "") == "connection refused"
    assert url_secrets("postgresql://app:s3cret@db/test")[0] == "s3cret"


def test_an_exception_and_its_chain_are_redacted_in_place() -> None:
    url = "postgresql://app:s3cret@db/test"
    driver = ValueError(f"cannot parse {url!r}", 42)
    driver.add_note(f"while opening {url}")
    context = KeyError("s3cret")
    driver.__context__ = context
    error = StoreError("postgres: open", str(driver))
    error.__cause__ = driver
    redact_error(error, url)
    assert error.__cause__ is driver and driver.__context__ is context
    assert error.detail == str(driver) == "(\"cannot parse 'postgresql://app:***@db/test'\", 42)"
    assert str(error) == f"postgres: open: {error.detail}"
    assert driver.args == ("cannot parse 'postgresql://app:***@db/test'", 42)
    assert driver.__notes__ == ["while opening postgresql://app:***@db/test"]
    assert context.args == (MASK,)


def test_an_exception_group_and_an_exception_held_in_an_attribute_are_redacted() -> None:
    url = "mysql://root:s3cret@db/test"
    held = RuntimeError("s3cret")
    wrapper = RuntimeError("wrapped")
    wrapper.orig = held  # type: ignore[attr-defined]  # as SQLAlchemy's DBAPIError holds the driver's error
    group = ExceptionGroup("two", [ValueError("s3cret"), wrapper])
    redact_error(group, url)
    assert [str(member) for member in group.exceptions] == [MASK, "wrapped"]
    assert held.args == (MASK,)


def test_chronicas_own_errors_keep_the_callers_data() -> None:
    """Only a StoreError carries a driver's text; a chronicum id equal to a password stays as it is."""
    url = "postgresql://app:main-chat@db/test"
    refusal = ChronicumNotFound("main-chat")
    refusal.__cause__ = ValueError("main-chat")
    redact_error(refusal, url)
    assert refusal.chronicum_id == "main-chat"
    assert str(refusal) == "chronicum 'main-chat' not found"
    assert refusal.__cause__.args == (MASK,)
