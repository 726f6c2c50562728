"""The ``chronica`` command, run as a subprocess the way a user runs it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Backend,
    ChronicaPage,
    Chronicarius,
    Chronicum,
    ChronicumNotFound,
    MemoryStore,
    Span,
    UnknownBackend,
    hookimpl,
)
from chronica_core.cli import _parser, main, missing_database_file, plugin_commands
from chronica_core.registry import registry

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


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["--store", "memory://ardian:s3cret@localhost", "list", "--owner", "ardian"], "--store"),
        (["--store=memory://ardian:s3cret@localhost", "list", "--owner", "ardian"], "--store"),
        (["--owner", "ardian", "list"], "--owner"),
    ],
)
def test_a_command_option_before_the_command_names_where_it_goes(words: list[str], message: str) -> None:
    """``chronica --store URL list`` is refused, saying where the option goes, without the URL.

    argparse took the URL for the command's name and printed it, password and all."""
    result = chronica(*words, store=None)
    assert result.returncode == 2
    assert result.stderr == (
        f"chronica: {message} goes after the command: chronica list {message} ... "
        "(see chronica list --help)\n"
    )
    assert result.stdout == ""
    assert "s3cret" not in result.stderr


def test_demo_tells_the_dinner_story() -> None:
    result = chronica("demo")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = "   #  kind          actor kind actor      content"
    listing = lines.index(header)  # the story as stored: numbered 1 to 7 under a header row
    assert [line.split(None, 1)[0] for line in lines[listing + 1 : listing + 8]] == list("1234567")
    start = lines.index("The booking agent's context window (the last 3 messages, oldest first; # as above):")
    assert lines[start + 1] == header
    window = [line.split(None, 4) for line in lines[start + 2 : start + 5]]
    # each keeps its number in the whole chronicum: the 5th, 6th and 7th actum, not 1, 2, 3
    assert [(row[0], row[1], row[2], row[3]) for row in window] == [
        ("5", "message", "agent", "search"),
        ("6", "message", "human", "ardian"),
        ("7", "message", "agent", "concierge"),
    ]
    assert window[0][4] == "Rumah Teduh and Kayu Manis both have a quiet table for four at 7pm."
    assert window[2][4] == "Book Rumah Teduh for four at 7pm on Friday under Ardian."
    assert lines[start + 5] == ""
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
    assert stored["at"].endswith("Z")  # the public JSON form: Actum.to_dict()
    assert Actum.from_dict(stored).to_dict() == stored


def test_acta_of_a_missing_chronicum_is_not_found_with_exit_3() -> None:
    result = chronica(
        "acta", "dinner-friday", "--owner", "rafa", "--last", "3", "--kinds", "message", "--json"
    )
    assert result.returncode == 3
    assert result.stdout == ""
    # with --json the error is JSON too, on standard error, naming the store it looked in
    assert json.loads(result.stderr) == {
        "error": "ChronicumNotFound",
        "message": "chronicum 'dinner-friday' not found in memory://",
        "exit_code": 3,
        "store": "memory://",
    }


def test_not_found_names_the_store_without_its_password() -> None:
    result = chronica("show", "lunch", "--owner", "ardian", store="memory://ardian:s3cret@localhost")
    assert result.returncode == 3
    assert result.stderr == (
        "chronica: ChronicumNotFound: chronicum 'lunch' not found in memory://ardian:***@localhost\n"
    )


@pytest.mark.parametrize(
    ("arguments", "code", "error", "message"),
    [
        (["acta", "c", "--owner", "ardian", "--last", "-3"], 2, "UsageError", "argument --last: must be 0"),
        (["acta", "c", "--owner", "ardian", "--last", "three"], 2, "UsageError", "argument --last: expected"),
        (["acta", "c", "--owner", "", "--kinds", "message"], 4, "EmptyOwnerID", "invalid --owner: must be"),
        (
            ["acta", "c", "--owner", "ardian", "--kinds", "shout"],
            4,
            "InvalidQuery",
            "invalid query: --kinds:",
        ),
        (["list", "--owner", "ardian", "--limit", "0"], 4, "InvalidQuery", "invalid query: --limit:"),
        (["erase", "--owner", "ardian"], 2, "UsageError", "chronica erase: name the chronicum"),
        (
            ["list", "--owner", "ardian", "--option", "colour=red"],
            4,
            "InvalidOption",
            "memory: --option colour:",
        ),
    ],
)
def test_with_json_every_error_is_one_json_object_on_standard_error(
    arguments: list[str], code: int, error: str, message: str
) -> None:
    result = chronica(*arguments, "--json")
    assert result.returncode == code, result.stderr
    assert result.stdout == ""
    printed = json.loads(result.stderr)
    assert printed["error"] == error and printed["exit_code"] == code
    assert message in printed["message"], printed


def test_a_negative_last_is_a_usage_error_at_the_command_line() -> None:
    result = chronica("acta", "c", "--owner", "ardian", "--last", "-3")
    assert result.returncode == 2
    assert "argument --last: must be 0 or more (0 keeps every actum), got -3" in result.stderr
    assert "Traceback" not in result.stderr


def test_every_command_and_every_flag_has_a_description() -> None:
    parser = _parser()
    commands = next(action for action in parser._actions if action.dest == "command")
    assert isinstance(commands.choices, dict)
    assert set(commands.choices) >= {"demo", "backends", "migrate", "record", "acta", "show", "list", "erase"}
    for name, command in commands.choices.items():
        assert command.description, f"chronica {name} --help describes no command"
        for action in command._actions:
            assert action.help, f"chronica {name}: {action.option_strings or action.dest} has no help"
    record_help = commands.choices["record"].format_help()
    assert "byte for byte" in record_help and "--owner OWNER" in record_help


