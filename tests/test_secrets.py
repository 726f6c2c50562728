"""A password in the store URL is never shown: the registry's errors, the CLI, the stores' errors.

Each URL holds the marker password of :mod:`chronica_conformance.secrecy`, as written (its ``/``
makes the URL malformed) and percent-encoded. The backends' own tests feed it through their
drivers; these cover what the core shows for every backend.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from chronica_conformance.secrecy import (
    ENCODED_SECRET,
    SECRET,
    assert_hidden,
    cli_says,
    conformance_says,
    opening_says,
    said_by_error,
)

from chronica_core import (
    ActaQuery,
    AsyncPlannedStore,
    Backend,
    ChronicaError,
    PlannedStore,
    StoreError,
    hookimpl,
)
from chronica_core.plans import Plan
from chronica_core.registry import Registry

SPELLINGS = pytest.mark.parametrize("secret", [SECRET, ENCODED_SECRET], ids=["as-written", "encoded"])


@SPELLINGS
@pytest.mark.parametrize(
    "template",
    [
        "postgresql//postgres:{secret}@db.example/test",  # no "://"
        "postgres:{secret}@db.example/test://x",  # "://" after the password
        "memory:/ardian:{secret}@localhost",
    ],
)
def test_a_url_the_registry_cannot_read_is_refused_without_its_password(template: str, secret: str) -> None:
    assert_hidden(opening_says(template.format(secret=secret)), "UnknownBackend")


def _quoting_opener(url: str, **options: Any) -> Any:
    """A third-party backend whose driver quotes the URL when it refuses it."""
    try:
        raise ConnectionError(f"cannot connect with {url!r}")
    except ConnectionError as error:
        raise StoreError("quoting: open", f"driver says: {error}") from error


class _QuotingPlugin:
    @hookimpl
    def chronica_backends(self) -> list[Backend]:
        return [Backend(name="quoting", schemes=("quoting",), idempotent=True, open=_quoting_opener)]


@SPELLINGS
def test_what_a_backend_raises_at_open_is_redacted_by_the_registry(secret: str) -> None:
    """Any backend, a third party's too: the error and the driver's error chained to it."""
    registry = Registry(load_entry_points=False)
    registry.register(_QuotingPlugin(), "quoting")
    url = f"quoting://app:{secret}@db.example/test?token={secret}"
    with pytest.raises(StoreError) as raised:
        registry.open_store(url)
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert str(raised.value).startswith("quoting: open: driver says: cannot connect with 'quoting://app:***@")
    assert_hidden(said_by_error(raised.value), "the registry's error")


class _QuotingPlans:
    """Plans whose every operation fails with a driver error that quotes the store's URL."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _fail(self) -> Plan[Any, Any]:
        try:
            raise OSError(f"lost {self.url}")
        except OSError as error:
            raise StoreError("quoting: get chronicum", f"{error.args[0]}") from error
        yield  # a generator: a plan

    def create(self, chronicum: Any) -> Plan[Any, None]:
        return self._fail()

    def get(self, chronicum_id: str) -> Plan[Any, Any]:
        return self._fail()

    def record(self, actum: Any) -> Plan[Any, Any]:
        return self._fail()

    def record_idempotent(self, actum: Any, key: str) -> Plan[Any, Any]:
        return self._fail()

    def acta(self, chronicum_id: str, query: ActaQuery) -> Plan[Any, list[Any]]:
        return self._fail()

    def record_many(self, acta: Any, key: str | None) -> Plan[Any, list[Any]]:
        return self._fail()

    def list_chronica(self, owner_id: str, limit: int, after: Any) -> Plan[Any, list[Any]]:
        return self._fail()

    def erase(self, chronicum_id: str, owner_digest: str) -> Plan[Any, int]:
        return self._fail()

    def erase_owner(self, owner_id: str, owner_digest: str) -> Plan[Any, int]:
        return self._fail()

    def reopen(self, chronicum: Any, owner_digest: str) -> Plan[Any, bool]:
        return self._fail()

    def withdraw(self, chronicum_id: str, owner_digest: str) -> Plan[Any, bool]:
        return self._fail()

    def content_limit(self) -> Plan[Any, int | None]:
        return self._fail()


class _QuotingStore(PlannedStore):
    def __init__(self, url: str) -> None:
        self.plans = _QuotingPlans(url)
        self._secrets_of = url

    def close(self) -> None:
        self._mark_closed()

    def _run(self, plan: Plan[Any, Any]) -> Any:
        return next(plan)


class _AsyncQuotingStore(AsyncPlannedStore):
    def __init__(self, url: str) -> None:
        self.plans = _QuotingPlans(url)
        self._secrets_of = url

    async def close(self) -> None:
        self._mark_closed()

    async def _run(self, plan: Plan[Any, Any]) -> Any:
        return next(plan)


@SPELLINGS
def test_what_an_operation_raises_is_redacted_by_the_planned_store(secret: str) -> None:
    """A store built on PlannedStore / AsyncPlannedStore names its URL: every operation's error,
    and the driver's error chained to it, are redacted (a driver may quote the URL at any time)."""
    url = f"quoting://app:{secret}@db.example/test"
    with pytest.raises(ChronicaError) as raised:
        _QuotingStore(url).get("c")
    assert isinstance(raised.value.__cause__, OSError)
    assert_hidden(said_by_error(raised.value), "a blocking operation's error")

    async def read() -> None:
        await _AsyncQuotingStore(url).get("c")

    with pytest.raises(ChronicaError) as raised:
        asyncio.run(read())
    assert_hidden(said_by_error(raised.value), "an asyncio operation's error")


@pytest.mark.parametrize(
    "url",
    [
        f"memory://ardian:{ENCODED_SECRET}@localhost",
        f"notebook://localhost?password={ENCODED_SECRET}&schema=x",  # the memory store takes no query
        f"notebook://localhost?sslpassword={SECRET}&token={ENCODED_SECRET}",
        f"notebook://ardian:{SECRET}@localhost",
    ],
)
def test_the_cli_never_shows_the_password_of_the_store_it_used(url: str) -> None:
    """``demo`` and ``migrate`` name the store; ``record`` does not; none shows the password."""
    said = cli_says(url)
    assert said.count("-> exit 0") == 3, said
    assert "***" in said, said
    assert_hidden(said, "chronica")


def test_the_cli_never_shows_the_password_of_a_url_it_cannot_use() -> None:
    assert_hidden(cli_says(f"memory//ardian:{SECRET}@localhost"), "chronica on a URL without ://")


@SPELLINGS
def test_a_conformance_run_never_shows_the_password(secret: str) -> None:
    said = conformance_says(f"memory://ardian:{secret}@localhost?token={secret}")
    assert "memory://ardian:***@localhost?token=***-sync" in said, said
    assert_hidden(said, "chronica conformance")
