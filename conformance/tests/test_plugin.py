"""Tests of the conformance plugin itself: options, discovery, flavours, skipping and errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import chronica_conformance
import pytest

from chronica_core import cli

pytest_plugins = ("pytester",)

PLAIN_STORE = """
import pytest

from chronica_core import MemoryStore, Store


class PlainStore(Store):
    '''A correct store that is not idempotent (no record_idempotent).'''

    def __init__(self):
        self.inner = MemoryStore()

    def create(self, chronicum):
        self.inner.create(chronicum)

    def get(self, chronicum_id):
        return self.inner.get(chronicum_id)

    def record(self, actum):
        return self.inner.record(actum)

    def acta(self, chronicum_id, query):
        return self.inner.acta(chronicum_id, query)

    def close(self):
        self.inner.close()
"""


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHRONICA_TEST_STORES", raising=False)
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "ci")


def outcome_names(result: pytest.RunResult | pytest.HookRecorder) -> tuple[list[str], list[str], list[str]]:
    assert isinstance(result, pytest.HookRecorder)
    passed, skipped, failed = result.listoutcomes()
    return (
        [report.nodeid for report in passed],
        [report.nodeid for report in skipped if "::test_e1_" not in report.nodeid],  # no injector here
        [report.nodeid for report in failed],
    )


def test_chronica_store_option_runs_at_least_40_cases_per_flavour_all_passing(
    pytester: pytest.Pytester,
) -> None:
    passed, skipped, failed = outcome_names(
        pytester.inline_run("--chronica-store", "memory://", "-p", "no:cacheprovider")
    )
    assert not failed
    assert not skipped
    sync = [
        nodeid for nodeid in passed if nodeid.endswith("[memory://-sync]") or "[memory://-sync-" in nodeid
    ]
    asynchronous = [nodeid for nodeid in passed if "[memory://-async" in nodeid]
    any_loop = [nodeid for nodeid in asynchronous if "::test_any_loop_" in nodeid]  # asyncio stores only
    cancelled = [nodeid for nodeid in asynchronous if "::test_erasure_a_cancelled_" in nodeid]  # likewise
    assert len(sync) >= 40
    assert (len(any_loop), len(cancelled)) == (4, 4)
    assert len(asynchronous) == len(sync) + len(any_loop) + len(cancelled)
    assert len(passed) == len(sync) + len(asynchronous)
    assert any(
        "test_stateful_rules_match_the_reference_model[memory://-async]" in nodeid for nodeid in passed
    )


def test_environment_variable_adds_the_suite_per_url(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHRONICA_TEST_STORES", "memory://, memory://?second")
    result = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    lines = [line for line in result.outlines if "::" in line]
    first = [line for line in lines if "[memory://-" in line]
    second = [line for line in lines if "[memory://?second-" in line]
    assert len(first) >= 80
    assert len(second) == len(first)


def test_option_and_environment_together_run_each_url_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHRONICA_TEST_STORES", "memory://")
    result = pytester.runpytest_inprocess(
        "--chronica-store", "memory://", "--collect-only", "-q", "-p", "no:cacheprovider"
    )
    lines = [line for line in result.outlines if "test_s1_get_returns_the_stored_owner" in line]
    assert sorted(line.rsplit("[", 1)[1] for line in lines) == ["memory://-async]", "memory://-sync]"]


def test_an_unregistered_hypothesis_profile_is_left_to_the_project(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "registered-by-the-project-later")
    pytester.makepyfile(test_unrelated="def test_one():\n    assert 1 + 1 == 2\n")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_nothing_is_added_to_an_unrelated_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_unrelated="def test_one():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_an_unknown_scheme_is_a_clear_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(
        "--chronica-store", "nosuchstore://somewhere", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--chronica-store nosuchstore://somewhere: no installed backend handles nosuchstore://*memory*"]
    )


def test_pyargs_without_urls_runs_every_backend_needing_no_server(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(
        "--pyargs", "chronica_conformance", "--collect-only", "-q", "-p", "no:cacheprovider"
    )
    lines = [line for line in result.outlines if "::" in line]
    assert any("[memory://-sync]" in line for line in lines)
    assert any("[memory://-async]" in line for line in lines)
    assert not any("postgresql://" in line or "mongodb://" in line for line in lines)


ONE_FLAVOUR_SUITES = {
    "sync": """
