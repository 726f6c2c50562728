"""One flavour at a time, a missing asyncio driver said once, and the bounded default profile."""

from __future__ import annotations

import subprocess
import sys

import pytest
from chronica_conformance.profiles import PROFILES, stateful_settings
from hypothesis import settings

from chronica_core import cli

pytest_plugins = ("pytester",)

S1 = "test_s1_get_returns_the_stored_owner"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHRONICA_TEST_STORES", raising=False)
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "ci")


def _flavours_collected(result: pytest.RunResult) -> list[str]:
    return sorted(line.rsplit("[", 1)[1] for line in result.outlines if f"{S1}[" in line)


@pytest.mark.parametrize(
    ("option", "flavours"),
    [
        ((), ["memory://-async]", "memory://-sync]"]),
        (("--chronica-sync-only",), ["memory://-sync]"]),
        (("--chronica-async-only",), ["memory://-async]"]),
    ],
)
def test_one_flavour_is_run_when_asked(
    pytester: pytest.Pytester, option: tuple[str, ...], flavours: list[str]
) -> None:
    result = pytester.runpytest_inprocess(
        "--chronica-store", "memory://", *option, "--collect-only", "-q", "-p", "no:cacheprovider"
    )
    assert _flavours_collected(result) == flavours


def test_both_flavour_options_are_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(
        "--chronica-store",
        "memory://",
        "--chronica-sync-only",
        "--chronica-async-only",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--chronica-sync-only and --chronica-async-only exclude each other*"])


ONE_FLAVOUR_SUBCLASS = """
import pytest
from chronica_conformance import ConformanceSuite
from chronica_core import AsyncMemoryStore, MemoryStore


class TestBoth(ConformanceSuite):
    declares_idempotent = True

    @pytest.fixture
    def store(self):
        with MemoryStore() as store:
            yield store

    @pytest.fixture
    def async_store(self):
        return AsyncMemoryStore()
"""


def test_a_subclass_runs_one_flavour_when_asked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_both=ONE_FLAVOUR_SUBCLASS)
    result = pytester.runpytest_inprocess(
        "--chronica-async-only", "--collect-only", "-q", "-p", "no:cacheprovider"
    )
    assert sorted(line.rsplit("[", 1)[1] for line in result.outlines if f"{S1}[" in line) == ["async]"]


@pytest.mark.parametrize(
    ("arguments", "flavours"),
    [
        (["conformance", "memory://", "--sync-only"], ["memory://-sync]"]),
        (["conformance", "--async-only", "memory://"], ["memory://-async]"]),
    ],
)
def test_the_cli_runs_one_flavour_when_asked(
    capfd: pytest.CaptureFixture[str], arguments: list[str], flavours: list[str]
) -> None:
    assert cli.main([*arguments, "--collect-only", "-q"]) == 0
    out = capfd.readouterr().out
    assert sorted(line.rsplit("[", 1)[1] for line in out.splitlines() if f"{S1}[" in line) == flavours


def test_the_cli_refuses_both_flavour_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["conformance", "--sync-only", "memory://", "--async-only"]) == 2
    assert capsys.readouterr().err == "chronica conformance: give --sync-only or --async-only, not both\n"


NO_ASYNC_DRIVER = """
from chronica_core import Backend, MemoryStore, hookimpl
from chronica_core.registry import registry


def _open_async(url, **options):
    import chronica_missing_async_driver


class Halfway:
    @hookimpl
    def chronica_backends(self):
        return [
            Backend(
                "halfway",
                ("halfway",),
                True,
                open=lambda url, **options: MemoryStore(),
                open_async=_open_async,
                install="chronica-halfway[async]",
                needs_server=False,
            )
        ]


registry().register(Halfway(), "halfway")


def pytest_unconfigure(config):
    registry().plugin_manager.unregister(name="halfway")
"""


def test_a_missing_asyncio_driver_leaves_the_async_cases_out_saying_once_what_to_install(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(NO_ASYNC_DRIVER)
    result = pytester.runpytest_inprocess("--chronica-store", "halfway://", "-rs", "-p", "no:cacheprovider")
    reason = (
        "the asyncio driver of halfway:// is not installed: backend 'halfway' needs "
        "'chronica_missing_async_driver', which is not installed: pip install 'chronica-halfway[async]'"
    )
    assert [line for line in result.outlines if "chronica_missing_async_driver" in line] == [
        f"chronica-conformance: async cases not run: {reason}"
    ]
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0
    assert outcomes["passed"] >= 40
    assert "-async]" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_without_a_chosen_profile_the_stateful_test_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYPOTHESIS_PROFILE")
    previous = settings.get_current_profile_name()
    settings.load_profile("default")  # hypothesis's own: 100 examples of 50 steps
    try:
        bounded = stateful_settings()
    finally:
        settings.load_profile(previous)
    assert (bounded.max_examples, bounded.stateful_step_count, bounded.deadline) == (20, 20, None)
    assert PROFILES["default"]["max_examples"] == 20


def test_a_chosen_profile_overrides_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "dev")
    assert (stateful_settings().max_examples, stateful_settings().stateful_step_count) == (100, 50)
    settings.register_profile("a-projects-own", max_examples=7, stateful_step_count=3)
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "a-projects-own")
    previous = settings.get_current_profile_name()
    settings.load_profile("a-projects-own")
    try:
        chosen = stateful_settings()
    finally:
        settings.load_profile(previous)
    assert (chosen.max_examples, chosen.stateful_step_count, chosen.deadline) == (7, 3, None)


def test_the_plugin_leaves_hypothesis_s_default_profile_alone() -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import chronica_conformance.plugin as p; p.register_profiles();"
            "from hypothesis import settings; print(settings.get_profile('default').max_examples)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.stdout.strip() == "100", run.stderr
