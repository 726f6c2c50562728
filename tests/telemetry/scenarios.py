"""Chronicarius operations traced by an app's OpenTelemetry SDK, in a process of their own.

Run by tests/test_telemetry.py (a tracer provider, once set, stays set for the process): prints,
as JSON, the spans and duration points the scenarios exported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncMemoryStore,
    Chronicarius,
    ChronicumNotFound,
    MemoryStore,
)

SECRET_CONTENT = "my card number is 4111 1111"
OWNER = "owner-3f9a-secret"
CHRONICUM = "chronicum-7c1e-secret"
STRANGER = "someone-else"


def blocking() -> list[str]:
    chronicarius = Chronicarius(MemoryStore())
    chronicarius.record_actum(
        OWNER, Actum(CHRONICUM, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, SECRET_CONTENT)
    )
    thought = Actum(CHRONICUM, ActumKind.THOUGHT, ActorKind.AGENT, "concierge", SECRET_CONTENT)
    chronicarius.record_acta(OWNER, [thought, thought])
    chronicarius.get_acta(OWNER, CHRONICUM, last_n=2)
    with contextlib.suppress(ChronicumNotFound):
        chronicarius.get_acta(STRANGER, CHRONICUM)
    return [actum.id for actum in Chronicarius(chronicarius.store).get_acta(OWNER, CHRONICUM)]


async def asynchronous() -> None:
    chronicarius = AsyncChronicarius(AsyncMemoryStore())
    await chronicarius.record_actum(
        OWNER, Actum(CHRONICUM, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, SECRET_CONTENT)
    )
    await chronicarius.get_acta(OWNER, CHRONICUM)


def main() -> None:
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(tracing)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    ids = blocking()
    blocking_spans = len(exporter.get_finished_spans())
    asyncio.run(asynchronous())
    spans = [
        {"name": span.name, "attributes": dict(span.attributes or {}), "status": span.status.status_code.name}
        for span in exporter.get_finished_spans()
    ]
    data = reader.get_metrics_data()
    points: list[dict[str, Any]] = [
        {"attributes": dict(point.attributes or {}), "count": getattr(point, "count", 0)}
        for resource in (data.resource_metrics if data else ())
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "db.client.operation.duration"
        for point in metric.data.data_points
    ]
    exported = json.dumps([span.to_json() for span in exporter.get_finished_spans()]) + repr(data)
    leaked = [secret for secret in (SECRET_CONTENT, OWNER, CHRONICUM, STRANGER, *ids) if secret in exported]
    print(json.dumps({"spans": spans, "blocking": blocking_spans, "points": points, "leaked": leaked}))


if __name__ == "__main__":
    main()