import pytest
from chronica_core import MemoryStore
from chronica_conformance import StoreContract


class TestMine(StoreContract):
    @pytest.fixture
    def store(self):
        with MemoryStore() as store:
            yield store
""",
    "async": """
import pytest
from chronica_core import AsyncMemoryStore
from chronica_conformance import RulesContract


class TestMine(RulesContract):
    @pytest.fixture
    def async_store(self):
        return AsyncMemoryStore()
""",
}


@pytest.mark.parametrize("flavour", list(ONE_FLAVOUR_SUITES))
def test_a_subclass_supplying_one_flavour_runs_only_that_flavour(
    pytester: pytest.Pytester, flavour: str
) -> None:
    pytester.makepyfile(test_mine=ONE_FLAVOUR_SUITES[flavour])
    passed, skipped, failed = outcome_names(pytester.inline_run("-p", "no:cacheprovider"))
    assert not failed
    assert not skipped
    assert len(passed) >= 20
    assert all(nodeid.endswith(f"[{flavour}]") or f"[{flavour}-" in nodeid for nodeid in passed)


def test_a_subclass_supplying_no_store_is_a_clear_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_mine="""
from chronica_conformance import StoreContract


class TestMine(StoreContract):
    pass
"""
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*TestMine runs the Chronica conformance suite but supplies neither*"])


def test_a_store_that_is_not_idempotent_skips_the_idempotent_group_with_the_reason(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_plain=PLAIN_STORE
        + """
from chronica_conformance import ConformanceSuite


class TestPlain(ConformanceSuite):
    @pytest.fixture
    def store(self):
        return PlainStore()
