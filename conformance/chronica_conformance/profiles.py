"""Hypothesis profiles for the conformance suite, selected by the ``HYPOTHESIS_PROFILE`` variable."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.errors import InvalidArgument

__all__ = ["PROFILES", "load_profile_from_environment", "register_profiles"]

PROFILES: dict[str, dict[str, object]] = {
    # Deterministic; enough for the stateful test to take seconds on memory:// and well under a
    # minute per flavour on a real database.
    "ci": {
        "derandomize": True,
        "database": None,
        "deadline": None,
        "print_blob": True,
        "max_examples": 40,
        "stateful_step_count": 30,
        "suppress_health_check": [HealthCheck.too_slow],
    },
    # Random and a little longer, with hypothesis's example database, for development.
    "dev": {"deadline": None, "max_examples": 100, "stateful_step_count": 50},
}
"""The profiles :func:`register_profiles` registers, by name."""


def register_profiles() -> None:
    """Register the ``ci`` and ``dev`` profiles of :data:`PROFILES` (replacing hypothesis's own ``ci``)."""
    for name, values in PROFILES.items():
        settings.register_profile(name, **values)  # type: ignore[arg-type]


def load_profile_from_environment() -> str | None:
    """Load the profile ``HYPOTHESIS_PROFILE`` names; return its name.

    Returns ``None`` (and loads nothing) when the variable is unset or names a profile not
    registered yet (a project may register its own later, in a conftest).
    """
    name = os.environ.get("HYPOTHESIS_PROFILE")
    if not name:
        return None
    try:
        settings.get_profile(name)  # load_profile would record an unknown name as current before failing
    except InvalidArgument:
        return None
    settings.load_profile(name)
    return name
