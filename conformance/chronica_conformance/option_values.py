"""Option values of every shape, for a backend's tests of its option checks.

A store must answer any value of any option either by opening and working or by
``InvalidOption`` naming that option (never another exception, never a hang). A backend's own
test draws values from :func:`option_values` and judges each with :func:`opens_or_names_it`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal

from hypothesis import strategies as st

from chronica_core import InvalidOption

__all__ = ["opens_or_names_it", "option_values"]

_EDGES: tuple[object, ...] = (
    0,
    1,
    -1,
    0.0,
    -0.0,
    0.001,
    5e-324,
    math.nan,
    math.inf,
    -math.inf,
    10**30,
    -(10**30),
    2**63,
    10**400,
    "",
    " ",
    "nan",
    "inf",
    "-inf",
    "1e999",
    "0x10",
    "1_000",
    "٣",
    "10" * 3000,
    True,
    False,
    None,
    Decimal("NaN"),
    Decimal("2.5"),
    b"1",
    [1],
    {"a": 1},
    object(),
)


def option_values() -> st.SearchStrategy[object]:
    """Values of every shape for one option.

    Integers of any size, floats of any kind (NaN, infinities, negatives, tiny), numbers as text,
    any text, and values of the wrong type (``None``, booleans, bytes, lists, objects).
    """
    return st.one_of(
        st.sampled_from(_EDGES),
        st.integers(),
        st.integers(min_value=-3, max_value=40),
        st.floats(),
        st.floats(min_value=-2, max_value=40),
        st.integers().map(str),
        st.floats().map(str),
        st.text(max_size=12),
        st.booleans(),
        st.none(),
        st.lists(st.integers(), max_size=2),
    )


def opens_or_names_it(open_and_use: Callable[[], object], backend: str, option: str) -> bool:
    """Call ``open_and_use``: return whether it worked (``False``: ``InvalidOption`` for ``option``).

    Raises:
        AssertionError: ``InvalidOption`` named another backend or option, or gave no reason.
        Exception: any other exception ``open_and_use`` raised, unchanged (the test then fails).
    """
    try:
        open_and_use()
    except InvalidOption as error:
        refused = error
    else:
        return True
    assert (refused.backend, refused.option) == (backend, option), refused
    assert refused.reason, refused
    return False
