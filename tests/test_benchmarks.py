"""The benchmark harness runs on memory:// and reports every phase (its times are never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