def test_record_on_a_terminal_says_it_reads_standard_input(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = run(
        capsys,
        monkeypatch,
        "record",
        "lunch",
        "--owner",
        "ardian",
        "--kind",
        "message",
        "--actor-kind",
        "human",
        "--actor",
        "ardian",
        typed="A table for two.\n",
    )
    assert recorded.code == 0, recorded.stderr
    assert recorded.stderr.startswith("chronica record: reading the content from standard input; end it")
    assert "--content" in recorded.stderr
    assert [actum.content for actum in kept.acta("lunch", ActaQuery())] == ["A table for two.\n"]


def test_piped_content_is_recorded_byte_for_byte_without_a_prompt() -> None:
    content = "line one\r\nline two\n\n"
    command = [CHRONICA, "record", "c", "--owner", "ardian", "--kind", "message", "--actor-kind", "human"]
    command += ["--actor", "ardian", "--json", "--store", "memory://"]
    result = subprocess.run(command, input=content.encode(), capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["content"] == content
    assert b"standard input" not in result.stderr  # only memory://'s note that it keeps nothing
    invalid = subprocess.run(command, input=b"caf\xe9\n", capture_output=True, timeout=120)
    assert invalid.returncode == 4
    assert invalid.stdout == b""
    assert json.loads(invalid.stderr)["message"].startswith(
        "invalid actum: --content: standard input is not valid UTF-8"
    )


@pytest.mark.parametrize(
    ("url", "missing"),
    [
        ("sqlite:///no-such.db", "no-such.db"),
        ("sqlite+aiosqlite:///no-such.db?timeout=5", "no-such.db"),
        ("SQLite:///sub%20dir/no-such.db", "sub dir/no-such.db"),
        ("sqlite:///:memory:", None),
        ("sqlite://", None),
        ("sqlite:///file:no-such.db?mode=ro&uri=true", None),
        ("postgresql://h/db", None),
    ],
)
def test_missing_database_file_finds_a_sqlite_file_that_is_not_there(
    url: str, missing: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert missing_database_file(url) == (None if missing is None else tmp_path / missing)
    if missing is not None:
        (tmp_path / missing).parent.mkdir(exist_ok=True)
        (tmp_path / missing).write_bytes(b"")
        assert missing_database_file(url) is None


class FileMakingPlugin:
    """A ``sqlite`` backend that, like SQLite, creates the file it is opened on (a memory store in it)."""

    @staticmethod
    def open(url: str, **options: object) -> MemoryStore:
        Path(url.removeprefix("sqlite:///")).touch()
        return MemoryStore()

    @hookimpl
    def chronica_backends(self) -> list[Backend]:
        return [
            Backend(
                name="file-making", schemes=("sqlite",), idempotent=True, open=self.open, needs_server=False
            )
        ]


@pytest.fixture
def sqlite_backend() -> Iterator[None]:
    """chronica-sqlalchemy when it is installed, else a stand-in that creates the file it opens."""
    try:
        registry().backend_for("sqlite://")
    except UnknownBackend:
        registry().register(FileMakingPlugin(), "file-making-for-a-test")
        try:
            yield
        finally:
            registry().plugin_manager.unregister(name="file-making-for-a-test")
    else:
        yield


@pytest.mark.parametrize(
    "command",
    [
        ["acta", "dinner-friday", "--owner", "ardian"],
        ["follow", "dinner-friday", "--owner", "ardian"],
        ["follow", "dinner-friday", "--owner", "ardian", "--after", "0" * 32],
    ],
)
@pytest.mark.usefixtures("sqlite_backend")
def test_a_read_of_a_sqlite_file_that_is_not_there_creates_none(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "chronica.db"
    url = f"sqlite:///{missing}"
    assert main([*command, "--store", url]) == 3
    assert capsys.readouterr().err == (
        f"chronica: ChronicumNotFound: chronicum 'dinner-friday' not found in {url} "
        f"(there is no file {missing}; nothing was created)\n"
    )
    assert sorted(tmp_path.iterdir()) == []


def test_show_of_a_missing_chronicum_is_not_found() -> None:
    result = chronica("show", "nothing", "--owner", "ardian")
    assert result.returncode == 3


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        (["--kind", "shout", "--actor-kind", "human", "--actor", "ardian", "--content", "hi"], "--kind"),
        (
            ["--kind", "message", "--actor-kind", "robot", "--actor", "ardian", "--content", "hi"],
            "--actor-kind",
        ),
        (["--kind", "message", "--actor-kind", "human", "--actor", "", "--content", "hi"], "--actor"),
        (["--kind", "message", "--actor-kind", "human", "--actor", "ardian", "--content", ""], "--content"),
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
            "--key",
        ),
    ],
)
def test_invalid_actum_exits_4_naming_the_field(arguments: list[str], field: str) -> None:
    result = chronica("record", "c", "--owner", "ardian", *arguments)
    assert result.returncode == 4
    assert result.stderr.startswith(f"chronica: InvalidActum: invalid actum: {field}: "), result.stderr


def test_empty_owner_exits_4() -> None:
    result = chronica("acta", "c", "--owner", "")
    assert result.returncode == 4
    assert "EmptyOwnerID" in result.stderr


def test_bad_kinds_filter_exits_4_naming_the_option() -> None:
    result = chronica("acta", "c", "--owner", "ardian", "--kinds", "message,shout")
    assert result.returncode == 4
    assert result.stderr.startswith("chronica: InvalidQuery: invalid query: --kinds: "), result.stderr
    assert "actum_kinds" not in result.stderr


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
    lines = result.stdout.splitlines()
    header = lines[0]
    names = ("backend", "schemes", "async", "capabilities", "plugin", "follows")
    assert header.split() == list(names)
    columns = [header.index(name) for name in names]
    rows = {
        cells[0]: cells
        for line in lines[1:]
        if not line.startswith("BROKEN")
        for cells in [
            [line[start:end].strip() for start, end in zip(columns, [*columns[1:], None], strict=True)]
        ]
    }
    assert rows["memory"] == [
        "memory",
        "memory://",
        "yes",
        "idempotency, batch, listing, erasure, follow, native, history, retention",
        "memory",
        "in-process wake-ups",
    ]
    assert rows["notebook"] == [
        "notebook",
        "notebook://",
        "no",
        "idempotency",
        "notebook",
        "polling through acta",
    ]
    assert "BROKEN plugin 'broken-example'" in result.stdout
    assert "chronica_frobnicator_driver" in result.stdout


class FollowingPlugin:
    """Third-party backends: two with the follow capability (one says how it follows), one without."""

    @hookimpl
    def chronica_backends(self) -> list[Backend]:
        return [
            Backend(
                name="triggered",
                schemes=("triggered",),
                idempotent=False,
                open=lambda url, **options: MemoryStore(),
                capabilities=("follow",),
                follows="a trigger's wake-ups",
            ),
            Backend(
                name="quiet",
                schemes=("quiet",),
                idempotent=False,
                open=lambda url, **options: MemoryStore(),
                capabilities=("follow",),
            ),
            Backend(
                name="plain", schemes=("plain",), idempotent=False, open=lambda url, **options: MemoryStore()
            ),
        ]


def test_backends_shows_how_a_third_party_backend_follows(capsys: pytest.CaptureFixture[str]) -> None:
    registry().register(FollowingPlugin(), "following-for-a-test")
    try:
        assert main(["backends"]) == 0
    finally:
        registry().plugin_manager.unregister(name="following-for-a-test")
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert lines["triggered"].endswith("  a trigger's wake-ups")
    assert lines["quiet"].endswith("  the store's own wake-ups (follow capability)")
    assert lines["plain"].endswith("  polling through acta")


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
        "chronica: InvalidOption: memory: --option colour: "
        "unknown option (the memory store takes only max_content_bytes)\n"
    )
    malformed = chronica("acta", "x", "--owner", "ardian", "--option", "colour")
    assert malformed.returncode == 2
    assert "argument --option: expected KEY=VALUE, got 'colour'" in malformed.stderr


