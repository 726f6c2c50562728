"""OpenTelemetry: a span and a duration per Chronicarius operation, never content or ids.

The scenarios run in a process of their own (tests/telemetry/scenarios.py): a tracer provider,
once set, stays set for the whole process, and every later test would be traced.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCENARIOS = Path(__file__).parent / "telemetry" / "scenarios.py"


@pytest.fixture(scope="module")
def exported() -> dict[str, Any]:
    result = subprocess.run([sys.executable, str(SCENARIOS)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    exported: dict[str, Any] = json.loads(result.stdout)
    return exported


def test_each_operation_is_a_span_with_the_database_attributes(exported: dict[str, Any]) -> None:
    spans = exported["spans"][: exported["blocking"]]
    assert [span["name"] for span in spans] == [
        "chronica record_actum",
        "chronica record_acta",
        "chronica get_acta",
        "chronica get_acta",
        "chronica get_acta",
    ]
    record, batch, window, refused, _ = spans
    assert record["attributes"] == {
        "db.system.name": "memory",
        "db.operation.name": "record_actum",
        "chronica.acta.count": 1,
    }
    assert batch["attributes"]["chronica.acta.count"] == 2
    assert window["attributes"] == {
        "db.system.name": "memory",
        "db.operation.name": "get_acta",
        "chronica.query.last_n": 2,
        "chronica.acta.count": 2,
    }
    assert (refused["status"], refused["attributes"]["error.type"]) == ("ERROR", "ChronicumNotFound")
    assert [span["status"] for span in (record, batch, window)] == ["UNSET"] * 3


def test_asyncio_operations_are_spans_too(exported: dict[str, Any]) -> None:
    assert [span["name"] for span in exported["spans"][exported["blocking"] :]] == [
        "chronica record_actum",
        "chronica get_acta",
    ]


def test_no_span_or_metric_holds_content_an_owner_or_an_id(exported: dict[str, Any]) -> None:
    assert exported["leaked"] == []


def test_durations_go_to_the_histogram_by_operation_and_outcome(exported: dict[str, Any]) -> None:
    outcomes = {
        (point["attributes"]["db.operation.name"], point["attributes"].get("error.type"))
        for point in exported["points"]
    }
    assert {("record_actum", None), ("record_acta", None), ("get_acta", None)} <= outcomes
    assert ("get_acta", "ChronicumNotFound") in outcomes
    assert all(point["count"] >= 1 for point in exported["points"])


def test_nothing_is_recorded_without_a_tracer_provider() -> None:
    """This process has set none: an operation's telemetry hands the call through untouched."""
    from chronica_core import Chronicarius, MemoryStore

    chronicarius = Chronicarius(MemoryStore())
    telemetry = chronicarius._telemetry
    assert telemetry is not None
    assert telemetry.tracing() is False
    assert telemetry.run("get_acta", lambda: "called", len, 20) == "called"
    assert telemetry._tracer is None


@pytest.mark.parametrize("dry_run", [True, False])
def test_erase_idle_reports_no_acta_count(dry_run: bool) -> None:
    """erase_idle counts chronica, not acta: its span has no ``chronica.acta.count`` (as erase_owner)."""
    from datetime import UTC, datetime, timedelta

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, MemoryStore

    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # this Chronicarius's own: the process's global provider stays unset
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    chronicarius = Chronicarius(MemoryStore(), tracer_provider=provider)
    for content in ("one", "two", "three"):
        chronicarius.record_actum(
            "ardian", Actum("idle", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content)
        )
    before = datetime.now(UTC) + timedelta(seconds=1)
    assert chronicarius.erase_idle(before=before, owner_id="ardian", dry_run=dry_run) == 1
    span = exporter.get_finished_spans()[-1]
    assert span.name == "chronica erase_idle"
    assert dict(span.attributes or {}) == {"db.system.name": "memory", "db.operation.name": "erase_idle"}
