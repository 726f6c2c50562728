"""Store options given as text: what every backend accepts as true or false."""

from __future__ import annotations

import pytest

from chronica_core import InvalidOption
from chronica_core.options import flag_option


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
