"""Hypothesis profiles for the conformance suite, selected by the ``HYPOTHESIS_PROFILE`` variable.

The suite's own values live under ``chronica-ci`` and ``chronica-dev``; ``ci`` and ``dev`` are
registered with the same values only where nobody has registered them yet (hypothesis ships its
own ``ci``), so installing the plugin changes no other project's profiles. The stateful test
uses the suite's values whenever ``ci`` or ``dev`` is selected, and ``chronica-default`` (a
bounded run: minutes, not hours, on a slow backend) when nobody selected a profile.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.errors import InvalidArgument

__all__ = ["PROFILES", "load_profile_from_environment", "register_profiles", "stateful_settings"]

PROFILES: dict[str, dict[str, object]] = {
    # Deterministic; the stateful test takes seconds on memory:// and under half a minute per
    # flavour on PostgreSQL or MariaDB.
    "ci": {
        "derandomize": True,
        "database": None,
        "deadline": None,
        "print_blob": True,
        "max_examples": 40,
        "stateful_step_count": 30,
        "suppress_health_check": [HealthCheck.too_slow],
    },
    # What a project gets without selecting a profile: hypothesis's own default (100 examples of
    # 50 steps) makes the stateful test take many minutes per flavour on a slow backend; these
    # 20 examples of 20 steps are about a sixth of the ci profile's work.
    "default": {
        "deadline": None,
        "max_examples": 20,
        "stateful_step_count": 20,
        "suppress_health_check": [HealthCheck.too_slow],
    },
    # Random and longer, with hypothesis's example database, for development.
    "dev": {
        "deadline": None,
        "max_examples": 100,
        "stateful_step_count": 50,
        "suppress_health_check": [HealthCheck.too_slow],
    },
}
"""The suite's profiles, by the name ``HYPOTHESIS_PROFILE`` selects them with."""


def _registered(name: str) -> bool:
    try:
        settings.get_profile(name)
    except InvalidArgument:
        return False
    return True


def register_profiles() -> None:
    """Register ``chronica-ci``, ``-dev`` and ``-default``, and ``ci`` / ``dev`` where still free.

    Hypothesis's own ``default`` profile is never replaced.
    """
    for name, values in PROFILES.items():
        settings.register_profile(f"chronica-{name}", **values)  # type: ignore[arg-type]
        if not _registered(name):
            settings.register_profile(name, **values)  # type: ignore[arg-type]


def load_profile_from_environment() -> str | None:
    """Load the profile ``HYPOTHESIS_PROFILE`` names; return its name.

    Returns ``None`` (and loads nothing) when the variable is unset or names a profile not
    registered yet (a project may register its own later, in a conftest).
    """
    name = os.environ.get("HYPOTHESIS_PROFILE")
    if not name or not _registered(name):  # load_profile would record an unknown name before failing
        return None
    settings.load_profile(name)
    return name


def stateful_settings() -> settings:
    """The settings for the stateful test.

    The suite's ``ci`` or ``dev`` values when ``HYPOTHESIS_PROFILE`` (or, without it, the active
    profile) is ``ci`` or ``dev``; its bounded ``default`` values (20 examples of 20 steps) when
    that is hypothesis's ``default``, i.e. when nobody chose a profile; otherwise the chosen
    profile, as it is, without a deadline. To run it longer, select ``dev`` or a profile of your
    own (``settings.register_profile``, then ``HYPOTHESIS_PROFILE=NAME``).
    """
    name = os.environ.get("HYPOTHESIS_PROFILE") or settings.get_current_profile_name()
    if name in PROFILES:
        register_profiles()
        return settings.get_profile(f"chronica-{name}")
    return settings(settings.default, deadline=None, suppress_health_check=[HealthCheck.too_slow])