"""
    )
    recorder = pytester.inline_run("-p", "no:cacheprovider")
    passed, skipped, failed = outcome_names(recorder)
    assert not failed
    capability_groups = (
        "::test_batch_",
        "::test_listing_",
        "::test_erasure_",
        "::test_retention_",
        "::test_native_",
        "::test_history_",
    )
    # an asyncio store's cases: skipped, as there is no async_store fixture
    any_loop = [
        nodeid
        for nodeid in skipped
        if "::test_any_loop_" in nodeid or "::test_erasure_a_cancelled_first_write_" in nodeid
    ]
    assert len(any_loop) == 4 + 4
    without_capabilities = [
        nodeid
        for nodeid in skipped
        if any(group in nodeid for group in capability_groups) and nodeid not in any_loop
    ]
    assert len(without_capabilities) >= 30
    # the follow capability's own case, and following an erased chronicum (as it is and polled)
    follow_skips = [nodeid for nodeid in skipped if "::test_follow_" in nodeid]
    assert len(follow_skips) == 3
    skipped = [nodeid for nodeid in skipped if nodeid not in without_capabilities + follow_skips + any_loop]
    assert len(skipped) == 9 + 2  # and the size group: it tells no content limit either
    reasons = {
        str(report.longrepr[2])
        for report in recorder.listoutcomes()[1]
        if isinstance(report.longrepr, tuple)
        and "::test_e1_" not in report.nodeid
        and report.nodeid not in without_capabilities
        and report.nodeid not in any_loop
        and report.nodeid not in follow_skips
    }
    any_loop_reasons = {
        str(report.longrepr[2])
        for report in recorder.listoutcomes()[1]
        if isinstance(report.longrepr, tuple) and report.nodeid in any_loop
    }
    assert any_loop_reasons == {
        "Skipped: an asyncio store's case, and the suite supplies no `async_store` fixture"
    }
    capability_reasons = {
        str(report.longrepr[2])
        for report in recorder.listoutcomes()[1]
        if isinstance(report.longrepr, tuple) and report.nodeid in without_capabilities
    }
    assert capability_reasons == {
        f"Skipped: PlainStore does not have the {capability} capability ({methods}), "
        f"so the {capability} contract does not apply"
        for capability, methods in (
            ("batch", "record_many"),
            ("listing", "list_chronica"),
            ("erasure", "erase, erase_owner and reopen"),
            ("retention", "idle_chronica and erase_idle"),
            ("native", "keeps_native"),
            ("history", "layout, window, locate, fork and record_summary"),
        )
    }
    follow_reasons = {
        str(report.longrepr[2])
        for report in recorder.listoutcomes()[1]
        if isinstance(report.longrepr, tuple) and report.nodeid in follow_skips
    }
    assert follow_reasons == {
        "Skipped: PlainStore does not have the follow capability (acta_after and wait_for_acta), "
        "so the follow capability's store contract does not apply",
        "Skipped: PlainStore does not have the erasure capability (erase, erase_owner and reopen), "
        "so following an erased chronicum does not apply",
    }
    assert any("test_capability_batch_missing_refuses_before_the_store" in nodeid for nodeid in passed)
    assert any("test_capability_history_missing_refuses_before_the_store" in nodeid for nodeid in passed)
    assert any("test_json_form_of_stored_acta_and_chronica_round_trips" in nodeid for nodeid in passed)
    assert len(reasons) == 2
    assert any(
        "PlainStore is not an IdempotentStore (it has no record_idempotent)" in reason for reason in reasons
    )
    assert any(
        "PlainStore does not tell its content limit (it has no max_content_bytes)" in r for r in reasons
    )
    assert all(
        "::test_s10_" in nodeid
        or "::test_r8_" in nodeid
        or "::test_s2_record_idempotent" in nodeid
        or "too_large" in nodeid
        or "one_byte_more" in nodeid
        for nodeid in skipped
    )
    assert any("test_r9_key_on_a_store_that_is_not_idempotent" in nodeid for nodeid in passed)
    assert any("test_stateful_rules_match_the_reference_model" in nodeid for nodeid in passed)


def test_a_store_declared_idempotent_that_is_not_fails_the_idempotent_group(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_plain=PLAIN_STORE
        + """
from chronica_conformance import IdempotentContract


class TestPlain(IdempotentContract):
    declares_idempotent = True

    @pytest.fixture
    def store(self):
        return PlainStore()
