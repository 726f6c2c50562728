"""The backend registry: entry-point discovery, broken plugins, scheme choice and its errors.

The memory envs of tox install tests/thirdparty_store (distribution chronica-notebook), which
declares one working backend and one entry point whose module fails to import.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import distribution
from typing import Any

import pytest

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    Backend,
    BackendConflict,
    BackendUnavailable,
    Chronicarius,
    InvalidOption,
    MemoryStore,
    UnknownBackend,
    hookimpl,
    list_backends,
    open_async_store,
    open_store,
)
from chronica_core.registry import Registry, registry


def test_the_third_party_distribution_is_installed_for_these_tests() -> None:
    assert distribution("chronica-notebook").entry_points.select(group="chronica"), (
        "install tests/thirdparty_store (tox's memory environments do)"
    )


def test_third_party_backend_is_discovered_through_its_entry_point() -> None:
    installed, _ = list_backends()
    by_name = {item.backend.name: item for item in installed}
    assert by_name["notebook"].plugin == "notebook"
    assert by_name["notebook"].backend.schemes == ("notebook",)
    assert by_name["memory"].backend.idempotent is True
    with open_store("notebook://") as store:
        stored = Chronicarius(store).record_actum(
            "ardian", Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi")
        )
        assert store.acta("c", ActaQuery()) == [stored]
        assert type(store).__module__ == "chronica_notebook.plugin"


def test_a_broken_plugin_is_listed_with_its_error_and_hides_nothing() -> None:
    installed, broken = list_backends()
    assert [(plugin.name, plugin.distribution) for plugin in broken] == [
        ("broken-example", "chronica-notebook")
    ]
    assert "chronica_frobnicator_driver" in broken[0].error
    assert {"memory", "notebook"} <= {item.backend.name for item in installed}
    with open_store("memory://") as store:
        assert isinstance(store, MemoryStore)


def test_unknown_scheme_lists_installed_schemes_and_suggests_a_near_miss() -> None:
    with pytest.raises(UnknownBackend) as raised:
        open_store("memroy://")
    message = str(raised.value)
    assert "memroy://" in message
    assert "memory" in message and "notebook" in message
    assert "did you mean memory://?" in message
    assert "broken-example" in message


def test_unknown_first_party_scheme_says_what_to_install() -> None:
    if any("mongodb" in item.backend.schemes for item in list_backends()[0]):
        pytest.fail("this test expects chronica-mongodb not to be installed (tox memory env)")
    with pytest.raises(UnknownBackend, match=r"pip install \S+/backends/mongodb to add it"):
        open_store("mongodb://127.0.0.1/chronica")


@pytest.mark.parametrize("url", ["memory", "", "://x", "no scheme here"])
def test_a_url_without_scheme_is_unknown(url: str) -> None:
    with pytest.raises(UnknownBackend, match="scheme://"):
        open_store(url)


class FakePlugin:
    """A plugin object registered by hand, for registry behaviour that needs no installed distribution."""

    def __init__(self, *backends: Backend, error: Exception | None = None) -> None:
        self.backends = list(backends)
        self.error = error

    @hookimpl
    def chronica_backends(self) -> list[Backend]:
        if self.error is not None:
            raise self.error
        return self.backends


def _backend(name: str, *schemes: str, **fields: Any) -> Backend:
    fields.setdefault("open", MemoryStore)
    return Backend(name=name, schemes=schemes, idempotent=True, **fields)


def _needs_driver(url: str, **options: Any) -> MemoryStore:
    import chronica_no_such_driver  # type: ignore[import-not-found]  # noqa: F401

    raise AssertionError("unreachable")


def test_two_plugins_claiming_one_scheme_is_an_error_naming_both() -> None:
    registry = Registry(load_entry_points=False)
    registry.register(FakePlugin(_backend("first", "dup")), "plugin-one")
    registry.register(FakePlugin(_backend("second", "dup")), "plugin-two")
    with pytest.raises(BackendConflict) as raised:
        registry.open_store("dup://x")
    assert "first (plugin plugin-one)" in str(raised.value)
    assert "second (plugin plugin-two)" in str(raised.value)


def test_an_exact_scheme_wins_over_a_dialect_pattern() -> None:
    registry = Registry(load_entry_points=False)
    registry.register(FakePlugin(_backend("patterned", "postgresql+*", "mysql+*")), "patterned")
    registry.register(FakePlugin(_backend("exact", "postgresql", "postgresql+special")), "exact")
    assert registry.backend_for("postgresql://h/db").name == "exact"
    assert registry.backend_for("postgresql+special://h/db").name == "exact"
    assert registry.backend_for("postgresql+psycopg://h/db").name == "patterned"
    assert registry.backend_for("MySQL+PyMySQL://h/db").name == "patterned"
    with pytest.raises(UnknownBackend):
        registry.backend_for("mysql://h/db")


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [
        ("postgresq+psycopg", "postgresql+psycopg://"),
        ("mariadbb+pymysql", "mariadb+pymysql://"),
        ("postgresq", "postgresql://"),
    ],
)
def test_a_near_miss_of_a_pattern_suggests_a_url_one_can_type(typed: str, suggested: str) -> None:
    registry = Registry(load_entry_points=False)
    registry.register(FakePlugin(_backend("patterned", "postgresql+*", "mariadb+*")), "patterned")
    registry.register(FakePlugin(_backend("exact", "postgresql")), "exact")
    with pytest.raises(UnknownBackend) as raised:
        registry.backend_for(f"{typed}://h/db")
    message = str(raised.value)
    assert f"did you mean {suggested}?" in message
    assert "*" not in message  # the patterns are listed as postgresql+<driver>
    assert "postgresql+<driver>" in message


def test_a_missing_driver_says_what_to_pip_install() -> None:
    registry = Registry(load_entry_points=False)
    registry.register(
        FakePlugin(_backend("needy", "needy", open=_needs_driver, install="chronica-needy")), "needy"
    )
    with pytest.raises(BackendUnavailable) as raised:
        registry.open_store("needy://x")
    assert "chronica_no_such_driver" in str(raised.value)
    assert "pip install chronica-needy" in str(raised.value)
    assert isinstance(raised.value.__cause__, ModuleNotFoundError)


def test_a_plugin_whose_hook_raises_is_listed_and_hides_nothing() -> None:
    registry = Registry(load_entry_points=False)
    registry.register(FakePlugin(error=RuntimeError("boom")), "exploding")
    registry.register(FakePlugin(_backend("fine", "fine")), "fine")
    assert [item.backend.name for item in registry.installed()] == ["fine"]
    assert [(plugin.name, plugin.error) for plugin in registry.broken] == [
        ("exploding", "RuntimeError: boom")
    ]
    assert isinstance(registry.open_store("fine://"), MemoryStore)


def test_a_backend_without_an_async_store_says_so() -> None:
    with pytest.raises(BackendUnavailable, match="no asyncio store"):
        open_async_store("notebook://")


def test_open_async_store_gives_the_async_memory_store() -> None:
    async def scenario() -> list[Actum]:
        chronicarius = AsyncChronicarius(open_async_store("memory://"))
        await chronicarius.record_actum(
            "ardian", Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi")
        )
        return await chronicarius.get_acta("ardian", "c")

    assert [actum.content for actum in asyncio.run(scenario())] == ["hi"]


def test_the_process_registry_is_loaded_once_and_can_be_reloaded() -> None:
    first = registry()
    assert registry() is first
    assert registry(reload=True) is not first


def test_the_memory_store_refuses_options_naming_them() -> None:
    with pytest.raises(InvalidOption) as raised:
        open_store("memory://", pool_size=3)
    assert (raised.value.backend, raised.value.option) == ("memory", "pool_size")
    with pytest.raises(InvalidOption, match="memory: option bogus"):
        open_async_store("memory://", bogus=1)


@pytest.mark.parametrize("url", [None, b"memory://", 5])
def test_a_url_that_is_not_a_str_is_unknown_backend_naming_its_type(url: Any) -> None:
    # open_store(os.environ.get("CHRONICA_STORE")) with the variable unset gives None
    expected = f"the store URL must be a str such as memory://, not {type(url).__name__}"
    with pytest.raises(UnknownBackend) as raised:
        open_store(url)
    assert str(raised.value) == expected
    with pytest.raises(UnknownBackend) as raised_async:
        open_async_store(url)
    assert str(raised_async.value) == expected


@pytest.mark.parametrize("typed", ["Memory://", "MEMORY://", "mEmOrY://"])
def test_a_scheme_in_any_case_opens_the_memory_store(typed: str) -> None:
    with open_store(typed) as store:
        assert isinstance(store, MemoryStore)
    assert type(open_async_store(typed)).__name__ == "AsyncMemoryStore"


def test_a_backend_is_given_the_url_with_its_scheme_in_lower_case() -> None:
    given: list[str] = []

    def opener(url: str, **options: Any) -> MemoryStore:
        given.append(url)
        return MemoryStore()

    registry = Registry(load_entry_points=False)
    registry.register(FakePlugin(_backend("lower", "low+er", open=opener, open_async=opener)), "lower")
    registry.open_store("LOW+Er://User:PassWord@Host/DB?Key=Value")
    registry.open_async_store("Low+ER://h/x")
    assert given == ["low+er://User:PassWord@Host/DB?Key=Value", "low+er://h/x"]


@pytest.mark.parametrize(
    ("url", "option"),
    [("memory://?bogus=1", "bogus"), ("memory://?max_content_bytes=9&pool_size", "pool_size")],
)
def test_the_memory_store_refuses_a_query_parameter_naming_it(url: str, option: str) -> None:
    for opener in (open_store, open_async_store):
        with pytest.raises(InvalidOption) as raised:
            opener(url)
        assert (raised.value.backend, raised.value.option) == ("memory", option)


def test_the_memory_store_reads_max_content_bytes_in_its_url() -> None:
    with open_store("memory://?max_content_bytes=10") as store:
        assert isinstance(store, MemoryStore) and store.max_content_bytes() == 10
    with open_store("memory://?max_content_bytes=10", max_content_bytes=20) as store:  # the option wins
        assert isinstance(store, MemoryStore) and store.max_content_bytes() == 20
    with pytest.raises(InvalidOption) as raised:
        open_store("memory://?max_content_bytes=ten")
    assert raised.value.option == "max_content_bytes"
