"""The telemetry contract: what a store's operations export to OpenTelemetry shows no secret.

Every case gives a Chronicarius over the store under test an OpenTelemetry SDK tracer provider and
meter provider of its own (:class:`chronica_conformance.log_secrecy.TelemetryCapture`: the app's
global ones are left alone), plays the logging scenario of
:mod:`chronica_conformance.log_secrecy` on fresh owners (and, where the store has them, a fork, an
actum read by id and a retention dry run), and checks every exported span and duration point.
Skipped, saying why, where ``opentelemetry-sdk`` or ``opentelemetry-api`` is not installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from chronica_conformance.base import SuiteBase, new_id, new_owner
from chronica_conformance.harness import Harness, rules_call
from chronica_conformance.log_secrecy import (
    ACTOR,
    CONTENT,
    KEY,
    TelemetryCapture,
    assert_telemetry_keeps_secrets,
    play,
)
from chronica_core import ActorKind, Actum, ActumKind
from chronica_core.capabilities import BATCH, ERASURE, HISTORY, LISTING, RETENTION

__all__ = ["TelemetryContract"]


def _sdk_installed() -> bool:
    try:
        return importlib.util.find_spec("opentelemetry.sdk.trace") is not None
    except ModuleNotFoundError:  # no opentelemetry package at all
        return False


class TelemetryContract(SuiteBase):
    """Spans and metrics name the backend, the operation, counts and the outcome, never who or what."""

    @pytest.fixture
    def telemetry(self) -> Iterator[TelemetryCapture]:
        """Providers of the case's own, exporting to memory (skips without ``opentelemetry-sdk``)."""
        if not _sdk_installed():
            pytest.skip("opentelemetry-sdk is not installed, so the telemetry contract does not apply")
        capture = TelemetryCapture()
        yield capture
        capture.shutdown()

    def test_spans_and_metrics_show_no_content_owner_or_id(
        self, chronica_harness: Harness, telemetry: TelemetryCapture
    ) -> None:
        """Every operation's span and duration point: no content, owner, actor, key, chronicum or actum id."""
        harness = chronica_harness.with_chronicarius(
            tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider
        )
        owner, intruder = new_owner("telemetry"), new_owner("intruder")
        ids = [new_id("telemetry") for _ in range(3)]
        written = _history_and_retention(harness, owner, ids[2])
        capabilities = harness.capabilities
        written += play(harness, ids[0], ids[1], owner=owner, intruder=intruder, capabilities=capabilities)
        names = set(telemetry.span_names())
        played = {"record_actum", "get_acta", "get_chronicum"}
        played |= {"record_acta"} if BATCH in capabilities else set()
        played |= {"list_chronica"} if LISTING in capabilities else set()
        played |= {"erase_chronicum", "erase_owner"} if ERASURE in capabilities else set()
        assert {f"chronica {operation}" for operation in played} <= names, f"spans exported: {sorted(names)}"
        secrets = [owner, intruder, ACTOR, KEY, *ids, *(actum.id for actum in written)]
        secrets += [actum.chronicum_id for actum in written]
        assert_telemetry_keeps_secrets(telemetry, secrets)


def _history_and_retention(harness: Harness, owner: str, chronicum_id: str) -> list[Actum]:
    """A fork, an actum read by id and a retention dry run, where the store has them; the acta written."""
    first = harness.record_actum(
        owner, Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, ACTOR, f"{CONTENT} 0")
    )
    written = [first]
    if HISTORY in harness.capabilities:
        harness.get_actum(owner, chronicum_id, first.id)
        fork = harness.fork_chronicum(owner, chronicum_id, at=first.id)
        written.append(
            harness.record_actum(
                owner, Actum(fork.id, ActumKind.MESSAGE, ActorKind.AGENT, ACTOR, f"{CONTENT} f")
            )
        )
    if RETENTION in harness.capabilities:
        harness.perform(rules_call("erase_idle", before=datetime.now(UTC), owner_id=owner, dry_run=True))
    return written
