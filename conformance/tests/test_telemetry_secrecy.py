"""The telemetry check catches a leaky span or metric, and passes what Chronica really exports."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from chronica_conformance.log_secrecy import (
    CONTENT,
    OWNER,
    TelemetryCapture,
    assert_telemetry_keeps_secrets,
    play,
)

from chronica_core import Chronicarius, MemoryStore

pytest.importorskip(
    "opentelemetry.sdk.trace", reason="the py311-memory environment installs opentelemetry-sdk"
)

CHRONICUM = "conformance-telemetry-5d1f"


@pytest.fixture
def capture() -> Iterator[TelemetryCapture]:
    capture = TelemetryCapture()
    yield capture
    capture.shutdown()


def _named_after_the_chronicum(capture: TelemetryCapture) -> None:
    capture.tracer_provider.get_tracer("leaky").start_span(f"chronica get_acta {CHRONICUM}").end()


def _owner_as_attribute(capture: TelemetryCapture) -> None:
    span = capture.tracer_provider.get_tracer("leaky").start_span("chronica get_acta")
    span.set_attribute("chronica.owner", OWNER)
    span.end()


def _content_in_an_event(capture: TelemetryCapture) -> None:
    span = capture.tracer_provider.get_tracer("leaky").start_span("chronica record_actum")
    span.add_event("recorded", {"chronica.content": f"{CONTENT} 1"})
    span.end()


def _owner_in_a_metric_point(capture: TelemetryCapture) -> None:
    histogram = capture.meter_provider.get_meter("leaky").create_histogram("db.client.operation.duration")
    histogram.record(0.001, {"db.operation.name": "get_acta", "chronica.owner": OWNER})


@pytest.mark.parametrize(
    "leak",
    [_named_after_the_chronicum, _owner_as_attribute, _content_in_an_event, _owner_in_a_metric_point],
    ids=["span-name", "span-attribute", "span-event", "metric-attribute"],
)
def test_a_leaky_span_or_metric_fails_the_check(
    capture: TelemetryCapture, leak: Callable[[TelemetryCapture], None]
) -> None:
    leak(capture)
    with pytest.raises(AssertionError, match="shows"):
        assert_telemetry_keeps_secrets(capture, [OWNER, CHRONICUM])


def test_what_chronica_exports_passes_the_check(capture: TelemetryCapture) -> None:
    chronicarius = Chronicarius(
        MemoryStore(), tracer_provider=capture.tracer_provider, meter_provider=capture.meter_provider
    )
    written = play(chronicarius, CHRONICUM, "conformance-telemetry-other", owner=OWNER)
    assert capture.span_names()[:3] == ["chronica record_actum"] * 3
    assert "chronica erase_owner" in capture.span_names()
    assert [what for what, _ in capture.exported()][-1] == "the metrics"
    assert_telemetry_keeps_secrets(capture, [OWNER, CHRONICUM, *(actum.id for actum in written)])
