"""The benchmark harness runs on memory:// and reports every phase (its times are never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_harness_measures_every_phase_on_memory(tmp_path: Path) -> None:
    report_file = tmp_path / "memory.json"
    command = [
        sys.executable, "-m", "benchmarks.run", "--store", "memory://", "--sizes", "10,30",
        "--repeat", "5", "--warmup", "1", "--writers", "2", "--writes", "3", "--batch-size", "4",
        "--others", "10,60", "--owned", "3", "--json", str(report_file),
    ]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    [report] = json.loads(report_file.read_text())
    assert report["backend"] == "memory"
    assert sorted({(row["operation"], row["history"]) for row in report["latency"]}) == [
        ("get_acta last 20 messages", 10),
        ("get_acta last 20 messages", 30),
        ("record_actum", 10),
        ("record_actum", 30),
    ]
    [batch] = report["batch"]
    assert batch["size"] == 4
    assert batch["single"]["count"] == batch["batch"]["count"] == 5
    assert batch["ratio"] == batch["batch"]["median_ns"] / batch["single"]["median_ns"]
    assert [(row["others"], row["owned"], row["limit"]) for row in report["listing"]] == [
        (10, 3, 50),
        (60, 3, 50),
    ]
    assert all(row["store"]["count"] == 5 for row in report["listing"])
    targets = [verdict["target"] for verdict in report["targets"]]
    assert not any(target.startswith("record_acta of") for target in targets)  # no batch target on memory
    assert "list_chronica first page: 60 / 10 other owners' chronica <= 1.3x" in targets
    assert not any("note" in line and "first page has" in line for line in result.stderr.splitlines())
    assert "batch/single: " in result.stdout
    assert "listing 60/10: " in result.stdout


def test_phases_pick_what_runs(tmp_path: Path) -> None:
    report_file = tmp_path / "listing.json"
    command = [
        sys.executable, "-m", "benchmarks.run", "--store", "memory://", "--phases", "listing",
        "--repeat", "3", "--warmup", "1", "--others", "5", "--owned", "2", "--json", str(report_file),
    ]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    [report] = json.loads(report_file.read_text())
    assert report["latency"] == [] and report["concurrent"] == [] and report["batch"] == []
    assert [row["others"] for row in report["listing"]] == [5]
    assert report["listing_flat"] is None
    assert "operation  flavour" not in result.stdout

    refused = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--store", "memory://", "--phases", "history,erase"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "--phases wants some of history,concurrent,batch,listing, got 'history,erase'" in refused.stderr


def test_many_writer_rows_report_the_median_of_their_interleaved_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.run import Settings, StoreBench

    settings = Settings(
        [10], {}, repeat=1, warmup=1, writers=2, writes_per_writer=3, run_async=False, concurrent_rounds=3
    )
    bench = StoreBench("memory://", settings)
    rounds: list[str] = []
    timed = iter([3.0, 1.0, 2.0, 6.0, 4.0, 5.0])  # threads, shared, threads, shared, threads, shared

    def one_round(runner: object) -> None:
        rounds.append("round")
        bench._concurrent("chronica threads", lambda: next(timed))
        bench._concurrent("shared", lambda: next(timed))
        if len(rounds) == 2:
            bench._concurrent("raw threads", lambda: 1 / 0)  # fails once: noted, not a row

    monkeypatch.setattr(bench, "_concurrent_round", one_round)
    bench._measure_concurrent(None)  # type: ignore[arg-type]
    assert rounds == ["round"] * 3
    assert [(row.writer, row.seconds, row.writes) for row in bench.report.concurrent] == [
        ("chronica threads", 3.0, 6),
        ("shared", 5.0, 6),
    ]
    assert bench.report.concurrent[0].per_second == 2.0
    assert [note for note in bench.report.notes if "raw threads: failed" in note] == [
        "2 raw threads: failed: division by zero"
    ]


def test_the_chronica_threads_row_is_timed_on_its_second_run_on_one_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    import benchmarks.run as harness

    settings = harness.Settings(
        [10], {}, repeat=1, warmup=1, writers=2, writes_per_writer=3, run_async=False, concurrent_rounds=1
    )
    bench = harness.StoreBench("memory://", settings)
    runs: list[list[str]] = []
    seconds = iter([9.0, 2.0, 4.0])  # the untimed run, the timed one, then the shared row
    # (each writer warms up with at least 2 writes before its 3 timed ones)

    def fake_run_threads(writers: int, make_writer: Any, warmup: int, writes: int) -> float:
        written = []
        for index in range(writers):
            write, close = make_writer(index)
            for number in range(warmup + writes):
                written.append(write(number).chronicum_id)
            close()
        runs.append(written)
        return next(seconds)

    monkeypatch.setattr(harness, "run_threads", fake_run_threads)
    bench._measure_concurrent(None)  # type: ignore[arg-type]
    rows = {row.writer: row.seconds for row in bench.report.concurrent}
    assert rows == {"chronica threads": 2.0, harness.SHARED_WRITERS: 4.0}
    untimed, timed, shared = runs
    assert len(untimed) == len(timed) == 2 * (2 + 3) and len(set(untimed)) == len(set(timed)) == 2
    assert not set(untimed) & set(timed)  # fresh chronica for the timed run
    assert len(set(shared)) == 1


@pytest.mark.parametrize(("tasks_seconds", "holds"), [(1.2, True), (1.25, True), (1.3, False)])
def test_judge_holds_tasks_to_0_8x_the_threads_throughput(
    monkeypatch: pytest.MonkeyPatch, tasks_seconds: float, holds: bool
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.run import ConcurrentRow, Report, judge, render

    report = Report("postgresql://db", "postgres", {}, [100], 10, "3.11", "now", raw_variants=["psycopg"])
    report.concurrent = [
        ConcurrentRow("chronica threads", 40, 2000, 1.0, 2000.0),
        ConcurrentRow("psycopg threads", 40, 2000, 0.9, 2000 / 0.9),
        ConcurrentRow("chronica async tasks", 40, 2000, tasks_seconds, 2000 / tasks_seconds),
        ConcurrentRow("psycopg async tasks", 40, 2000, 1.125, 2000 / 1.125),
    ]
    [tasks] = [verdict for verdict in judge(report) if "tasks" in verdict.target]
    assert tasks.target == "40 tasks >= 0.8x 40 threads' throughput"
    assert tasks.value == pytest.approx(1 / tasks_seconds)
    assert tasks.holds is holds
    report.targets = judge(report)
    text = render(report)
    assert f"tasks/threads throughput {1 / tasks_seconds:.2f}x" in text
    assert "driver floor psycopg async tasks/threads throughput 0.80x" in text  # 0.9 s / 1.125 s


def test_raw_tasks_give_each_task_its_own_baseline_and_close_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    import asyncio

    from benchmarks.run import Baselines, Settings, StoreBench

    opened: list[FakeRaw] = []

    class FakeAsync:
        def __init__(self, owner: FakeRaw) -> None:
            self.owner = owner
            self.appended: list[tuple[str, str]] = []
            self.closed = False

        async def append(self, actum: Any) -> None:
            assert self.owner.sync_closed, "the blocking connection is closed before the writes"
            self.appended.append((actum.chronicum_id, actum.id))

        async def close(self) -> None:
            self.closed = True

    class FakeRaw:
        name = "fake"
        thread_safe = False

        def __init__(self, url: str, **options: str) -> None:
            self.variants = {"fake": self}
            self.async_variants = {"fake": FakeAsync(self)}
            self.prepared: list[str] = []
            self.sync_closed = False
            opened.append(self)

        def prepare(self, chronicum_id: str, owner_id: str) -> None:
            self.prepared.append(chronicum_id)

        def fill(self, chronicum_id: str, acta: Any) -> None:
            raise AssertionError("nothing to fill")

        def close(self) -> None:
            self.sync_closed = True

    settings = Settings([10], {}, repeat=1, warmup=1, writers=3, writes_per_writer=4, run_async=True)
    bench = StoreBench("memory://", settings)
    shared = Baselines(FakeRaw, "memory://", {})
    seconds = asyncio.run(bench._raw_tasks(shared, "fake", "label", 2))
    assert seconds > 0
    tasks = opened[1:]  # opened[0] is the shared one, untouched
    assert opened[0].prepared == [] and not opened[0].async_variants["fake"].appended
    assert len(tasks) == 3
    for raw in tasks:
        [chronicum_id] = raw.prepared
        variant = raw.async_variants["fake"]
        assert [appended[0] for appended in variant.appended] == [chronicum_id] * 6  # 2 warm-up + 4 timed
        assert len({appended[1] for appended in variant.appended}) == 6
        assert raw.sync_closed and variant.closed
    assert len({raw.prepared[0] for raw in tasks}) == 3


def test_judge_sets_no_tasks_target_on_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.run import ConcurrentRow, Report, judge

    report = Report("memory://", "memory", {}, [100], 10, "3.11", "now")
    report.concurrent = [
        ConcurrentRow("chronica threads", 40, 2000, 1.0, 2000.0),
        ConcurrentRow("chronica async tasks", 40, 2000, 3.0, 2000 / 3.0),
    ]
    assert not [verdict for verdict in judge(report) if "tasks" in verdict.target]


def test_peers_reads_its_options_without_the_peers_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # the benchmarks are not installed: run from the repository
    from benchmarks import peers

    settings = peers.parse_arguments(
        [
            "--peers",
            "adk-memory,sqlite-session",
            "--sizes",
            "10000,100",
            "--writers",
            "0",
            "--json",
            "out.json",
        ]
    )
    assert settings.peers == ["adk-memory", "sqlite-session"]
    assert settings.sizes == [100, 10_000]
    assert settings.writers == 0
    assert settings.json_file == "out.json"
    every = peers.parse_arguments([])
    assert every.peers == list(peers.PEERS)
    assert every.sizes == [100, 10_000, 100_000]
    assert (every.writers, every.pool_size, every.shared_writers) == (40, 10, True)


def test_peers_refuses_an_unknown_peer_or_size_naming_the_option() -> None:
    for arguments, message in [
        (["--peers", "sqlite-session,redis"], "--peers wants some of sqlite-session,"),
        (["--sizes", "100,0"], "--sizes wants positive whole numbers separated by commas, got '100,0'"),
        (["--sizes", "ten"], "--sizes wants positive whole numbers separated by commas, got 'ten'"),
    ]:
        refused = subprocess.run(
            [sys.executable, "-m", "benchmarks.peers", *arguments],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode == 2, refused.stderr
        assert message in refused.stderr


def test_peers_report_prints_ratios_and_the_sqlite_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import peers
    from benchmarks.run import Timing

    def timing(milliseconds: float) -> Timing:
        return Timing(milliseconds * 1e6, milliseconds * 1.5e6, 50)

    report = peers.PeerReport(
        peer="sqlite-session",
        title="OpenAI Agents SQLiteSession",
        database="sqlite",
        chronica_url="sqlite:///x.db",
        last_twenty="get_items(limit=20)",
        asynchronous=True,
        machine="2 CPUs",
        started_at="2026-12-01T23:00:00+00:00",
        latency=[
            peers.LatencyRow("sqlite-session", "last 20", 100, timing(0.5), timing(1.0), timing(0.4)),
            peers.LatencyRow("sqlite-session", "append", 100, timing(1.0), None, timing(2.0)),
        ],
        writers=[
            peers.WritersRow("sqlite-session", False, "chronica threads", 40, 900.0, [900.0]),
            peers.WritersRow("sqlite-session", False, "chronica tasks", 40, 850.0, [800.0, 850.0, 900.0]),
            peers.WritersRow("sqlite-session", False, "peer tasks", 40, 1000.0, [1000.0]),
        ],
    )
    text = peers.format_reports([report])
    lines = [line.split() for line in text.splitlines()]
    assert ["sqlite-session", "last", "20", "100", "0.500", "1.00", "0.400", "1.25", "2.50", "50"] in lines
    assert ["sqlite-session", "append", "100", "1.00", "-", "2.00", "0.50", "-", "50"] in lines
    threads = ["sqlite-session", "one", "each", "40", "chronica", "threads", "900"]
    assert [*threads, "40", "peer", "tasks", "1,000", "0.90"] in lines
    assert "MISSED  SQLite last 20 at 100 <= 1.2x SQLiteSession: 1.25x" in text
    assert "MISSED  SQLite last 20 (asyncio) at 100 <= 1.2x SQLiteSession: 2.50x" in text
    assert "MISSED  SQLite 40 chronica threads >= 1.0x SQLiteSession's tasks: 0.90x" in text
    assert "ok      SQLite 40 chronica tasks >= 0.8x SQLiteSession's tasks: 0.85x" in text
    [document] = json.loads(json.dumps([report.as_json()]))
    assert document["latency"][0]["ratio"] == 1.25
    assert document["latency"][1]["async_ratio"] is None


def test_peers_report_shows_a_writers_round_that_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import peers

    locked = "OperationalError: (sqlite3.OperationalError) database is locked"
    report = peers.PeerReport(
        peer="adk-database-sqlite",
        title="ADK DatabaseSessionService",
        database="sqlite",
        chronica_url="sqlite:///x.db",
        last_twenty="get_session(...)",
        asynchronous=True,
        machine="2 CPUs",
        started_at="2026-12-01T23:00:00+00:00",
        writers=[
            peers.WritersRow(
                "adk-database-sqlite", False, "chronica threads", 40, 300.0, [300.0, 310.0, 290.0]
            ),
            peers.WritersRow(
                "adk-database-sqlite", False, "chronica tasks", 40, 200.0, [200.0, 190.0], [locked]
            ),
            peers.WritersRow("adk-database-sqlite", False, "peer tasks", 40, 0.0, [], [locked] * 3),
        ],
    )
    lines = [line.split() for line in peers.format_reports([report]).splitlines()]
    failed = ["40", "peer", "tasks", "failed", "(3", "of", "3", "rounds)", "-"]
    assert ["adk-database-sqlite", "one", "each", "40", "chronica", "threads", "300", *failed] in lines
    partly = ["200", "(1", "of", "3", "rounds", "failed)"]
    assert ["adk-database-sqlite", "one", "each", "40", "chronica", "tasks", *partly, *failed] in lines
    [document] = json.loads(json.dumps([report.as_json()]))
    assert document["writers"][2]["failures"] == [locked] * 3


def test_side_by_side_opens_its_stores_anew_for_each_run(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import side_by_side

    stores = ["--store", "memory://", "--store", "memory://"]
    side_by_side.main([*stores, "--history", "3", "--repeat", "4", "--warmup", "1", "--runs", "3"])
    lines = capsys.readouterr().out.splitlines()
    assert "3 runs of 4 rounds" in lines[0]
    runs = [line.split()[0] for line in lines[2:] if line.split()[0].isdigit()]
    assert runs == ["1", "1", "2", "2", "3", "3"]  # both stores in every run
    assert lines[-2] == "median ratio over the runs, to memory://:"


def test_side_by_side_judges_the_median_of_its_runs_ratios(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import side_by_side

    postgres = "postgresql://postgres@127.0.0.1:5432/bench_pg"
    sqlalchemy = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_sa"
    read_ratios = iter([1.2, 1.9, 1.25])  # one run far off: the median is 1.25, within 1.3
    append_ratios = iter([1.35, 1.1, 1.4])  # median 1.35: missed

    def one_run(
        urls: Any, history: int, repeat: int, warmup: int, analyze: bool
    ) -> tuple[dict[str, float], dict[str, float]]:
        assert list(urls) == [postgres, sqlalchemy]
        assert analyze  # the default: statistics as autovacuum would gather them
        return (
            {postgres: 100_000.0, sqlalchemy: 100_000.0 * next(read_ratios)},
            {postgres: 200_000.0, sqlalchemy: 200_000.0 * next(append_ratios)},
        )

    monkeypatch.setattr(side_by_side, "_one_run", one_run)
    monkeypatch.setattr(side_by_side, "autovacuum_setting", lambda url: "on")
    side_by_side.main(["--store", postgres, "--store", sqlalchemy, "--runs", "3"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2] == (
        "  ok     chronica-sqlalchemy last-20 read <= 1.3x chronica-postgres's: 1.25"
        " (median of the runs: 1.20, 1.90, 1.25)"
    )
    assert lines[-1] == (
        "  MISSED chronica-sqlalchemy append <= 1.3x chronica-postgres's: 1.35"
        " (median of the runs: 1.35, 1.10, 1.40)"
    )
