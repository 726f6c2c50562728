"""Reading store options given as text, as ``--option KEY=VALUE`` and URLs give them.

Backends keep their own option names; what a true/false option looks like is the same for all.
"""

from __future__ import annotations

from chronica_core.errors import InvalidOption

__all__ = ["flag_option"]

_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})


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
    raise InvalidOption(backend, name, f"expected true or false, got {value!r}")
