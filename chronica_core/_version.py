"""The version of every Chronica distribution, read from the one file that holds it.

``chronica_core/VERSION`` is the only place the version is written: the core's ``pyproject.toml``
reads it, and every other distribution of the repository (backends, conformance suite,
integrations) reads it through a ``VERSION`` link in its own folder, so they all carry one version
and bound their dependency on ``chronica`` to its minor series (``chronica>=0.2,<0.3``).
"""

from __future__ import annotations

from importlib.resources import files

__all__ = ["__version__"]

__version__: str = files("chronica_core").joinpath("VERSION").read_text(encoding="utf-8").strip()
"""The version, e.g. ``"0.2.0"``."""
