"""The soak harness runs a short load on memory:// and its checks catch lost, doubled and reordered acta."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the benchmarks are not installed: run from the repository

from benchmarks import soak  # noqa: E402
from benchmarks.soak_kill import kill_connections, local_ports  # noqa: E402

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


def _checked(stored: list[str], followed: list[str]) -> list[str]:
    run = soak.Soak(soak.Load())
    run.acknowledged = {"c": ["a", "b", "c", "d"]}
    run.followed = {"c": followed}
    run.verify({"c": stored})
    return run.problems


def test_the_checks_pass_exact_histories_and_catch_every_fault() -> None:
    assert _checked(["a", "b", "c", "d"], ["b", "c", "d"]) == []
    assert _checked(["a", "b", "d"], ["b", "c", "d"]) == ["c: 3 stored, 4 acknowledged: 1 lost, 0 twice"]
    assert _checked(["a", "b", "c", "c", "d"], ["b", "c", "d"]) == [
        "c: 5 stored, 4 acknowledged: 0 lost, 1 twice"
    ]
    assert _checked(["a", "c", "b", "d"], ["b", "c", "d"]) == ["c: 4 stored, 4 acknowledged: out of order"]
    assert _checked(["a", "b", "c", "d"], ["b", "d"]) == ["follower of c: got 2, expected 3"]
    assert _checked(["a", "b", "c", "d"], ["c", "b", "d"]) == ["follower of c: got 3, out of order"]


def test_growth_is_measured_after_the_warm_up_only() -> None:
    run = soak.Soak(soak.Load(warmup_minutes=1))
    for minute, rss in ((0.5, 10.0), (1.0, 50.0), (2.0, 52.0), (3.0, 54.0)):
        run.samples.append(soak.Sample(minute, rss, 1, 1, None, 0, 0, 0, 0, 0, 0, 0))
    assert run.growth() == (4.0, 2.0)


def test_the_connection_kill_finds_this_process_s_connections_by_port() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            with accepted:
                assert local_ports(port) == {client.getsockname()[1]}
    assert kill_connections("memory://") == 0
