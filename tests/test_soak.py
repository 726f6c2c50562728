"""The soak harness runs a short load on memory:// and its checks catch lost, doubled and reordered acta."""

from __future__ import annotations

import json
import socket
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the benchmarks are not installed: run from the repository

from benchmarks import soak, soak_heap  # noqa: E402
from benchmarks.soak_kill import kill_connections, local_ports  # noqa: E402
from benchmarks.soak_ledger import IdLog  # noqa: E402

SHORT = ["--minutes", "0.06", "--warmup-minutes", "0.02", "--interval", "1", "--append-rate", "80"]


def test_a_short_blocking_soak_samples_and_verifies(tmp_path: Path) -> None:
    report = tmp_path / "soak.json"
    assert soak.main(["--store", "memory://", *SHORT, "--seed", "3", "--json", str(report)]) == 0
    written = json.loads(report.read_text())
    assert written["problems"] == []
    assert written["acknowledged"] > 8 * 4  # every writer's first acta and more
    assert len(written["samples"]) >= 3
    first = written["samples"][0]
    assert first["rss_mb"] > 1 and first["fds"] > 0 and first["threads"] >= 1 + 8 + 4 + 3 + 1
    assert first["connections"] is None  # memory:// has no server
    assert written["growth_mb"] is not None


def test_a_short_asyncio_soak_verifies(tmp_path: Path) -> None:
    report = tmp_path / "soak.json"
    assert soak.main(["--store", "memory://", "--asyncio", *SHORT, "--json", str(report)]) == 0
    written = json.loads(report.read_text())
    assert written["problems"] == [] and written["asyncio"] is True
    assert sum(sample["appends"] for sample in written["samples"]) > 0


FAULTS = [
    (["a", "b", "c", "d"], ["b", "c", "d"], []),
    (["a", "b", "d"], ["b", "c", "d"], ["c: 3 stored, 4 acknowledged: 1 lost, 0 twice"]),
    (["a", "b", "c", "c", "d"], ["b", "c", "d"], ["c: 5 stored, 4 acknowledged: 0 lost, 1 twice"]),
    (["a", "c", "b", "d"], ["b", "c", "d"], ["c: 4 stored, 4 acknowledged: out of order"]),
    (["a", "b", "c", "d"], ["b", "d"], ["follower of c: got 2, expected 3"]),
    (["a", "b", "c", "d"], ["c", "b", "d"], ["follower of c: got 3, out of order"]),
]


@pytest.mark.parametrize(("stored", "followed", "problems"), FAULTS)
def test_the_checks_pass_exact_histories_and_catch_every_fault(
    stored: list[str], followed: list[str], problems: list[str], tmp_path: Path
) -> None:
    run = soak.Soak(soak.Load(), tmp_path)
    acknowledged = run.log_acknowledged("c")
    for actum_id in ("a", "b", "c", "d"):
        acknowledged.add(actum_id)
    got = run.log_followed("c")
    for actum_id in followed:
        got.add(actum_id)
    run.verify({"c": stored})
    assert run.problems == problems


def test_growth_is_measured_after_the_warm_up_only() -> None:
    run = soak.Soak(soak.Load(warmup_minutes=1), Path("unused"))
    for minute, rss in ((0.5, 10.0), (1.0, 50.0), (2.0, 52.0), (3.0, 54.0)):
        run.samples.append(soak.Sample(minute, rss, 1, 1, None, 0, 0, 0, 0, 0, 0, 0))
    assert run.growth() == (4.0, 2.0)


def test_the_id_logs_keep_order_and_count(tmp_path: Path) -> None:
    log = IdLog(tmp_path / "log")
    for actum_id in ("x", "y", "x"):
        log.add(actum_id)
    assert (log.ids(), log.count, log.first, log.last) == (["x", "y", "x"], 3, "x", "x")
    log.close()
    assert log.ids() == ["x", "y", "x"]


def test_the_connection_kill_finds_this_process_s_connections_by_port() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            with accepted:
                assert local_ports(port) == {client.getsockname()[1]}
    assert kill_connections("memory://") == 0


def test_followers_started_together_each_log_to_a_file_of_their_own(tmp_path: Path) -> None:
    # The follower threads open their logs as they start: two of them once shared a file and the
    # check then compared a chronicum's acta with another's.
    run = soak.Soak(soak.Load(), tmp_path)
    chronica = [f"c{number}" for number in range(16)]
    start = threading.Barrier(len(chronica))

    def open_log(chronicum_id: str) -> None:
        start.wait()
        run.log_followed(chronicum_id).add(chronicum_id)

    threads = [threading.Thread(target=open_log, args=(chronicum_id,)) for chronicum_id in chronica]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {chronicum_id: log.ids() for chronicum_id, log in run.followed.items()} == {
        chronicum_id: [chronicum_id] for chronicum_id in chronica
    }
    assert len({log.path for log in run.followed.values()}) == len(chronica)


def test_the_heap_curve_takes_a_point_a_minute_and_the_last() -> None:
    mb = 2**20
    snapshots = [(1_000, 40 * mb, 0), (31_000, 90 * mb, 30 * mb), (61_000, 100 * mb, 31 * mb)]
    snapshots += [(95_000, 104 * mb, 30 * mb), (121_000, 108 * mb, 30 * mb), (130_000, 109 * mb, 44 * mb)]
    assert soak_heap.per_minute(snapshots) == [
        soak_heap.Point(0.0, 40.0, 0.0),
        soak_heap.Point(1.0, 100.0, 31.0),
        soak_heap.Point(2.0, 108.0, 30.0),
        soak_heap.Point(2.15, 109.0, 44.0),
    ]
    assert soak_heap.per_minute([]) == []