# --- listing and erasure --------------------------------------------------------------------------
# Each CLI process opens its own memory store, so runs that must share data call `main` in this
# process on a `kept://` store: a memory store registered as a backend that outlives each run.


class KeptMemoryStore(MemoryStore):
    """A memory store that stays open when a CLI run closes it, so one test's runs share it."""

    def close(self) -> None:
        """Keep everything: the test reads it afterwards."""


class KeptPlugin:
    def __init__(self, store: KeptMemoryStore) -> None:
        self.store = store

    @hookimpl
    def chronica_backends(self) -> list[Backend]:
        return [
            Backend(
                name="kept",
                schemes=("kept",),
                idempotent=True,
                open=lambda url, **options: self.store,
                needs_server=False,
                capabilities=("batch", "listing", "erasure"),
            )
        ]


@pytest.fixture
def kept() -> Iterator[KeptMemoryStore]:
    store = KeptMemoryStore()
    registry().register(KeptPlugin(store), "kept-for-a-test")
    try:
        yield store
    finally:
        registry().plugin_manager.unregister(name="kept-for-a-test")


class Terminal(io.StringIO):
    """Standard input that says it is a terminal, holding what the person types."""

    def isatty(self) -> bool:
        return True


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


def run(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *arguments: str,
    typed: str | None = None,
) -> Run:
    """Run `chronica ARGUMENTS --store kept://` in this process; `typed` is a terminal's input."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("") if typed is None else Terminal(typed))
    capsys.readouterr()
    code = main([*arguments, "--store", "kept://"])
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def started(store: MemoryStore, owner: str, chronicum_id: str, minutes: int) -> Chronicum:
    chronicum = Chronicum(chronicum_id, owner, START + timedelta(minutes=minutes))
    store.create(chronicum)
    return chronicum


def said(owner: str, chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, owner, content)


def test_list_prints_a_page_newest_first_and_the_cursor_walks_the_rest(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    started(kept, "ardian", "lunch", 0)
    started(kept, "ardian", "dinner-friday", 30)
    started(kept, "ardian", "breakfast", 10)
    started(kept, "rafa", "rafa-only", 20)
    Chronicarius(kept).record_actum("ardian", said("ardian", "lunch", "A quiet table?"))
    last = kept.get("lunch").last_actum_at
    assert last is not None

    first = run(capsys, monkeypatch, "list", "--owner", "ardian", "--limit", "2")
    assert first.code == 0, first.stderr
    lines = first.stdout.splitlines()
    assert [line.split() for line in lines[:3]] == [
        ["id", "started_at", "last_actum_at"],
        ["dinner-friday", "2026-11-30T09:30:00Z", "-"],
        ["breakfast", "2026-11-30T09:10:00Z", "-"],
    ]
    assert lines[3].startswith("next cursor: ") and len(lines) == 4
    cursor = lines[3].removeprefix("next cursor: ")

    rest = run(capsys, monkeypatch, "list", "--owner", "ardian", "--limit", "2", "--cursor", cursor)
    assert rest.code == 0, rest.stderr
    assert [line.split() for line in rest.stdout.splitlines()] == [
        ["id", "started_at", "last_actum_at"],
        ["lunch", "2026-11-30T09:00:00Z", last.isoformat().replace("+00:00", "Z")],
        ["next", "cursor:", "none", "(this", "is", "the", "last", "page)"],
    ]

    as_json = run(capsys, monkeypatch, "list", "--owner", "ardian", "--json")
    assert as_json.code == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {
        "chronica": [kept.get(name).to_dict() for name in ("dinner-friday", "breakfast", "lunch")],
        "next_cursor": None,
    }
    assert ChronicaPage(
        [Chronicum.from_dict(form) for form in json.loads(as_json.stdout)["chronica"]], None
    ) == ChronicaPage([kept.get(name) for name in ("dinner-friday", "breakfast", "lunch")], None)

    nobody = run(capsys, monkeypatch, "list", "--owner", "nobody")
    assert nobody.stdout.splitlines() == [
        "owner 'nobody' has no chronica",
        "next cursor: none (this is the last page)",
    ]
    stolen = run(capsys, monkeypatch, "list", "--owner", "rafa", "--cursor", cursor)
    assert stolen.code == 4
    assert stolen.stderr == (
        "chronica: InvalidQuery: invalid query: --cursor: was made for another owner's listing\n"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--limit", "0"], "chronica: InvalidQuery: invalid query: --limit: must be from 1 to 1000, not 0\n"),
        (
            ["--limit", "1001"],
            "chronica: InvalidQuery: invalid query: --limit: must be from 1 to 1000, not 1001\n",
        ),
        (
            ["--cursor", "not-a-cursor"],
            "chronica: InvalidQuery: invalid query: --cursor: "
            "is not a cursor from a previous page's next_cursor\n",
        ),
    ],
)
def test_a_bad_limit_or_cursor_exits_4(arguments: list[str], message: str) -> None:
    result = chronica("list", "--owner", "ardian", *arguments)
    assert result.returncode == 4
    assert result.stdout == ""
    assert result.stderr == message


def test_list_on_memory_in_a_new_process_is_an_empty_last_page() -> None:
    result = chronica("list", "--owner", "ardian", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"chronica": [], "next_cursor": None}


def test_erase_with_yes_erases_the_acta_and_the_same_owner_starts_afresh(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for content in ("one", "two", "three"):
        recorded = run(
            capsys, monkeypatch, "record", "lunch", "--owner", "ardian", "--kind", "message",
            "--actor-kind", "human", "--actor", "ardian", "--content", content,
        )  # fmt: skip
        assert recorded.code == 0, recorded.stderr
    started(kept, "ardian", "dinner-friday", 0)

    refused = run(capsys, monkeypatch, "erase", "lunch", "--owner", "rafa", "--yes")
    assert refused.code == 3
    assert refused.stderr == "chronica: ChronicumNotFound: chronicum 'lunch' not found in kept://\n"
    assert len(kept.acta("lunch", ActaQuery())) == 3

    erased = run(capsys, monkeypatch, "erase", "lunch", "--owner", "ardian", "--yes")
    assert erased.code == 0, erased.stderr
    assert erased.stdout == "erased chronicum 'lunch' of owner 'ardian': 3 acta\n"
    with pytest.raises(ChronicumNotFound):
        kept.get("lunch")
    assert [chronicum.id for chronicum in kept.list_chronica("ardian", 10, None)] == ["dinner-friday"]
    assert run(capsys, monkeypatch, "show", "lunch", "--owner", "ardian").code == 3
    again = run(capsys, monkeypatch, "erase", "lunch", "--owner", "ardian", "--yes", "--json")
    assert again.code == 3

    taken = run(
        capsys, monkeypatch, "record", "lunch", "--owner", "rafa", "--kind", "message",
        "--actor-kind", "human", "--actor", "rafa", "--content", "mine now?",
    )  # fmt: skip
    assert taken.code == 3  # the id never passes to another owner
    fresh = run(
        capsys, monkeypatch, "record", "lunch", "--owner", "ardian", "--kind", "message",
        "--actor-kind", "human", "--actor", "ardian", "--content", "four",
    )  # fmt: skip
    assert fresh.code == 0, fresh.stderr
    window = run(capsys, monkeypatch, "acta", "lunch", "--owner", "ardian", "--json")
    assert [actum["content"] for actum in json.loads(window.stdout)] == ["four"]

    as_json = run(capsys, monkeypatch, "erase", "lunch", "--owner", "ardian", "--yes", "--json")
    assert as_json.code == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {"chronicum_id": "lunch", "owner_id": "ardian", "acta_erased": 1}


def test_erase_all_erases_every_chronicum_of_the_owner_only(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    chronicarius = Chronicarius(kept)
    for chronicum_id in ("lunch", "dinner-friday"):
        chronicarius.record_acta(
            "ardian", [said("ardian", chronicum_id, "hi"), said("ardian", chronicum_id, "?")]
        )
    chronicarius.record_actum("rafa", said("rafa", "rafa-only", "mine"))

    erased = run(capsys, monkeypatch, "erase", "--owner", "ardian", "--all", "--yes")
    assert erased.code == 0, erased.stderr
    assert erased.stdout == "erased 2 chronica of owner 'ardian'\n"
    assert kept.list_chronica("ardian", 10, None) == []
    assert [actum.content for actum in kept.acta("rafa-only", ActaQuery())] == ["mine"]

    nothing = run(capsys, monkeypatch, "erase", "--owner", "ardian", "--all", "--yes", "--json")
    assert nothing.code == 0, nothing.stderr
    assert json.loads(nothing.stdout) == {"owner_id": "ardian", "chronica_erased": 0}
    one = run(capsys, monkeypatch, "erase", "--owner", "rafa", "--all", "--yes")
    assert one.stdout == "erased 1 chronicum of owner 'rafa'\n"


def test_erase_on_a_terminal_asks_for_the_chronicum_id(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    Chronicarius(kept).record_actum("ardian", said("ardian", "lunch", "A quiet table?"))
    form = kept.get("lunch").to_dict()
    for answer in ("y\n", "yes\n", "lunch \n", "LUNCH\n", "\n", ""):  # "" is end of input
        declined = run(capsys, monkeypatch, "erase", "lunch", "--owner", "ardian", typed=answer)
        assert declined.code == 1, answer
        assert declined.stdout == ""
        assert declined.stderr == (
            f"Erase chronicum 'lunch' of owner 'ardian' (started {form['started_at']}, last actum "
            f"{form['last_actum_at']}) with all its acta and every fork of it (forks share its "
            "acta)? This cannot be undone.\n"
            "Type the chronicum id to confirm: chronica: not confirmed; nothing was erased\n"
        )
        assert len(kept.acta("lunch", ActaQuery())) == 1

    missing = run(capsys, monkeypatch, "erase", "dinner", "--owner", "ardian", typed="dinner\n")
    assert missing.code == 3  # told before being asked
    assert missing.stderr == "chronica: ChronicumNotFound: chronicum 'dinner' not found in kept://\n"

    confirmed = run(capsys, monkeypatch, "erase", "lunch", "--owner", "ardian", typed="lunch\n")
    assert confirmed.code == 0, confirmed.stderr
    assert confirmed.stdout == "erased chronicum 'lunch' of owner 'ardian': 1 actum\n"
    with pytest.raises(ChronicumNotFound):
        kept.get("lunch")


def test_erase_on_a_terminal_says_the_forks_go_too(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    chronicarius = Chronicarius(kept)
    chronicarius.record_actum("ardian", said("ardian", "lunch", "A quiet table?"))
    chronicarius.fork_chronicum("ardian", "lunch", fork_id="lunch-2")
    confirmed = run(capsys, monkeypatch, "erase", "lunch", "--owner", "ardian", typed="lunch\n")
    assert confirmed.code == 0, confirmed.stderr
    assert "with all its acta and every fork of it (forks share its acta)?" in confirmed.stderr
    with pytest.raises(ChronicumNotFound):
        chronicarius.get_chronicum("ardian", "lunch-2")


def test_erase_all_on_a_terminal_asks_for_erase_all(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    started(kept, "ardian", "lunch", 0)
    started(kept, "ardian", "dinner-friday", 1)
    for answer in ("y\n", "yes\n", "ardian\n", "erase\n", "ERASE ALL\n", ""):
        declined = run(capsys, monkeypatch, "erase", "--owner", "ardian", "--all", typed=answer)
        assert declined.code == 1, answer
        assert declined.stderr == (
            "Erase EVERY chronicum of owner 'ardian', with all their acta? This cannot be undone.\n"
            "Type 'erase all' to confirm: chronica: not confirmed; nothing was erased\n"
        )
        assert len(kept.list_chronica("ardian", 10, None)) == 2

    confirmed = run(capsys, monkeypatch, "erase", "--owner", "ardian", "--all", typed="erase all\n")
    assert confirmed.code == 0, confirmed.stderr
    assert confirmed.stdout == "erased 2 chronica of owner 'ardian'\n"
    assert kept.list_chronica("ardian", 10, None) == []


def test_erase_without_a_terminal_or_yes_refuses_with_exit_2_and_erases_nothing(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    Chronicarius(kept).record_actum("ardian", said("ardian", "lunch", "A quiet table?"))
    refusal = (
        "chronica erase: refusing to erase without confirmation: standard input is not a terminal, "
        "so nothing can be confirmed; pass --yes to erase without asking (nothing was erased)\n"
    )
    for arguments in (["lunch"], ["--all"]):
        piped = run(capsys, monkeypatch, "erase", *arguments, "--owner", "ardian", typed=None)
        assert (piped.code, piped.stdout, piped.stderr) == (2, "", refusal)
    assert [actum.content for actum in kept.acta("lunch", ActaQuery())] == ["A quiet table?"]

    # A real process whose standard input is a pipe, even one that says "lunch":
    result = chronica("erase", "lunch", "--owner", "ardian", stdin="lunch\n")
    assert (result.returncode, result.stdout, result.stderr) == (2, "", refusal)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["lunch", "--all"], "chronica erase: give a chronicum id or --all, not both\n"),
        (
            [],
            "chronica erase: name the chronicum to erase, or give --all to erase every chronicum "
            "of the owner, or --idle-for to erase the idle ones\n",
        ),
    ],
)
def test_erase_needs_exactly_one_of_a_chronicum_and_all(arguments: list[str], message: str) -> None:
    result = chronica("erase", *arguments, "--owner", "ardian", "--yes")
    assert (result.returncode, result.stdout, result.stderr) == (2, "", message)


@pytest.mark.parametrize(
    ("arguments", "capability"),
    [
        (["list", "--owner", "ardian"], "listing"),
        (["erase", "lunch", "--owner", "ardian", "--yes"], "erasure"),
        (["erase", "--owner", "ardian", "--all", "--yes"], "erasure"),
        (["erase", "--idle-for", "90d", "--yes"], "retention"),
        (["erase", "--idle-for", "90d", "--owner", "ardian", "--dry-run"], "retention"),
        (["fork", "lunch", "--owner", "ardian"], "history"),
        (["acta", "lunch", "--owner", "ardian", "--before", "0" * 32], "history"),
    ],
)
def test_a_store_without_the_capability_exits_7_and_says_so(arguments: list[str], capability: str) -> None:
    result = chronica(*arguments, store="notebook://")
    assert result.returncode == 7
    assert result.stdout == ""
    assert result.stderr == (
        f"chronica: CapabilityUnsupported: NotebookStore does not offer the {capability} capability; "
        "use a store that does (`chronica backends` lists each backend's capabilities)\n"
    )


def test_erase_on_a_terminal_says_a_missing_capability_before_asking(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", Terminal("lunch\n"))
    assert main(["erase", "lunch", "--owner", "ardian", "--store", "notebook://"]) == 7
    captured = capsys.readouterr()
    assert captured.err.startswith("chronica: CapabilityUnsupported: ")
    assert "Type" not in captured.err


def test_show_and_acta_print_the_public_json_form(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = Chronicarius(kept).record_acta(
        "ardian", [said("ardian", "lunch", "A quiet table?"), said("ardian", "lunch", "For four.")]
    )
    shown = run(capsys, monkeypatch, "show", "lunch", "--owner", "ardian", "--json")
    assert json.loads(shown.stdout) == kept.get("lunch").to_dict()
    assert Chronicum.from_dict(json.loads(shown.stdout)) == kept.get("lunch")
    acta = run(capsys, monkeypatch, "acta", "lunch", "--owner", "ardian", "--json")
    assert [Actum.from_dict(form) for form in json.loads(acta.stdout)] == stored
    text = run(capsys, monkeypatch, "show", "lunch", "--owner", "ardian")
    assert text.stdout.splitlines() == [
        f"{key}: {value}" for key, value in kept.get("lunch").to_dict().items()
    ]


def test_acta_shows_each_actums_id_for_follow_after(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = Chronicarius(kept).record_acta(
        "ardian", [said("ardian", "lunch", "A quiet table?"), said("ardian", "lunch", "For four.")]
    )
    acta = run(capsys, monkeypatch, "acta", "lunch", "--owner", "ardian")
    assert acta.stdout.splitlines() == [
        f"   1  {stored[0].id}  message       human      ardian     A quiet table?",
        f"   2  {stored[1].id}  message       human      ardian     For four.",
    ]


# --- history: forks, pages back, the record as written ----------------------------------------------


def test_fork_prints_the_forks_id_and_the_fork_shares_the_history_up_to_at(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    chronicarius = Chronicarius(kept)
    first, second = chronicarius.record_acta(
        "ardian", [said("ardian", "lunch", "A quiet table?"), said("ardian", "lunch", "For four.")]
    )
    forked = run(capsys, monkeypatch, "fork", "lunch", "--owner", "ardian", "--at", first.id)
    assert forked.code == 0, forked.stderr
    fork_id = forked.stdout.strip()
    assert fork_id != "lunch" and len(forked.stdout.splitlines()) == 1
    assert [actum.content for actum in chronicarius.get_acta("ardian", fork_id)] == ["A quiet table?"]
    whole = run(capsys, monkeypatch, "fork", "lunch", "--owner", "ardian", "--json")
    form = json.loads(whole.stdout)
    assert form["owner_id"] == "ardian"
    assert [actum.id for actum in chronicarius.get_acta("ardian", form["id"])] == [first.id, second.id]
    assert chronicarius.get_chronicum("ardian", form["id"]).forked_from is not None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["fork", "lunch", "--owner", "ardian", "--at", "0" * 32], "--at: actum '" + "0" * 32),
        (["acta", "lunch", "--owner", "ardian", "--before", "0" * 32], "--before: actum '" + "0" * 32),
    ],
)
def test_an_unknown_actum_id_exits_3_naming_the_flag(
    kept: KeptMemoryStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    arguments: list[str],
    message: str,
) -> None:
    Chronicarius(kept).record_actum("ardian", said("ardian", "lunch", "A quiet table?"))
    result = run(capsys, monkeypatch, *arguments)
    assert result.code == 3
    assert result.stderr == (f"chronica: ActumNotFound: {message}' not found in chronicum 'lunch'\n")


@pytest.mark.parametrize(
    ("arguments", "flag"),
    [
        (["fork", "lunch", "--owner", "ardian", "--at", ""], "--at"),
        (["acta", "lunch", "--owner", "ardian", "--before", ""], "--before"),
        (["follow", "lunch", "--owner", "ardian", "--after", ""], "--after"),
    ],
)
def test_an_empty_actum_id_exits_4_naming_the_flag(
    kept: KeptMemoryStore,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    arguments: list[str],
    flag: str,
) -> None:
    chronicarius = Chronicarius(kept)
    chronicarius.record_actum("ardian", said("ardian", "lunch", "A quiet table?"))
    result = run(capsys, monkeypatch, *arguments)
    assert result.code == 4
    reason = "an actum id or None, not an empty str"
    assert result.stderr == f"chronica: InvalidQuery: invalid query: {flag}: {reason}\n"
    assert [c.id for c in chronicarius.list_chronica("ardian").chronica] == ["lunch"]  # no fork made


def test_fork_of_another_owners_chronicum_is_not_found_and_creates_nothing(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    Chronicarius(kept).record_actum("ardian", said("ardian", "lunch", "A quiet table?"))
    result = run(capsys, monkeypatch, "fork", "lunch", "--owner", "rafa")
    assert result.code == 3
    assert result.stderr == "chronica: ChronicumNotFound: chronicum 'lunch' not found in kept://\n"
    assert Chronicarius(kept).list_chronica("rafa").chronica == []


def test_acta_before_pages_back_and_as_written_shows_what_a_summary_stands_for(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    chronicarius = Chronicarius(kept)
    one, two, three = chronicarius.record_acta(
        "ardian", [said("ardian", "lunch", text) for text in ("one", "two", "three")]
    )
    summary = Actum(
        "lunch",
        ActumKind.MESSAGE,
        ActorKind.AGENT,
        "summarizer",
        "one and two",
        summarizes=Span(one.id, two.id),
    )
    chronicarius.record_actum("ardian", summary)

    def contents(*arguments: str) -> list[str]:
        result = run(capsys, monkeypatch, "acta", "lunch", "--owner", "ardian", *arguments)
        assert result.code == 0, result.stderr
        return [line.split(None, 5)[5] for line in result.stdout.splitlines()]

    assert contents() == ["one and two", "three"]
    assert contents("--as-written") == ["one", "two", "three", "one and two"]
    assert contents("--as-written", "--before", three.id) == ["one", "two"]
    assert contents("--as-written", "--before", three.id, "--last", "1") == ["two"]


def test_record_answers_a_request_and_summarizes_a_range(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    chronicarius = Chronicarius(kept)
    one, two = chronicarius.record_acta("ardian", [said("ardian", "lunch", text) for text in ("one", "two")])

    def record(kind: str, content: str, *flags: str) -> Run:
        return run(
            capsys, monkeypatch, "record", "lunch", "--owner", "ardian", "--kind", kind,
            "--actor-kind", "agent", "--actor", "search", "--content", content, *flags,
        )  # fmt: skip

    request = record("tool_request", '{"area": "Kemang"}')
    assert request.code == 0, request.stderr
    response = record("tool_response", "Rumah Teduh: free at 7", "--answers", request.stdout.strip())
    assert response.code == 0, response.stderr
    summary = record("message", "one and two", "--summarizes", one.id, two.id, "--json")
    assert summary.code == 0, summary.stderr
    assert json.loads(summary.stdout)["summarizes"] == {"first": one.id, "last": two.id}
    window = chronicarius.get_acta("ardian", "lunch")
    assert [(actum.content, actum.answers) for actum in window] == [
        ("one and two", ""),
        ('{"area": "Kemang"}', ""),
        ("Rumah Teduh: free at 7", request.stdout.strip()),
    ]
    wrong = record("message", "not a response", "--answers", request.stdout.strip())
    assert (wrong.code, wrong.stderr) == (
        4,
        "chronica: InvalidActum: invalid actum: --answers: only a tool_response answers a request, "
        "not a message\n",
    )
    unknown = record("message", "three", "--summarizes", "0" * 32, two.id)
    assert unknown.code == 4 and unknown.stderr.startswith(
        "chronica: InvalidActum: invalid actum: --summarizes: "
    )
    assert len(chronicarius.get_acta("ardian", "lunch", view="as_written")) == 5


def test_show_prints_where_a_fork_came_from(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    chronicarius = Chronicarius(kept)
    first = chronicarius.record_actum("ardian", said("ardian", "lunch", "A quiet table?"))
    chronicarius.fork_chronicum("ardian", "lunch", at=first.id, fork_id="lunch-2")
    shown = run(capsys, monkeypatch, "show", "lunch-2", "--owner", "ardian")
    assert shown.code == 0, shown.stderr
    assert f"forked_from: lunch at {first.id}" in shown.stdout.splitlines()


# --- retention: erase --idle-for ------------------------------------------------------------------


def idle_and_busy(store: KeptMemoryStore) -> None:
    """ardian's 'old' and rafa's 'rafa-old' started a week ago and have no acta; ardian's 'lunch' is busy."""
    for owner, chronicum_id in (("ardian", "old"), ("rafa", "rafa-old")):
        store.create(Chronicum(chronicum_id, owner, datetime.now(UTC) - timedelta(days=7)))
    Chronicarius(store).record_actum("ardian", said("ardian", "lunch", "A quiet table?"))


