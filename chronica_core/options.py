"""Reading store options given as text, as ``--option KEY=VALUE`` and URLs give them.

Backends keep their own option names and bounds; how a true/false option or a number is read, and
what the error says, is the same for all.
"""

from __future__ import annotations

import math
from numbers import Real

from chronica_core.errors import InvalidOption

__all__ = ["count_option", "flag_option", "real_option", "seconds_option"]

_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})
_SHOWN_CHARACTERS = 60


def flag_option(backend: str, name: str, value: object) -> bool:
    """Read the true/false option ``name`` of ``backend``: a bool, or its text in any case.

    Args:
        backend: the backend's name, for the error (``"postgres"``).
        name: the option's name, for the error (``"auto_migrate"``).
        value: ``True``/``False``, or ``1``/``0``, ``true``/``false``, ``yes``/``no``, ``on``/``off``
            as text (surrounding spaces and case ignored).

    Returns:
        The option's value.

    Raises:
        InvalidOption: ``value`` is anything else (``"expected true or false, got ..."``).
    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE_WORDS:
        return True
    if text in _FALSE_WORDS:
        return False
    raise InvalidOption(backend, name, f"expected true or false, got {_shown(value)}")


def count_option(backend: str, name: str, value: object, *, least: int, most: int) -> int:
    """Read the whole-number option ``name`` of ``backend`` (a count: connections, workers).

    Args:
        backend: the backend's name, for the error.
        name: the option's name, for the error (``"max_size"``).
        value: an ``int`` (not a ``bool``, not a ``float``), or its decimal text (spaces ignored).
        least: the smallest value allowed.
        most: the largest value allowed.

    Returns:
        The number, ``least <= number <= most``.

    Raises:
        InvalidOption: ``value`` is not a whole number, or lies outside the bounds; the reason
            names both bounds (``"expected a whole number from 1 to 1000, got '0'"``).
    """
    expected = f"expected a whole number from {least} to {most}"
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:  # not a number, or more digits than Python reads
            number = None
    if number is None or not least <= number <= most:
        raise InvalidOption(backend, name, f"{expected}, got {_shown(value)}")
    return number


def seconds_option(backend: str, name: str, value: object, *, least: float, most: float) -> float:
    """Read the duration option ``name`` of ``backend``, in seconds (a timeout).

    :func:`real_option` with ``unit="seconds"``; the same arguments, result and error.
    """
    return real_option(backend, name, value, least=least, most=most, unit="seconds")


def real_option(backend: str, name: str, value: object, *, least: float, most: float, unit: str) -> float:
    """Read the option ``name`` of ``backend``, a real number of ``unit`` (a timeout, say).

    Args:
        backend: the backend's name, for the error.
        name: the option's name, for the error (``"pool_timeout"``).
        value: a real number (``int``, ``float``; not a ``bool``), or its text (``"2.5"``).
        least: the least value allowed (for a timeout, one that still lets the store work).
        most: the largest value allowed.
        unit: what the number counts, for the error (``"seconds"``, ``"milliseconds"``).

    Returns:
        The number as a ``float``, finite, ``least <= number <= most``.

    Raises:
        InvalidOption: ``value`` is not a number, is not finite (NaN, infinity), or lies outside
            the bounds; the reason names both (``"expected seconds from 1 to 3600, got nan"``).
    """
    expected = f"expected {unit} from {least:g} to {most:g}"
    number = math.nan
    if isinstance(value, Real) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            number = math.inf
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = math.nan
    if not least <= number <= most:  # NaN compares false: refused too
        raise InvalidOption(backend, name, f"{expected}, got {_shown(value)}")
    return number


def _shown(value: object) -> str:
    """``repr(value)`` for an error, cut short (an int of 10,000 digits has no ``repr`` at all)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    shown = repr(value)
    if len(shown) > _SHOWN_CHARACTERS:
        return shown[: _SHOWN_CHARACTERS - 3] + "..."
    return shown
