"""What every conformance group shares: the flavour parametrisation, the harness fixture, helpers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest

from chronica_conformance.harness import AsyncHarness, Flavour, Harness, SyncHarness
from chronica_core import ActorKind, Actum, ActumKind, Chronicum, new_actum_id
from chronica_core.capabilities import store_capabilities
from chronica_core.redaction import masked_url
from chronica_core.store import AsyncStore, Store

__all__ = [
    "TIME_TOLERANCE",
    "SuiteBase",
    "Target",
    "assert_aware_utc",
    "assert_same_acta",
    "assert_same_actum",
    "ids",
    "make_actum",
    "new_chronicum",
    "new_id",
    "new_owner",
    "require_capability",
]

FLAVOUR_FIXTURES: dict[Flavour, str] = {"sync": "store", "async": "async_store"}
"""The fixture a suite supplies for each flavour."""

TIME_TOLERANCE = timedelta(milliseconds=1)
"""How far a read-back timestamp may differ from the one written (stores keeping milliseconds)."""


@dataclass(frozen=True, slots=True)
class Target:
    """What one parametrisation of a conformance case runs against.

    Attributes:
        flavour: ``"sync"`` (the ``store`` fixture) or ``"async"`` (the ``async_store`` fixture).
        url: the store URL when the suite was added by ``--chronica-store`` (``None`` for a
            subclass supplying its own fixtures).
        declares_idempotent: overrides the suite's ``declares_idempotent`` when not ``None``.
        declares_capabilities: overrides the suite's ``declares_capabilities`` when not ``None``
            (a URL's backend declares them: ``Backend.capabilities``).
    """

    flavour: Flavour
    url: str | None = None
    declares_idempotent: bool | None = None
    declares_capabilities: tuple[str, ...] | None = None

    @property
    def id(self) -> str:
        """The test id part: ``sync``, ``async``, or ``<url>-sync`` / ``<url>-async``.

        The URL is shown with its password masked (``postgresql://app:***@db/test-sync``).
        """
        return self.flavour if self.url is None else f"{masked_url(self.url)}-{self.flavour}"

    def __repr__(self) -> str:
        """As a dataclass shows itself, the URL masked: pytest prints the arguments of a failed case."""
        url = None if self.url is None else masked_url(self.url)
        return (
            f"Target(flavour={self.flavour!r}, url={url!r}, "
            f"declares_idempotent={self.declares_idempotent!r}, "
            f"declares_capabilities={self.declares_capabilities!r})"
        )


def _fixture_visible(metafunc: pytest.Metafunc, name: str) -> bool:
    """Whether a fixture called ``name`` is visible to the test being collected."""
    manager: Any = getattr(metafunc.definition.session, "_fixturemanager", None)
    if manager is not None and hasattr(manager, "getfixturedefs"):
        try:
            return bool(manager.getfixturedefs(name, metafunc.definition))  # pytest >= 8.1: a node
        except (AttributeError, TypeError):  # pragma: no cover - pytest 8.0 takes the node id
            return bool(manager.getfixturedefs(name, metafunc.definition.nodeid))
    return metafunc.cls is not None and hasattr(metafunc.cls, name)  # pragma: no cover - older pytest


class SuiteBase:
    """Base of the conformance groups: runs each case once per flavour the subclass supplies.

    A subclass supplies a ``store`` fixture (yielding a blocking ``Store``; the fixture closes
    it), an ``async_store`` fixture (returning an ``AsyncStore`` constructed without awaiting; the
    suite awaits its ``close()`` in the test's own event loop), or both. Flavours without a
    fixture are not run; a case for the ``async`` flavour only (the any-loop contract's) skips,
    saying why, without an ``async_store`` fixture. A subclass that defines its own
    ``pytest_generate_tests`` must call ``super().pytest_generate_tests(metafunc)``.

    Attributes:
        declares_idempotent: ``True`` makes the idempotent group fail, instead of skip, when the
            store is not idempotent.
        declares_capabilities: the optional capabilities the store promises, by name
            (``"batch"``, ``"listing"``, ``"erasure"``, ``"follow"``, ``"native"``,
            ``"history"``; see :mod:`chronica_core.capabilities`):
            the group of each one then fails, instead of skipping, when the store lacks it.
    """

    declares_idempotent: ClassVar[bool] = False
    declares_capabilities: ClassVar[tuple[str, ...]] = ()

    def chronica_targets(self, metafunc: pytest.Metafunc) -> list[Target]:
        """Return what each case runs against: one :class:`Target` per supplied flavour.

        Raises ``pytest.UsageError`` (a collection error) when neither fixture is supplied.
        """
        flavours = [flavour for flavour, name in FLAVOUR_FIXTURES.items() if _fixture_visible(metafunc, name)]
        if not flavours:
            owner = metafunc.cls.__name__ if metafunc.cls is not None else metafunc.module.__name__
            raise pytest.UsageError(
                f"{owner} runs the Chronica conformance suite but supplies neither a `store` "
                "nor an `async_store` fixture"
            )
        return [Target(flavour) for flavour in flavours]

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Parametrise every case that uses ``chronica_harness`` by :meth:`chronica_targets`.

        Only the flavours ``--chronica-sync-only`` / ``--chronica-async-only`` leave are kept.
        """
        if "chronica_target" in metafunc.fixturenames:
            from chronica_conformance.plugin import selected_flavours

            kept = selected_flavours(metafunc.config)
            every_target = self.chronica_targets(metafunc)
            targets = [target for target in every_target if target.flavour in kept]
            if getattr(metafunc.function, "chronica_async_only", False):  # see loop_contract.async_only
                targets = [target for target in targets if target.flavour == "async"]
                if not targets:
                    reason = (
                        "an asyncio store's case, and the run is for blocking stores only"
                        if any(target.flavour == "async" for target in every_target)
                        else "an asyncio store's case, and the suite supplies no `async_store` fixture"
                    )
                    metafunc.parametrize(
                        "chronica_target",
                        [pytest.param(None, marks=pytest.mark.skip(reason=reason))],
                        ids=["sync"],
                    )
                    return
            metafunc.parametrize("chronica_target", targets, ids=[target.id for target in targets])

    @pytest.fixture
    def store_to_close(self, request: pytest.FixtureRequest) -> Store:
        """A blocking store the closing case may close: by default the ``store`` fixture's.

        A suite whose ``store`` is shared by several tests must override this with a store of its
        own over the same data (the closing case then also reads through ``store`` that nothing
        was written after closing).
        """
        store: Store = request.getfixturevalue(FLAVOUR_FIXTURES["sync"])
        return store

    @pytest.fixture
    def async_store_to_close(self, request: pytest.FixtureRequest) -> AsyncStore:
        """An asyncio store the closing case may close: by default the ``async_store`` fixture's.

        Override it like :meth:`store_to_close` if ``async_store`` is shared by several tests.
        """
        store: AsyncStore = request.getfixturevalue(FLAVOUR_FIXTURES["async"])
        return store

    @pytest.fixture
    def chronica_harness(self, request: pytest.FixtureRequest, chronica_target: Target) -> Iterator[Harness]:
        """The store of the target's flavour, wrapped in a :class:`Harness`."""
        harness: Harness
        if chronica_target.flavour == "sync":
            store: Store = request.getfixturevalue(FLAVOUR_FIXTURES["sync"])
            harness = SyncHarness(store)
        else:
            async_store: AsyncStore = request.getfixturevalue(FLAVOUR_FIXTURES["async"])
            harness = AsyncHarness(async_store)
        declared = chronica_target.declares_idempotent
        harness.declares_idempotent = self.declares_idempotent if declared is None else declared
        capabilities = chronica_target.declares_capabilities
        harness.declares_capabilities = tuple(
            self.declares_capabilities if capabilities is None else capabilities
        )
        try:
            yield harness
        finally:
            harness.close()


_CAPABILITY_METHODS = {
    "batch": "record_many",
    "listing": "list_chronica",
    "erasure": "erase, erase_owner and reopen",
    "idempotency": "record_idempotent",
    "follow": "acta_after and wait_for_acta",
    "retention": "idle_chronica and erase_idle",
    "native": "keeps_native",
    "history": "layout, window, locate, fork and record_summary",
}


def require_capability(harness: Harness, capability: str, group: str) -> Harness:
    """Return ``harness`` when its store has ``capability``; skip the case, or fail it if declared.

    Args:
        harness: the case's harness.
        capability: a name from :mod:`chronica_core.capabilities`, e.g. ``"batch"``.
        group: what the case belongs to, for the message (``"the batch contract"``).

    A store has a capability when :func:`chronica_core.capabilities.store_capabilities` says so.
    Without it the case is skipped with the reason, unless the suite (or the URL's backend)
    declares the capability (``declares_idempotent`` for ``"idempotency"``): then it fails.
    """
    if capability in store_capabilities(harness.store):
        return harness
    methods = _CAPABILITY_METHODS.get(capability, capability)
    reason = (
        f"{harness.store_name} does not have the {capability} capability ({methods}), "
        f"so {group} does not apply"
    )
    declared = capability in harness.declares_capabilities or (
        capability == "idempotency" and harness.declares_idempotent
    )
    if declared:
        pytest.fail(f"the suite declares the {capability} capability, but {reason}", pytrace=False)
    pytest.skip(reason)


def new_id(label: str = "c") -> str:
    """Return a fresh random chronicum id, ``conformance-<label>-<32 hex>``."""
    return f"conformance-{label}-{uuid.uuid4().hex}"


def new_owner(label: str = "ardian") -> str:
    """Return a fresh owner id, ``<label>-<12 hex>``."""
    return f"{label}-{uuid.uuid4().hex[:12]}"


def new_chronicum(chronicum_id: str | None = None, owner_id: str | None = None) -> Chronicum:
    """Return a chronicum to ``create``: a fresh id and owner unless given, started now (UTC)."""
    return Chronicum(
        id=chronicum_id if chronicum_id is not None else new_id(),
        owner_id=owner_id if owner_id is not None else new_owner(),
        started_at=datetime.now(UTC),
    )


def make_actum(
    chronicum_id: str,
    content: str = "hello",
    *,
    kind: ActumKind = ActumKind.MESSAGE,
    actor_kind: ActorKind = ActorKind.HUMAN,
    actor: str = "ardian",
    actum_id: str | None = None,
) -> Actum:
    """Return an actum for ``chronicum_id`` with a fresh 32-hex id (as a store receives it)."""
    return Actum(
        chronicum_id=chronicum_id,
        kind=kind,
        actor_kind=actor_kind,
        actor=actor,
        content=content,
        id=actum_id if actum_id is not None else new_actum_id(),
    )


def assert_aware_utc(moment: datetime | None, what: str) -> datetime:
    """Assert ``moment`` is a timezone-aware UTC datetime and return it."""
    assert isinstance(moment, datetime), f"{what} is {moment!r}, not a datetime"
    assert moment.tzinfo is not None, f"{what} {moment!r} is naive; it must be timezone-aware UTC"
    assert moment.utcoffset() == timedelta(0), f"{what} {moment!r} is not UTC"
    return moment


_FIELDS = ("id", "chronicum_id", "kind", "actor_kind", "actor", "content", "native", "answers", "summarizes")
"""The fields :func:`assert_same_actum` compares exactly (``at`` is compared within a tolerance)."""


def assert_same_actum(stored: Actum, expected: Actum, *, at: datetime | None = None) -> None:
    """Assert ``stored`` has every field of ``expected`` (``at`` within :data:`TIME_TOLERANCE` of ``at``)."""
    assert isinstance(stored, Actum), f"expected an Actum, got {stored!r}"
    for name in _FIELDS:
        got, want = getattr(stored, name), getattr(expected, name)
        assert got == want, f"actum {name}: stored {_short(got)}, expected {_short(want)}"
    assert isinstance(stored.kind, ActumKind), f"kind {stored.kind!r} is not an ActumKind"
    assert isinstance(stored.actor_kind, ActorKind), f"actor_kind {stored.actor_kind!r} is not an ActorKind"
    moment = assert_aware_utc(stored.at, "actum.at")
    if at is not None:
        assert abs(moment - at) <= TIME_TOLERANCE, f"actum.at {moment} differs from {at}"


def assert_same_acta(got: Sequence[Actum], expected: Sequence[Actum], what: str = "acta") -> None:
    """Assert ``got`` holds the acta of ``expected``, in order, every field equal.

    ``at`` may differ by :data:`TIME_TOLERANCE`; ``what`` names them in the message.
    """
    assert ids(got) == ids(expected), f"{what}: ids {ids(got)} differ from {ids(expected)}"
    for stored, wanted in zip(got, expected, strict=True):
        assert_same_actum(stored, wanted, at=wanted.at)


def ids(acta: Sequence[Actum]) -> list[str]:
    """Return the ids of ``acta`` in order."""
    return [actum.id for actum in acta]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"