def test_erase_idle_dry_run_counts_and_erases_nothing(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    idle_and_busy(kept)
    result = run(capsys, monkeypatch, "erase", "--idle-for", "3d", "--dry-run")
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("2 chronica of every owner idle since before 20")
    assert result.stdout.endswith("Z; dry run: nothing was erased\n")
    as_json = run(capsys, monkeypatch, "erase", "--idle-for", "3d", "--owner", "rafa", "--dry-run", "--json")
    form = json.loads(as_json.stdout)
    assert (form["owner_id"], form["dry_run"], form["chronica_idle"]) == ("rafa", True, 1)
    moment = datetime.fromisoformat(form["idle_before"])
    assert timedelta(days=3) <= datetime.now(UTC) - moment < timedelta(days=3, minutes=5)
    assert [chronicum.id for chronicum in Chronicarius(kept).list_chronica("rafa").chronica] == ["rafa-old"]


def test_erase_idle_of_one_owner_erases_only_that_owners_idle_chronica(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    idle_and_busy(kept)
    result = run(capsys, monkeypatch, "erase", "--idle-for", "72h", "--owner", "ardian", "--yes", "--json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["chronica_erased"] == 1
    chronicarius = Chronicarius(kept)
    assert [chronicum.id for chronicum in chronicarius.list_chronica("ardian").chronica] == ["lunch"]
    assert [chronicum.id for chronicum in chronicarius.list_chronica("rafa").chronica] == ["rafa-old"]
    every = run(capsys, monkeypatch, "erase", "--idle-for", "2w", "--yes")  # idle for a week only
    assert every.stdout.startswith("erased 0 chronica of every owner idle since before ")
    everyone = run(capsys, monkeypatch, "erase", "--idle-for", "2d", "--yes")
    assert everyone.stdout.startswith("erased 1 chronicum of every owner idle since before ")
    assert chronicarius.list_chronica("rafa").chronica == []


def test_erase_idle_on_a_terminal_asks_for_erase_idle(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    idle_and_busy(kept)
    refused = run(capsys, monkeypatch, "erase", "--idle-for", "3d", typed="yes\n")
    assert refused.code == 1
    assert "Erase 2 chronica of every owner idle since before " in refused.stderr
    assert "Type 'erase idle' to confirm: " in refused.stderr
    assert refused.stderr.endswith("chronica: not confirmed; nothing was erased\n")
    assert len(Chronicarius(kept).list_chronica("rafa").chronica) == 1
    confirmed = run(capsys, monkeypatch, "erase", "--idle-for", "3d", typed="erase idle\n")
    assert confirmed.code == 0
    assert confirmed.stdout.startswith("erased 2 chronica of every owner idle since before ")
    assert Chronicarius(kept).list_chronica("rafa").chronica == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["--idle-for", "90d", "--all", "--owner", "ardian"],
            "chronica erase: give a chronicum id, --all or",
        ),
        (
            ["lunch", "--idle-for", "90d", "--owner", "ardian"],
            "chronica erase: give a chronicum id, --all or",
        ),
        (["lunch", "--owner", "ardian", "--dry-run"], "chronica erase: --dry-run goes with --idle-for"),
        (["lunch", "--yes"], "chronica erase: the following argument is required: --owner"),
        (["--idle-for", "90", "--yes"], "argument --idle-for: expected a duration such as 90d"),
        (["--idle-for", "0d", "--yes"], "argument --idle-for: must be more than 0"),
        (["--idle-for", "-5d", "--yes"], "argument --idle-for: must be a duration over 0, such as 90d"),
        (["--idle-for=-5d", "--yes"], "argument --idle-for: must be a duration over 0, such as 90d"),
        (["--idle-for", "-5", "--dry-run"], "not a negative one, got '-5'"),
        (["--idle-for", "99999999999d", "--yes"], "argument --idle-for: too long, got '99999999999d'"),
        (["--idle-for", "999999d", "--yes"], "argument --idle-for: too long, got '999999d'"),
        (["--idle-for", "999999d", "--dry-run"], "argument --idle-for: too long, got '999999d'"),
        (["--idle-for", "3d"], "chronica erase: refusing to erase without confirmation"),
    ],
)
def test_erase_idle_bad_usage_exits_2_and_erases_nothing(arguments: list[str], message: str) -> None:
    result = chronica("erase", *arguments)
    assert result.returncode == 2
    assert message in result.stderr


# --- commands of other distributions ---------------------------------------------------------------


def test_the_core_imports_nothing_from_the_conformance_distribution() -> None:
    core = Path(__file__).resolve().parent.parent / "chronica_core"
    assert [path.name for path in core.glob("*.py") if "chronica_conformance" in path.read_text()] == []


def test_the_conformance_command_comes_from_its_distributions_entry_point() -> None:
    point = plugin_commands()["conformance"]
    assert point.value == "chronica_conformance.command:main"
    assert point.dist is not None and point.dist.name == "chronica-conformance"


def test_a_distribution_adds_a_command_through_the_entry_point_group(tmp_path: Path) -> None:
    (tmp_path / "greeting.py").write_text(
        "import sys\n"
        "from chronica_core import InvalidQuery\n"
        "def main(argv):\n"
        "    if argv == ['--bad']:\n"
        "        raise InvalidQuery('tone', 'must be kind')\n"
        "    print('hello', *argv)\n"
        "    return 3 if argv == ['three'] else 0\n"
    )
    info = tmp_path / "chronica_greeting-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: chronica-greeting\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[chronica.commands]\ngreet = greeting:main\n")
    environment = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def greet(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CHRONICA, *arguments], capture_output=True, text=True, env=environment, timeout=60
        )

    said = greet("greet", "ardian", "--loudly")
    assert (said.returncode, said.stdout) == (0, "hello ardian --loudly\n")
    assert greet("greet", "three").returncode == 3
    refused = greet("greet", "--bad")
    assert (refused.returncode, refused.stderr) == (
        4,
        "chronica: InvalidQuery: invalid query: tone: must be kind\n",
    )
    listed = greet("--help").stdout
    assert "greet" in listed and "a command of its own (chronica greet --help)" in listed


