"""The ``chronica`` command, run as a subprocess the way a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHRONICA = str(Path(sys.executable).with_name("chronica"))


def chronica(
    *arguments: str, store: str | None = "memory://", stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "CHRONICA_STORE"}
    command = [CHRONICA, *arguments] + (["--store", store] if store else [])
    return subprocess.run(command, input=stdin, capture_output=True, text=True, env=environment, timeout=120)


def test_a_password_in_the_store_url_is_never_printed() -> None:
    result = chronica("demo", store="memory://ardian:s3cret@localhost")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        "Chronica demo on memory://ardian:***@localhost: owner 'ardian', chronicum 'dinner-friday'"
    )
    assert "s3cret" not in result.stdout + result.stderr


def test_demo_tells_the_dinner_story() -> None:
    result = chronica("demo")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("The booking agent's context window (the last 3 messages, oldest first):")
    window = [line.split(None, 4) for line in lines[start + 1 : start + 4]]
    assert [(row[1], row[2], row[3]) for row in window] == [
        ("message", "agent", "search"),
        ("message", "human", "ardian"),
        ("message", "agent", "concierge"),
    ]
    assert window[0][4] == "Rumah Teduh and Kayu Manis both have a quiet table for four at 7pm."
    assert window[2][4] == "Book Rumah Teduh for four at 7pm on Friday under Ardian."
    assert lines[start + 4] == ""
    assert "Owner 'rafa' asks for 'dinner-friday': refused, ChronicumNotFound" in result.stdout
    first = next(line for line in lines if line.startswith("The booking agent's reply")).split()[-1]
    retry = next(line for line in lines if line.startswith("Retried with reworded content")).split()[-1]
    assert len(first) == 32 and first == retry
    assert "The chronicum holds 8 acta." in lines


def test_record_then_read_a_window_as_json_in_one_process_store() -> None:
    # Each CLI process has its own memory store; within one, `record` prints the id it stored.
    result = chronica(
        "record",
        "c",
        "--owner",
        "ardian",
        "--kind",
        "thought",
        "--actor-kind",
        "agent",
        "--actor",
        "concierge",
        "--json",
        stdin="line one\nline two",
    )
    assert result.returncode == 0, result.stderr
    stored = json.loads(result.stdout)
    assert stored["content"] == "line one\nline two"
    assert stored["kind"] == "thought" and stored["actor_kind"] == "agent"
    assert stored["at"].endswith("+00:00")


def test_acta_of_a_missing_chronicum_is_not_found_with_exit_3() -> None:
    result = chronica(
        "acta", "dinner-friday", "--owner", "rafa", "--last", "3", "--kinds", "message", "--json"
    )
    assert result.returncode == 3
    assert result.stdout == ""
    assert result.stderr.strip() == "chronica: ChronicumNotFound: chronicum 'dinner-friday' not found"


def test_show_of_a_missing_chronicum_is_not_found() -> None:
    result = chronica("show", "nothing", "--owner", "ardian")
    assert result.returncode == 3


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        (["--kind", "shout", "--actor-kind", "human", "--actor", "ardian", "--content", "hi"], "kind"),
        (
            ["--kind", "message", "--actor-kind", "robot", "--actor", "ardian", "--content", "hi"],
            "actor_kind",
        ),
        (["--kind", "message", "--actor-kind", "human", "--actor", "", "--content", "hi"], "actor"),
        (["--kind", "message", "--actor-kind", "human", "--actor", "ardian", "--content", ""], "content"),
        (
            [
                "--kind",
                "message",
                "--actor-kind",
                "human",
                "--actor",
                "ardian",
                "--content",
                "x",
                "--key",
                "",
            ],
            "idempotency_key",
        ),
    ],
)
def test_invalid_actum_exits_4_naming_the_field(arguments: list[str], field: str) -> None:
    result = chronica("record", "c", "--owner", "ardian", *arguments)
    assert result.returncode == 4
    assert result.stderr.startswith(f"chronica: InvalidActum: invalid actum: {field}: ")


def test_empty_owner_exits_4() -> None:
    result = chronica("acta", "c", "--owner", "")
    assert result.returncode == 4
    assert "EmptyOwnerID" in result.stderr


def test_bad_kinds_filter_exits_4_naming_the_option() -> None:
    result = chronica("acta", "c", "--owner", "ardian", "--kinds", "message,shout")
    assert result.returncode == 4
    assert "actum_kinds" in result.stderr


def test_unknown_scheme_exits_5_with_a_suggestion() -> None:
    result = chronica("acta", "c", "--owner", "ardian", store="memroy://")
    assert result.returncode == 5
    assert "UnknownBackend" in result.stderr and "did you mean memory://?" in result.stderr


def test_store_comes_from_the_environment_when_not_given() -> None:
    environment = dict(os.environ, CHRONICA_STORE="memroy://")
    result = subprocess.run(
        [CHRONICA, "show", "c", "--owner", "ardian"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )
    assert result.returncode == 5
    assert "memroy://" in result.stderr


def test_backends_lists_installed_and_broken_plugins() -> None:
    result = chronica("backends", store=None)
    assert result.returncode == 0
    rows = {
        line.split()[0]: line.split()
        for line in result.stdout.splitlines()[1:]
        if not line.startswith("BROKEN")
    }
    assert rows["memory"][1:4] == ["memory://", "yes", "yes"]
    assert rows["notebook"][1:4] == ["notebook://", "yes", "no"]
    assert "BROKEN plugin 'broken-example'" in result.stdout
    assert "chronica_frobnicator_driver" in result.stdout


def test_migrate_on_a_store_without_schema_says_so() -> None:
    result = chronica("migrate")
    assert result.returncode == 0
    assert result.stdout.strip() == "MemoryStore keeps no schema; nothing to migrate"


def test_conformance_passes_on_memory_and_prints_pytests_summary() -> None:
    # without the "not test_e1_" selection, the driver-failure group is skipped (memory has no driver)
    result = chronica(
        "conformance", "memory://", "-q", "-p", "no:cacheprovider", "-k", "not test_e1_", store=None
    )
    assert result.returncode == 0, result.stdout[-3000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "skipped" not in summary


def test_conformance_fails_for_an_unknown_store() -> None:
    result = chronica("conformance", "memroy://", "-q", "-p", "no:cacheprovider", store=None)
    assert result.returncode == 5
    assert "did you mean memory://?" in result.stderr


def test_store_options_reach_the_store_and_a_malformed_one_is_a_usage_error() -> None:
    refused = chronica("acta", "x", "--owner", "ardian", "--option", "colour=blue")
    assert refused.returncode == 4
    assert refused.stderr == (
        "chronica: InvalidOption: memory: option colour: "
        "unknown option (the memory store takes only max_content_bytes)\n"
    )
    malformed = chronica("acta", "x", "--owner", "ardian", "--option", "colour")
    assert malformed.returncode == 2
    assert "argument --option: expected KEY=VALUE, got 'colour'" in malformed.stderr
