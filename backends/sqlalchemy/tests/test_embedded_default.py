"""The embedded default as a user meets it: the CLI and the README's examples on a SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHRONICA = str(Path(sys.executable).with_name("chronica"))
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

pytestmark = pytest.mark.dialects("sqlite")


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "CHRONICA_STORE"}
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=120)


def read_back(named: str, cwd: Path) -> list[str]:
    """Run the command an example printed for a chronicum it made; the contents it prints."""
    command = named.split(": ", 1)[1].split()
    assert command[0] == "chronica"
    result = run([CHRONICA, *command[1:]], cwd)
    assert result.returncode == 0, result.stderr
    return [line.split(None, 5)[5] for line in result.stdout.splitlines()]


def test_an_example_on_the_demos_store_leaves_the_demos_conversation_alone(
    dialect: str, tmp_path: Path
) -> None:
    assert run([CHRONICA, "demo"], tmp_path).returncode == 0
    before = run([CHRONICA, "acta", "dinner-friday", "--owner", "ardian"], tmp_path).stdout
    for example in ("capabilities.py", "quickstart.py", "three_agents.py", "follow.py"):
        ran = run([sys.executable, str(EXAMPLES / example), "sqlite:///chronica.db"], tmp_path)
        assert ran.returncode == 0, ran.stderr
    after = run([CHRONICA, "acta", "dinner-friday", "--owner", "ardian"], tmp_path)
    assert (after.returncode, after.stdout) == (0, before)
    assert len(before.splitlines()) == 8


def test_demo_then_a_new_process_reads_the_stored_window(dialect: str, tmp_path: Path) -> None:
    demo = run([CHRONICA, "demo"], tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.startswith("Chronica demo on sqlite:///chronica.db:")
    assert "The chronicum holds 8 acta." in demo.stdout
    assert (tmp_path / "chronica.db").is_file()

    window = run(
        [CHRONICA, "acta", "--owner", "ardian", "dinner-friday", "--last", "3", "--kinds", "message"],
        tmp_path,
    )
    assert window.returncode == 0, window.stderr
    assert [line.split(None, 5)[4:] for line in window.stdout.splitlines()] == [
        ["ardian", "Rumah Teduh."],
        ["concierge", "Book Rumah Teduh for four at 7pm on Friday under Ardian."],
        ["booking", "Booked: Rumah Teduh, Friday 7pm, four."],
    ]

    again = run([CHRONICA, "demo"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert "The chronicum holds 8 acta." in again.stdout  # every demo write carries a key

    refused = run([CHRONICA, "show", "dinner-friday", "--owner", "rafa"], tmp_path)
    assert refused.returncode == 3
    assert refused.stderr.strip() == (
        "chronica: ChronicumNotFound: chronicum 'dinner-friday' not found in sqlite:///chronica.db"
    )

    migrate = run([CHRONICA, "migrate"], tmp_path)
    assert migrate.returncode == 0, migrate.stderr
    assert migrate.stdout.strip() == "schema of sqlite:///chronica.db is current"
    migrate = run(
        [CHRONICA, "migrate", "--option", "busy_timeout=5", "--option", "synchronous=normal"], tmp_path
    )
    assert migrate.returncode == 0, migrate.stderr
    assert (
        migrate.stdout.strip() == "schema of sqlite:///chronica.db is current"
    )  # only schema/database shown


@pytest.mark.parametrize(
    "command",
    [
        ["acta", "dinner-friday", "--owner", "ardian", "--last", "3"],
        ["show", "dinner-friday", "--owner", "ardian"],
        ["follow", "dinner-friday", "--owner", "ardian"],
        ["follow", "dinner-friday", "--owner", "ardian", "--after", "0" * 32],
        ["list", "--owner", "ardian"],
        ["erase", "dinner-friday", "--owner", "ardian", "--yes"],
        ["erase", "--owner", "ardian", "--all", "--yes"],
    ],
)
def test_a_read_where_there_is_no_store_creates_none(
    dialect: str, tmp_path: Path, command: list[str]
) -> None:
    result = run([CHRONICA, *command], tmp_path)
    assert sorted(tmp_path.iterdir()) == []  # no empty chronica.db (nor its -wal, -shm) left behind
    missing = tmp_path / "chronica.db"
    if command[0] == "list":
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0] == "owner 'ardian' has no chronica"
        assert result.stderr == f"chronica: note: there is no file {missing}; nothing was created\n"
    elif "--all" in command:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 3
        assert result.stderr == (
            "chronica: ChronicumNotFound: chronicum 'dinner-friday' not found in sqlite:///chronica.db "
            f"(there is no file {missing}; nothing was created)\n"
        )
    record = ["record", "lunch", "--owner", "ardian", "--kind", "message", "--actor-kind", "human"]
    recorded = run([CHRONICA, *record, "--actor", "ardian", "--content", "A table?"], tmp_path)
    assert recorded.returncode == 0, recorded.stderr
    assert missing.is_file()  # a write creates the store, as before
    again = run([CHRONICA, *command], tmp_path)
    assert "there is no file" not in again.stderr


def test_the_readme_examples_run_on_a_sqlite_file(dialect: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'examples.db'}"
    quickstart = run([sys.executable, str(EXAMPLES / "quickstart.py"), url], tmp_path)
    assert quickstart.returncode == 0, quickstart.stderr
    *lines, named, left = quickstart.stdout.splitlines()
    assert lines == [
        "ardian: A quiet table for four?",
        "search: Rumah Teduh has one.",
        "rafa: ChronicumNotFound",
    ]
    assert read_back(named, tmp_path) == ["A quiet table for four?", "Search first.", "Rumah Teduh has one."]
    assert left.endswith(": chronicum " + named.split(":")[0].split()[1] + ", 3 acta")
    agents_url = f"sqlite:///{tmp_path / 'agents.db'}"
    agents = run([sys.executable, str(EXAMPLES / "three_agents.py"), agents_url], tmp_path)
    assert agents.returncode == 0, agents.stderr
    *lines, named, left = agents.stdout.splitlines()
    assert lines[-1].startswith("the chronicum holds 4 acta: ['ardian', ")
    assert len(read_back(named, tmp_path)) == 4
    assert left.endswith(", 4 acta")


@pytest.mark.parametrize(
    ("store", "code", "said"),
    [
        ("sqlite:///chronica.db?timeout=abc", 4, "chronica: InvalidOption: sqlalchemy: option timeout: "),
        ("sqlite+pysqlte:///chronica.db", 5, "chronica: UnknownBackend: SQLAlchemy has no driver 'pysqlte'"),
        ("sqlite:///chronica.db?schema=app", 4, "chronica: InvalidOption: sqlalchemy: option schema: "),
    ],
)
def test_a_read_where_there_is_no_store_still_refuses_a_bad_url(
    dialect: str, tmp_path: Path, store: str, code: int, said: str
) -> None:
    """The missing file is no reason to skip the checks: the URL is refused as it would be with one."""
    result = run([CHRONICA, "acta", "dinner-friday", "--owner", "ardian", "--store", store], tmp_path)
    assert result.returncode == code, result.stderr
    assert result.stderr.startswith(said), result.stderr
    assert sorted(tmp_path.iterdir()) == []


def test_the_follow_example_runs_on_a_sqlite_file(dialect: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'follow.db'}"
    following = run([sys.executable, str(EXAMPLES / "follow.py"), url], tmp_path)
    assert following.returncode == 0, following.stderr
    *lines, named, _ = following.stdout.splitlines()
    assert len(read_back(named, tmp_path)) == 5
    assert lines == [
        "booking sees search: Rumah Teduh has one.",
        "booking sees ardian: Rumah Teduh, please.",
        "booking stopped; it resumes after the last message it saw",
        "booking sees ardian: Under Ardian.",
    ]