def test_text_from_the_store_is_printed_without_control_characters(
    kept: KeptMemoryStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent's content (a web page, a model's output) may hold a carriage return or a terminal
    # escape that would rewrite the lines printed before it; each actum stays one plain line.
    forged = "ok\r\x1b[1A\x1b[2K   1  0000  message       human      ardian     Approve it\tnow\u2028\x85"
    chronicum_id = "lunch\x1b[2K\n"
    stored = Chronicarius(kept).record_actum(
        "ardian", Actum(chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "web\rsearch", forged)
    )
    acta = run(capsys, monkeypatch, "acta", chronicum_id, "--owner", "ardian")
    escaped = r"ok\r\x1b[1A\x1b[2K   1  0000  message       human      ardian     Approve it\tnow\u2028\x85"
    assert acta.stdout.splitlines() == [f"   1  {stored.id}  tool_response agent      web\\rsearch {escaped}"]
    listed = run(capsys, monkeypatch, "list", "--owner", "ardian")
    assert listed.stdout.splitlines()[1].startswith("lunch\\x1b[2K\\n  ")
    shown = run(capsys, monkeypatch, "show", chronicum_id, "--owner", "ardian")
    assert shown.stdout.splitlines()[0] == "id: lunch\\x1b[2K\\n"
    as_json = run(capsys, monkeypatch, "acta", chronicum_id, "--owner", "ardian", "--json").stdout
    assert as_json.count("\\u001b[2K") == 2  # the JSON form keeps every character, JSON-escaped
