"""The plugin interface: what a backend distribution implements (pluggy hook specifications).

A backend distribution declares, in its ``pyproject.toml``::

    [project.entry-points.chronica]
    mystore = "my_package.plugin"

and ``my_package/plugin.py`` holds::

    from chronica_core import Backend, hookimpl

    @hookimpl
    def chronica_backends() -> list[Backend]:
        return [Backend(name="mystore", schemes=("mystore",), idempotent=True,
                        capabilities=("batch", "listing", "follow"), open=open_my_store,
                        install="my-distribution", follows="a trigger's wake-ups")]

Keep the plugin module light: import the driver inside ``open`` so that a missing driver is
reported as ``BackendUnavailable`` instead of hiding the backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pluggy

from chronica_core.store import AsyncStore, Store

__all__ = ["PROJECT_NAME", "Backend", "BackendSpec", "hookimpl", "hookspec"]

PROJECT_NAME = "chronica"
"""The pluggy project name and the entry-point group backends register under."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@dataclass(frozen=True, slots=True)
class Backend:
    """What a plugin says about one backend.

    Attributes:
        name: a short name shown by ``chronica backends``, e.g. ``"postgres"``.
        schemes: URL schemes it handles, e.g. ``("postgresql", "postgres")``. A scheme may end in
            ``+*`` to claim every driver of a dialect (``"mysql+*"``); an exact claim wins over it.
        idempotent: whether its stores are ``IdempotentStore`` (the conformance suite then runs,
            and never skips, the idempotent contract).
        open: ``open(url, **options) -> Store``.
        open_async: ``open_async(url, **options) -> AsyncStore``, or ``None`` if it has none.
        install: the requirement to ``pip install`` for its driver, with the smallest extra that
            suffices, e.g. ``"chronica-postgres[binary]"``; ``BackendUnavailable`` shows it as
            :func:`chronica_core.install.install_command` words it (for a distribution of the
            Chronica repository: its folder in the user's clone, or its name on an index).
        needs_server: whether its URLs point at a server (the conformance suite, given no URL,
            runs only backends that need none).
        example_url: a URL that works without a server, for those that need none.
        capabilities: the other optional capabilities its stores offer, by name (``"batch"``,
            ``"listing"``, ``"erasure"``; see :mod:`chronica_core.capabilities`). The conformance
            suite runs, and never skips, the cases of each one declared; ``chronica backends``
            shows them.
        follows: how its stores' followers learn of new acta, in a few words shown by
            ``chronica backends`` (``"LISTEN/NOTIFY"``, ``"change streams on a replica set, else
            polling (chosen at connect)"``). Empty: ``chronica backends`` says ``"polling through
            acta"`` for a backend without the ``follow`` capability (what ``Chronicarius.follow``
            does there), and ``"the store's own wake-ups (follow capability)"`` for one with it.
    """

    name: str
    schemes: tuple[str, ...]
    idempotent: bool
    open: Callable[..., Store]
    open_async: Callable[..., AsyncStore] | None = None
    install: str = ""
    needs_server: bool = True
    example_url: str = ""
    capabilities: tuple[str, ...] = ()
    follows: str = ""


class BackendSpec:
    """Hook specifications a Chronica plugin may implement."""

    @hookspec
    def chronica_backends(self) -> list[Backend]:  # type: ignore[empty-body]
        """Return the backends this plugin provides."""
