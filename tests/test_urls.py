"""Options in a URL's query are taken out of it whole, the rest of the URL left as written."""

from __future__ import annotations

import pytest

from chronica_core.urls import split_query_options, split_schema


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///q.db?schema=x", ("sqlite:///q.db", {"schema": "x"})),
        (
            "mysql+pymysql://u:p%40w@h/db?charset=utf8mb4&schema=a%20b&connect_timeout=5&schema=c",
            ("mysql+pymysql://u:p%40w@h/db?charset=utf8mb4", {"schema": "c", "connect_timeout": "5"}),
        ),
        ("postgresql://h/db?schemas=x", ("postgresql://h/db?schemas=x", {})),
        ("mongodb://u:pw@[::1/db?schema=x", ("mongodb://u:pw@[::1/db?schema=x", {})),
        ("host=h dbname=db", ("host=h dbname=db", {})),
    ],
)
def test_named_query_parameters_are_taken_out(url: str, expected: tuple[str, dict[str, str]]) -> None:
    assert split_query_options(url, ("schema", "connect_timeout")) == expected


def test_split_schema_gives_the_last_schema_or_none() -> None:
    assert split_schema("postgresql://h/db?schema=a&schema=b") == ("postgresql://h/db", "b")
    assert split_schema("postgresql://h/db") == ("postgresql://h/db", None)
