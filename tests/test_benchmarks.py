"""The benchmark harness runs on memory:// and reports every phase (its times are never asserted)."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the benchmarks are not installed: run from the repository

from benchmarks import connections, peers, side_by_side, writers  # noqa: E402
from benchmarks.connections import FEW, Budget, BudgetExceeded  # noqa: E402
from benchmarks.judge import judge  # noqa: E402
from benchmarks.peer_stores import PEERS  # noqa: E402
from benchmarks.peers_report import LatencyRow as PeerLatency  # noqa: E402
from benchmarks.peers_report import PeerReport, WritersRow, format_reports  # noqa: E402
from benchmarks.report import SHARED_WRITERS, ConcurrentRow, LatencyRow, Report, render  # noqa: E402
from benchmarks.targets import TargetsError, Verdict, load_targets, targets_for  # noqa: E402
from benchmarks.timing import Timing, shuffled, time_interleaved  # noqa: E402


def _harness(*arguments: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "benchmarks.run", *arguments]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_the_harness_measures_every_phase_on_memory(tmp_path: Path) -> None:
    report_file = tmp_path / "memory.json"
    result = _harness(
        "--store", "memory://", "--sizes", "10,30", "--repeat", "5", "--warmup", "1", "--writers", "2",
        "--writes", "3", "--batch-size", "4", "--others", "10,60", "--owned", "3", "--runs", "2",
        "--concurrent-rounds", "2", "--seed", "7", "--json", str(report_file),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [report] = json.loads(report_file.read_text())
    assert (report["backend"], report["runs"], report["seed"]) == ("memory", 2, 7)
    assert report["raw_columns"] == ["floor"]
    assert sorted({(row["operation"], row["history"], row["run"]) for row in report["latency"]}) == [
        (operation, size, run)
        for operation in ("get_acta last 20 messages", "record_actum")
        for size in (10, 30)
        for run in (1, 2)
    ]
    assert all(row["store"]["cpu_ns"] is not None for row in report["latency"])  # client CPU per call
    assert [(row["size"], row["run"]) for row in report["batch"]] == [(4, 1), (4, 2)]
    assert all(row["single"]["count"] == row["batch"]["count"] == 5 for row in report["batch"])
    assert [(row["others"], row["run"]) for row in report["listing"]] == [(10, 1), (10, 2), (60, 1), (60, 2)]
    assert len(report["listing_flat"]) == 2
    assert next(row["rounds"] for row in report["concurrent"] if row["writer"] == "floor threads") != []
    targets = {verdict["target"]: verdict for verdict in report["targets"]}
    assert "append at 30 in us <= 15" in targets and len(targets["append at 30 in us <= 15"]["values"]) == 2
    assert "seed 7 (--seed 7 repeats it)" in result.stdout
    assert "list_chronica first page, most/fewest others <= 1.30x" in result.stdout
    assert "asyncio/blocking per op (worst) <= 1.20x" in result.stdout  # no driver: no allowance
    assert "(2 runs " in result.stdout  # every target row prints its spread


def test_phases_pick_what_runs(tmp_path: Path) -> None:
    report_file = tmp_path / "listing.json"
    result = _harness(
        "--store", "memory://", "--phases", "listing", "--repeat", "3", "--warmup", "1", "--others", "5",
        "--owned", "2", "--runs", "1", "--json", str(report_file),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [report] = json.loads(report_file.read_text())
    assert report["latency"] == [] and report["concurrent"] == [] and report["batch"] == []
    assert [row["others"] for row in report["listing"]] == [5]
    assert report["listing_flat"] == []
    assert "operation  flavour" not in result.stdout

    refused = _harness("--store", "memory://", "--phases", "history,erase", timeout=60)
    assert refused.returncode == 2
    assert "--phases wants some of history,concurrent,batch,listing, got 'history,erase'" in refused.stderr


# --------------------------------------------------------------------------------------------
# The targets, as data


def test_every_target_row_of_the_file_is_one_the_harness_can_judge() -> None:
    targets = load_targets()
    assert {target.harness for target in targets} == {"run", "side_by_side", "peers", "governance"}
    [read] = [t for t in targets_for("run", backend="postgres") if t.measure == "read"]
    assert (read.against, read.at_most, read.at_least) == ("floor", 1.2, None)
    [batch] = [t for t in targets_for("run", backend="sqlalchemy") if t.measure == "batch"]
    assert batch.applies_to("sqlite:////tmp/x.db") and not batch.applies_to("mysql+pymysql://root@h/test")
    assert not [t for t in targets_for("run", backend="memory") if t.measure == "batch"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('harness = "run"\nmeasure = "speed"\nat_most = 1.0', "run measures read, append"),
        ('harness = "bench"\nmeasure = "read"\nat_most = 1.0', "harness must be one of run"),
        ('harness = "run"\nmeasure = "read"', "give exactly one of at_most and at_least"),
        ('harness = "run"\nmeasure = "read"\nat_most = "1.2"', "at_most must be a number"),
        ('harness = "run"\nmeasure = "read"\nat_most = 1.2\nlimit = 3', "unknown key(s) limit"),
    ],
)
def test_a_target_row_the_harness_cannot_judge_is_refused_naming_it(
    tmp_path: Path, row: str, message: str
) -> None:
    path = tmp_path / "targets.toml"
    path.write_text(f'[[target]]\nharness = "run"\nmeasure = "read"\nat_most = 1.0\n\n[[target]]\n{row}\n')
    with pytest.raises(TargetsError, match="target 2") as refusal:
        load_targets(path)
    assert message in str(refusal.value)


def test_a_verdict_is_on_the_median_of_its_runs_and_shows_their_spread() -> None:
    [target] = [t for t in targets_for("run", backend="postgres") if t.measure == "read"]
    verdict = Verdict.judge(target, "last-20 read <= 1.20x floor", [1.1, 1.9, 1.15])
    assert (verdict.value, verdict.holds) == (1.15, True)  # one noisy run does not decide it
    assert verdict.line() == "ok     last-20 read <= 1.20x floor: 1.15 (3 runs 1.10-1.90)"
    [threads] = [t for t in targets_for("run", backend="postgres") if t.measure == "threads"]
    assert not Verdict.judge(threads, "threads", [0.7, 0.79]).holds  # at_least: higher is better


def _report(columns: list[str], **medians: float) -> Report:
    report = Report("postgresql://db", "postgres", {}, [100, 1000], 10, "3.11", "now", runs=2)
    report.raw_columns = columns
    for run, scale in ((1, 1.0), (2, 1.1)):
        for size in (100, 1000):
            store = Timing(medians["store"] * scale, 0.0, 10)
            raw = {name: Timing(medians[name], 0.0, 10) for name in columns}
            ratio = {name: store.median_ns / timing.median_ns for name, timing in raw.items()}
            report.latency.append(
                LatencyRow("get_acta last 20 messages", "sync", size, run, store, raw, ratio)
            )
    return report


def test_the_read_is_judged_against_the_floor_not_the_drivers_default_column() -> None:
    report = _report(["floor", "psycopg"], store=150.0, floor=100.0, psycopg=200.0)
    [read] = [verdict for verdict in judge(report) if verdict.target.startswith("last-20 read")]
    assert read.target == "last-20 read (worst size) <= 1.20x floor"
    assert read.values == [1.5, pytest.approx(1.65)]
    assert not read.holds
    [header] = [line for line in render(report).splitlines() if line.startswith("operation")]
    assert "  floor  " in header and "  psycopg  " in header  # both columns printed


@pytest.mark.parametrize(("tasks_seconds", "holds"), [(1.2, True), (1.25, True), (1.3, False)])
def test_the_tasks_target_holds_tasks_to_0_8x_the_threads_round_by_round(
    tasks_seconds: float, holds: bool
) -> None:
    report = Report("postgresql://db", "postgres", {}, [100], 10, "3.11", "now", raw_columns=["floor"])
    report.concurrent = [
        ConcurrentRow("chronica threads", 40, 2000, 1.0, 2000.0, [1.0, 1.0, None]),
        ConcurrentRow("floor threads", 40, 2000, 0.9, 2000 / 0.9, [0.9, 0.9, 0.9]),
        ConcurrentRow(
            "chronica async tasks", 40, 2000, tasks_seconds, 2000 / tasks_seconds, [tasks_seconds] * 3
        ),
    ]
    [tasks] = [verdict for verdict in judge(report) if "tasks" in verdict.target]
    assert tasks.target == "40 tasks' throughput, to 40 threads' >= 0.80x"
    assert tasks.values == [pytest.approx(1 / tasks_seconds)] * 2  # the round the threads failed is left out
    assert tasks.holds is holds
    [threads] = [verdict for verdict in judge(report) if verdict.target.startswith("40 threads")]
    assert threads.target == "40 threads' throughput >= 0.80x floor" and threads.value == pytest.approx(0.9)


def test_memory_has_no_writers_targets() -> None:
    report = Report("memory://", "memory", {}, [100], 10, "3.11", "now")
    report.concurrent = [
        ConcurrentRow("chronica threads", 40, 2000, 1.0, 2000.0, [1.0]),
        ConcurrentRow("chronica async tasks", 40, 2000, 3.0, 2000 / 3.0, [3.0]),
    ]
    assert judge(report) == []


# --------------------------------------------------------------------------------------------
# The order of the columns


def test_columns_run_in_an_order_drawn_from_the_seed_each_round() -> None:
    calls: list[str] = []
    operations = {name: (lambda _, name=name: calls.append(name)) for name in "abcd"}
    timings = asyncio.run(time_interleaved(operations, 0, 30, rng=random.Random(11)))  # type: ignore[arg-type]
    assert all(timing.count == 30 and timing.cpu_ns is not None for timing in timings.values())
    rounds = [calls[start : start + 4] for start in range(0, len(calls), 4)]
    expected = random.Random(11)
    assert rounds == [shuffled(list("abcd"), expected) for _ in range(30)]  # the seed repeats the order
    assert len({tuple(order) for order in rounds}) > 4  # not a rotation of one order
    followers_of_a = {order[order.index("a") + 1] for order in rounds if order[-1] != "a"}
    assert followers_of_a == {"b", "c", "d"}  # no column always follows the same neighbour


# --------------------------------------------------------------------------------------------
# Many writers and the connection budget


def _many_writers(monkeypatch: pytest.MonkeyPatch, **overrides: Any) -> tuple[writers.ManyWriters, list[str]]:
    notes: list[str] = []
    settings = writers.WritersSettings("memory://", {}, 2, 3, 2, 3, False)
    many = writers.ManyWriters(settings, None, None, random.Random(5), Budget("memory://"), notes.append)
    for name, value in overrides.items():
        monkeypatch.setattr(many, name, value)
    return many, notes


def test_writer_rows_run_in_a_shuffled_order_each_round_and_report_their_median(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order: list[str] = []
    timed = {"chronica threads": iter([3.0, 1.0, 2.0]), SHARED_WRITERS: iter([6.0, 4.0, 5.0])}

    def measure(name: str) -> Any:
        def run(runner: object) -> tuple[float, int | None]:
            order.append(name)
            if name == "floor threads" and len(order) > 3:
                raise RuntimeError("division by zero")  # fails once: noted, not a row's time
            return next(timed[name]) if name in timed else 1.0, None

        return run

    many, notes = _many_writers(monkeypatch)
    monkeypatch.setattr(many, "rows", lambda: {name: measure(name) for name in [*timed, "floor threads"]})
    rows = {row.writer: row for row in many.measure(None)}  # type: ignore[arg-type]
    assert (rows["chronica threads"].seconds, rows[SHARED_WRITERS].seconds) == (2.0, 5.0)
    assert rows["chronica threads"].per_second == 6 / 2.0
    rounds = [order[start : start + 3] for start in range(0, 9, 3)]
    assert len({tuple(one) for one in rounds}) > 1  # the order changes from round to round
    assert sum(value is None for value in rows["floor threads"].rounds) == len(
        [note for note in notes if "floor threads: failed: division by zero" in note]
    )


def test_a_row_that_could_pass_the_connection_budget_is_refused_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    held = iter([10, 50])
    monkeypatch.setattr(connections, "held_connections", lambda url: next(held))
    budget = Budget("postgresql://postgres@127.0.0.1:5432/test", most=60)
    assert budget.admit("chronica threads", 40) == 10  # 10 + 40 + FEW within 60
    with pytest.raises(BudgetExceeded) as refusal:
        budget.admit("floor threads", 40)
    assert str(refusal.value) == (
        f"floor threads: not started: 50 connections held + 40 writers + {FEW} = {54 + 40}"
        " would pass the budget of 60 (--max-connections)"
    )
    assert "connection budget: 60 server connections" in budget.describe()
    monkeypatch.undo()
    assert Budget("sqlite:///x.db").admit("chronica threads", 40) is None  # no server, nothing to count
    assert connections.server_port("mariadb+pymysql://root@127.0.0.1/test") == 3306


def test_the_writer_rows_refuse_a_row_past_the_budget_and_measure_none_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(connections, "held_connections", lambda url: 30)
    started: list[str] = []
    notes: list[str] = []
    settings = writers.WritersSettings("postgresql://postgres@127.0.0.1:5432/test", {}, 40, 3, 2, 2, False)
    budget = Budget(settings.url, most=60)
    many = writers.ManyWriters(settings, None, None, random.Random(1), budget, notes.append)

    def measure(runner: object) -> tuple[float, int | None]:
        started.append("chronica threads")
        return 1.0, 70

    monkeypatch.setattr(many, "rows", lambda: {"chronica threads": measure})
    [row] = many.measure(None)  # type: ignore[arg-type]
    assert started == [] and row.rounds == [None, None] and row.seconds == 0.0
    assert len(notes) == 2 and all("would pass the budget of 60" in note for note in notes)


def test_each_raw_writer_opens_a_column_of_its_own_and_closes_it_when_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks.baselines import Baseline

    opened: list[Any] = []

    class Column:
        def __init__(self, url: str, options: dict[str, str]) -> None:
            self.appended: list[str] = []
            self.closed = False
            opened.append(self)

        def append(self, actum: Any) -> None:
            assert not self.closed
            self.appended.append(actum.chronicum_id)

        async def close_async(self) -> None:
            self.closed = True

        def close(self) -> None:
            self.closed = True

    class AsyncColumn(Column):
        async def append(self, actum: Any) -> None:  # type: ignore[override]
            Column.append(self, actum)

        async def close(self) -> None:  # type: ignore[override]
            self.closed = True

    class Loader:
        def __init__(self) -> None:
            self.prepared: list[str] = []

        def prepare(self, chronicum_id: str, owner_id: str) -> None:
            self.prepared.append(chronicum_id)

    baseline = Baseline("a floor", Loader, {"floor": Column}, {"floor": AsyncColumn})
    settings = writers.WritersSettings("memory://", {}, 3, 4, 2, 1, True)
    loader = Loader()
    many = writers.ManyWriters(settings, baseline, loader, random.Random(1), Budget("memory://"), print)
    many._raw_threads("floor")
    with asyncio.Runner() as runner:
        many._raw_tasks(runner, "floor")
    assert len(opened) == 6 and all(column.closed for column in opened)
    for column in opened:
        assert len(set(column.appended)) == 1
        assert len(column.appended) == 6  # 2 warm-up + 4 timed, all into its own chronicum
    assert sorted(column.appended[0] for column in opened) == sorted(loader.prepared)


# --------------------------------------------------------------------------------------------
# The peers and the stores side by side


def test_peers_reads_its_options_without_the_peers_installed() -> None:
    settings = peers.parse_arguments(
        ["--peers", "adk-memory,sqlite-session", "--sizes", "10000,100", "--writers", "0",
         "--json", "out.json", "--seed", "3", "--max-connections", "50"]
    )  # fmt: skip
    assert settings.peers == ["adk-memory", "sqlite-session"]
    assert settings.sizes == [100, 10_000]
    assert (settings.writers, settings.json_file, settings.seed, settings.max_connections) == (
        0,
        "out.json",
        3,
        50,
    )
    every = peers.parse_arguments([])
    assert every.peers == list(PEERS)
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


def test_peers_report_prints_ratios_and_the_sqlite_targets() -> None:
    def timing(milliseconds: float) -> Timing:
        return Timing(milliseconds * 1e6, milliseconds * 1.5e6, 50)

    report = PeerReport(
        peer="sqlite-session",
        title="OpenAI Agents SQLiteSession",
        database="sqlite",
        chronica_url="sqlite:///x.db",
        last_twenty="get_items(limit=20)",
        asynchronous=True,
        machine="2 CPUs",
        started_at="2026-12-01T23:00:00+00:00",
        latency=[
            PeerLatency("sqlite-session", "last 20", 100, timing(0.5), timing(1.0), timing(0.4)),
            PeerLatency("sqlite-session", "append", 100, timing(1.0), timing(0.9), timing(2.0)),
        ],
        writers=[
            WritersRow("sqlite-session", False, "chronica threads", 40, 900.0, [900.0]),
            WritersRow("sqlite-session", False, "chronica tasks", 40, 850.0, [800.0, 850.0, 900.0]),
            WritersRow("sqlite-session", False, "peer tasks", 40, 1000.0, [1000.0, 1000.0, 1000.0]),
        ],
    )
    text = format_reports([report])
    lines = [line.split() for line in text.splitlines()]
    assert ["sqlite-session", "last", "20", "100", "0.500", "1.00", "0.400", "1.25", "2.50", "50"] in lines
    threads = ["sqlite-session", "one", "each", "40", "chronica", "threads", "900"]
    assert [*threads, "40", "peer", "tasks", "1,000", "0.90"] in lines
    assert "ok     last 20 at 100 <= 1.5x sqlite-session: 1.25 (1 run)" in text
    assert "MISSED last 20 (asyncio) at 100 <= 1x sqlite-session: 2.50 (1 run)" in text
    assert "ok     append (asyncio) at 100 <= 1x sqlite-session: 0.45 (1 run)" in text
    assert "ok     40 chronica threads >= 0.9x sqlite-session's peer tasks: 0.90 (1 round)" in text
    assert "ok     40 chronica tasks >= 0.8x sqlite-session's peer tasks: 0.85 (3 rounds 0.80-0.90)" in text
    [document] = json.loads(json.dumps([report.as_json()]))
    assert document["latency"][0]["ratio"] == 1.25


def test_peers_report_shows_a_writers_round_that_failed() -> None:
    locked = "OperationalError: (sqlite3.OperationalError) database is locked"
    report = PeerReport(
        peer="adk-database-sqlite",
        title="ADK DatabaseSessionService",
        database="sqlite",
        chronica_url="sqlite:///x.db",
        last_twenty="get_session(...)",
        asynchronous=True,
        machine="2 CPUs",
        started_at="2026-12-01T23:00:00+00:00",
        writers=[
            WritersRow("adk-database-sqlite", False, "chronica threads", 40, 300.0, [300.0, 310.0, 290.0]),
            WritersRow("adk-database-sqlite", False, "chronica tasks", 40, 200.0, [200.0, 190.0], [locked]),
            WritersRow("adk-database-sqlite", False, "peer tasks", 40, 0.0, [], [locked] * 3),
        ],
    )
    lines = [line.split() for line in format_reports([report]).splitlines()]
    failed = ["40", "peer", "tasks", "failed", "(3", "of", "3", "rounds)", "-"]
    assert ["adk-database-sqlite", "one", "each", "40", "chronica", "threads", "300", *failed] in lines
    partly = ["200", "(1", "of", "3", "rounds", "failed)"]
    assert ["adk-database-sqlite", "one", "each", "40", "chronica", "tasks", *partly, *failed] in lines
    [document] = json.loads(json.dumps([report.as_json()]))
    assert document["writers"][2]["failures"] == [locked] * 3


def test_side_by_side_opens_its_stores_anew_for_each_run(capsys: pytest.CaptureFixture[str]) -> None:
    stores = ["--store", "memory://", "--store", "memory://"]
    side_by_side.main(
        [*stores, "--history", "3", "--repeat", "4", "--warmup", "1", "--runs", "3", "--seed", "2"]
    )
    lines = capsys.readouterr().out.splitlines()
    assert "3 runs of 4 rounds" in lines[0] and "seed 2" in lines[0]
    runs = [line.split()[0] for line in lines[2:] if line.split()[0].isdigit()]
    assert runs == ["1", "1", "2", "2", "3", "3"]  # both stores in every run
    assert lines[-2] == "median ratio over the runs, to memory://:"


def test_side_by_side_judges_the_median_of_its_runs_ratios(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    postgres = "postgresql://postgres@127.0.0.1:5432/bench_pg"
    sqlalchemy = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_sa"
    read_ratios = iter([1.2, 1.9, 1.25])  # one run far off: the median is 1.25, within 1.6
    append_ratios = iter([1.65, 1.1, 1.7])  # median 1.65: missed

    def one_run(
        urls: Any, history: int, repeat: int, warmup: int, analyze: bool, rng: random.Random
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
    assert (
        lines[-2]
        == "  ok     postgresql+psycopg:// last-20 read <= 1.6x postgresql://: 1.25 (3 runs 1.20-1.90)"
    )
    assert lines[-1] == "  MISSED postgresql+psycopg:// append <= 1.6x postgresql://: 1.65 (3 runs 1.10-1.70)"


def test_the_asyncio_target_allows_the_drivers_own_ratio_over_the_runs() -> None:
    report = Report("postgresql://db", "postgres", {}, [100], 10, "3.11", "now", runs=3)
    for run, (store, driver) in enumerate([(1.3, 1.5), (1.25, 1.0), (1.35, 1.15)], start=1):
        ratio = {"sync": store, "driver": driver}
        report.latency.append(LatencyRow("record_actum", "async", 100, run, Timing(1.0, 1.0, 1), {}, ratio))
    [verdict] = [verdict for verdict in judge(report) if verdict.target.startswith("asyncio")]
    assert verdict.limit == pytest.approx(1.1 * 1.15)  # the driver's median over the runs, not its worst
    assert (verdict.value, verdict.holds) == (1.3, False)
    assert verdict.target == "asyncio/blocking per op (worst) <= 1.26x"
