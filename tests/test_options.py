"""Store options given as text: what every backend accepts as true or false, as a count, as a duration."""

from __future__ import annotations

import math

import pytest

from chronica_core import InvalidOption
from chronica_core.options import count_option, flag_option, real_option, seconds_option


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        ("1", True),
        (" Yes ", True),
        ("ON", True),
        ("true", True),
        (False, False),
        ("0", False),
        ("no", False),
        ("Off", False),
        ("FALSE", False),
    ],
)
def test_true_and_false_in_every_spelling(value: object, expected: bool) -> None:
    assert flag_option("postgres", "auto_migrate", value) is expected


@pytest.mark.parametrize("value", ["maybe", "", "2", 2, None])
def test_anything_else_names_the_backend_and_the_option(value: object) -> None:
    with pytest.raises(InvalidOption) as raised:
        flag_option("mongodb", "auto_migrate", value)
    assert (raised.value.backend, raised.value.option) == ("mongodb", "auto_migrate")
    assert str(raised.value) == f"mongodb: option auto_migrate: expected true or false, got {value!r}"


# -- numbers: counts and durations -----------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (1000, 1000), (" 7 ", 7), ("12", 12)])
def test_a_count_in_range_is_read(value: object, expected: int) -> None:
    assert count_option("postgres", "max_size", value, least=0, most=1000) == expected


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (-1, "-1"),
        (1001, "1001"),
        (10**30, repr(10**30)),
        pytest.param(10**5000, "an integer of 16610 bits", id="ten-to-the-5000"),
        (2.0, "2.0"),
        (True, "True"),
        ("2.5", "'2.5'"),
        ("1" * 5000, "'" + "1" * 56 + "..."),
        (None, "None"),
        ([1], "[1]"),
    ],
)
def test_anything_else_is_no_count_and_the_reason_gives_the_bounds(value: object, shown: str) -> None:
    with pytest.raises(InvalidOption) as raised:
        count_option("postgres", "max_size", value, least=0, most=1000)
    assert (raised.value.backend, raised.value.option) == ("postgres", "max_size")
    assert raised.value.reason == f"expected a whole number from 0 to 1000, got {shown}"


@pytest.mark.parametrize(("value", "expected"), [(1, 1.0), (2.5, 2.5), (" 3600 ", 3600.0), ("1e3", 1000.0)])
def test_seconds_in_range_are_read(value: object, expected: float) -> None:
    assert seconds_option("postgres", "pool_timeout", value, least=1, most=3600) == expected


@pytest.mark.parametrize(
    "value",
    [
        0,
        0.001,
        -1,
        math.nan,
        math.inf,
        -math.inf,
        10**30,
        10**400,
        "nan",
        "inf",
        "1e999",
        "",
        "soon",
        None,
        True,
    ],
)
def test_a_duration_out_of_range_or_not_finite_is_named_with_its_bounds(value: object) -> None:
    with pytest.raises(InvalidOption) as raised:
        seconds_option("postgres", "pool_timeout", value, least=1, most=3600)
    assert raised.value.reason.startswith("expected seconds from 1 to 3600, got ")


def test_other_units_are_named_in_the_reason() -> None:
    with pytest.raises(InvalidOption) as raised:
        real_option("mongodb", "timeoutMS", 0.5, least=1000, most=3_600_000, unit="milliseconds")
    assert (
        str(raised.value) == "mongodb: option timeoutMS: expected milliseconds from 1000 to 3.6e+06, got 0.5"
    )