"""
    )
    passed, skipped, failed = outcome_names(pytester.inline_run("-p", "no:cacheprovider"))
    assert not passed
    assert not skipped
    assert len(failed) == 9


def test_run_returns_pytest_exit_codes(pytester: pytest.Pytester) -> None:
    script = (
        "import sys\n"
        "from chronica_conformance import run\n"
        "urls = [url for url in sys.argv[1:2] if url]\n"
        "sys.exit(run(urls, ['-q', '-k', sys.argv[2], *sys.argv[3:]]))\n"
    )
    pytester.makepyfile(run_suite=script)

    def exit_code(url: str, selection: str, *more: str) -> int:
        command = [sys.executable, "run_suite.py", url, selection, *more]
        return subprocess.run(command, cwd=pytester.path, capture_output=True, check=False).returncode

    assert exit_code("memory://", "test_s1 or test_r6") == 0
    assert exit_code("nosuchstore://", "test_s1") == pytest.ExitCode.USAGE_ERROR
    assert exit_code("memory://", "no_case_has_this_name") == pytest.ExitCode.NO_TESTS_COLLECTED
    # No URL: every backend needing no server (only collected, so no other backend's state matters).
    assert exit_code("", "test_s1_get_returns_the_stored_owner", "--collect-only") == 0


@pytest.mark.parametrize("venv_name", [".venv", "env"])
def test_the_suite_installed_in_the_projects_own_venv_is_collected_and_nothing_else_there(
    pytester: pytest.Pytester, venv_name: str
) -> None:
    # The README's setup: a real virtualenv inside the project folder holding the suite, pytest
    # run from the project folder. pytest folds the suite's path into "." and skips the venv.
    venv = pytester.path / venv_name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site_packages = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    installed = Path(chronica_conformance.__file__).parent
    shutil.copytree(installed, site_packages / "chronica_conformance", ignore=shutil.ignore_patterns(".*"))
    (site_packages / "chronica_conformance" / "test_not_the_suite.py").write_text("def test_no(): pass\n")
    (site_packages / "otherpackage" / "tests").mkdir(parents=True)
    (site_packages / "otherpackage" / "tests" / "test_other.py").write_text("def test_other(): pass\n")
    pytester.makepyfile(test_project="def test_project():\n    pass\n")
    environment = {
        **os.environ,
        "PYTHONPATH": str(site_packages),  # first on sys.path: the copy in the venv is imported
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    command = [sys.executable, "-m", "pytest", "-p", "chronica_conformance.plugin", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [*command, "--chronica-store", "memory://", "--collect-only", "-q"],
        cwd=pytester.path,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    collected = [line for line in result.stdout.splitlines() if "::" in line]
    suite = f"{site_packages.relative_to(pytester.path)}/chronica_conformance/test_stores.py::"
    assert [line for line in collected if not line.startswith(suite)] == ["test_project.py::test_project"]
    assert len(collected) >= 81
    # Without the suite requested, the venv stays skipped as pytest skips it.
    plain = subprocess.run(
        [*command, "--collect-only", "-q"],
        cwd=pytester.path,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert [line for line in plain.stdout.splitlines() if "::" in line] == ["test_project.py::test_project"]


BREAK_MEMORY_STORE = """
import dataclasses

from chronica_core import memory

_get = memory.MemoryStore.get


def get(self, chronicum_id):
    return dataclasses.replace(_get(self, chronicum_id), owner_id="someone-else")


memory.MemoryStore.get = get
"""


@pytest.mark.parametrize("through", ["run", "cli"])
def test_a_failure_through_run_or_the_cli_shows_pytests_diff_without_rewrite_warnings(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    through: str,
) -> None:
    # This process has imported the suite and hypothesis already, as a program calling run() has.
    pytester.makepyfile(break_memory_store=BREAK_MEMORY_STORE)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    arguments = ["-q", "-p", "break_memory_store", "-k", "test_s1_get_returns_the_stored_owner"]
    if through == "run":
        exit_code = chronica_conformance.run(["memory://"], arguments)
    else:
        exit_code = cli.main(["conformance", "memory://", *arguments])
    output = capfd.readouterr()
    assert exit_code == pytest.ExitCode.TESTS_FAILED
    assert "E       AssertionError: assert 'someone-else' == 'ardian-" in output.out
    assert "E         + someone-else" in output.out
    assert "2 failed, " in output.out
    assert "PytestAssertRewriteWarning" not in output.out + output.err


def test_the_cli_with_a_url_no_backend_handles_exits_5_naming_the_installed_schemes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["conformance", "bogus://somewhere"]) == 5
    error = capsys.readouterr().err
    assert error.startswith("chronica: UnknownBackend: no installed backend handles bogus://")
    assert "memory" in error


def test_the_cli_without_the_suite_says_how_to_install_it_from_a_clone(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "plugin_commands", dict)  # no distribution provides a command
    assert cli.main(["conformance", "memory://"]) == 5
    clone = Path(__file__).resolve().parents[2]
    assert capsys.readouterr().err == (
        f"chronica conformance: chronica-conformance is not installed: pip install {clone}/conformance\n"
    )
