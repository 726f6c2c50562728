"""What Chronica's log records may show, checked through a whole scenario on a store.

:func:`scenario_records` opens a store with ``open_store`` and ``open_async_store``, plays every
operation of :class:`chronica_core.Chronicarius` on it (writes, a keyed retry, a batch, reads, a
listing, another owner refused reading and writing, erasure) and returns every record the
``chronica`` loggers wrote, at every level from DEBUG. :func:`assert_records_keep_secrets` then
checks the rules of the logging documentation (``docs/how-to/logging.md``):

- no record, at any level, shows the URL's password (any spelling, as
  :func:`chronica_conformance.secrecy.leaked` finds it) or an actum's content;
- records at INFO and above show no owner id, chronicum id, actor or idempotency key (only DEBUG
  records may, for whoever turns DEBUG on to trace one call).

The same holds for what OpenTelemetry exports (``docs/how-to/governance.md``): a
:class:`TelemetryCapture` (the SDK's in-memory span exporter and metric reader, on providers of
its own, given to one Chronicarius) gathers the spans and duration points of the scenario, and
:func:`assert_telemetry_keeps_secrets` checks that no span name, attribute, event, link or status,
and no metric name or point attribute, shows content, an owner, an actor, an idempotency key, a
chronicum id or an actum id. The conformance suite runs it on every store
(:class:`chronica_conformance.telemetry_contract.TelemetryContract`) when ``opentelemetry-sdk`` is
installed.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from chronica_conformance.secrecy import leaked
from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    Chronicarius,
    ChronicumNotFound,
    open_async_store,
    open_store,
)
from chronica_core.capabilities import BATCH, ERASURE, IDEMPOTENCY, LISTING

__all__ = [
    "ACTOR",
    "CONTENT",
    "INTRUDER",
    "KEY",
    "OWNER",
    "Operations",
    "TelemetryCapture",
    "assert_records_keep_secrets",
    "assert_telemetry_keeps_secrets",
    "capturing",
    "identifiers",
    "play",
    "scenario_records",
]

OWNER = "owner-ardian-7f3a"
"""The owner of the scenario's chronica: shown in DEBUG records only."""

INTRUDER = "owner-rafa-9c1b"
"""The owner refused another owner's chronicum: shown in DEBUG records only."""

ACTOR = "actor-concierge-5e0d"
KEY = "key-booking-2b6c"
CONTENT = "content-never-logged-4d2e"
"""Part of every actum's content: shown in no record at all."""


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def capturing() -> Iterator[list[logging.LogRecord]]:
    """Gather every record of the ``chronica`` loggers, DEBUG and up, written inside."""
    collector = _Collector()
    chronica = logging.getLogger("chronica")
    level = chronica.level
    chronica.addHandler(collector)
    chronica.setLevel(logging.DEBUG)
    try:
        yield collector.records
    finally:
        chronica.removeHandler(collector)
        chronica.setLevel(level)


def _actum(chronicum_id: str, index: int) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, ACTOR, f"{CONTENT} {index}")


def identifiers(chronicum_ids: list[str]) -> list[str]:
    """What records at INFO and above must not show: the owners, actor, key and chronicum ids."""
    return [OWNER, INTRUDER, ACTOR, KEY, *chronicum_ids]


class Operations(Protocol):
    """What :func:`play` calls: a :class:`~chronica_core.Chronicarius`, or the conformance harness."""

    def record_actum(self, owner_id: str, actum: Actum, *, idempotency_key: str | None = None) -> Actum:
        """See :meth:`chronica_core.Chronicarius.record_actum`."""

    def record_acta(self, owner_id: str, acta: Sequence[Actum], *, idempotency_key: str | None = None) -> Any:
        """See :meth:`chronica_core.Chronicarius.record_acta`."""

    def get_acta(
        self, owner_id: str, chronicum_id: str, *, actum_kinds: Any = None, last_n: int = 0
    ) -> list[Actum]:
        """See :meth:`chronica_core.Chronicarius.get_acta`."""

    def get_chronicum(self, owner_id: str, chronicum_id: str) -> Any:
        """See :meth:`chronica_core.Chronicarius.get_chronicum`."""

    def list_chronica(self, owner_id: str, *, limit: int = 50) -> Any:
        """See :meth:`chronica_core.Chronicarius.list_chronica`."""

    def erase_chronicum(self, owner_id: str, chronicum_id: str) -> int:
        """See :meth:`chronica_core.Chronicarius.erase_chronicum`."""

    def erase_owner(self, owner_id: str) -> int:
        """See :meth:`chronica_core.Chronicarius.erase_owner`."""


def play(
    operations: Operations,
    chronicum_id: str,
    other_id: str,
    owner: str = OWNER,
    intruder: str = INTRUDER,
    capabilities: Collection[str] | None = None,
) -> list[Actum]:
    """Play the scenario's blocking part on ``operations``; return the acta it recorded.

    ``owner`` writes ``chronicum_id`` (a keyed write and its retry, a batch), reads it (a filtered
    window, the chronicum, a listing), ``intruder`` is refused reading, writing and erasing it,
    then ``owner`` writes ``other_id``, erases ``chronicum_id`` and all their chronica.

    Args:
        operations: a Chronicarius, or the conformance harness.
        chronicum_id: the chronicum written, read, refused and erased.
        other_id: another chronicum of ``owner``'s, erased with all of theirs.
        owner: the owner of both.
        intruder: another owner, refused.
        capabilities: what the store has (:func:`chronica_core.capabilities.store_capabilities`):
            a step needing another one (the keyed writes, the batch, the listing, the erasures) is
            left out; ``None``: the store has them all.

    Raises:
        AssertionError: ``intruder`` was not refused.
    """

    def has(capability: str) -> bool:
        return capabilities is None or capability in capabilities

    written = [operations.record_actum(owner, _actum(chronicum_id, 1))]
    if has(IDEMPOTENCY):
        written.append(operations.record_actum(owner, _actum(chronicum_id, 2), idempotency_key=KEY))
        operations.record_actum(owner, _actum(chronicum_id, 3), idempotency_key=KEY)  # a retry
    if has(BATCH):
        written.extend(operations.record_acta(owner, [_actum(chronicum_id, 4), _actum(chronicum_id, 5)]))
    operations.get_acta(owner, chronicum_id, actum_kinds=[ActumKind.MESSAGE], last_n=3)
    operations.get_chronicum(owner, chronicum_id)
    if has(LISTING):
        operations.list_chronica(owner, limit=10)
    refusals: list[Callable[[], object]] = [
        lambda: operations.get_acta(intruder, chronicum_id),
        lambda: operations.get_chronicum(intruder, chronicum_id),
        lambda: operations.record_actum(intruder, _actum(chronicum_id, 6)),
    ]
    if has(ERASURE):
        refusals.append(lambda: operations.erase_chronicum(intruder, chronicum_id))
    for refused in refusals:
        try:
            refused()
        except ChronicumNotFound:
            pass
        else:
            raise AssertionError("another owner's chronicum was not refused")
    written.append(operations.record_actum(owner, _actum(other_id, 7)))
    if has(ERASURE):
        operations.erase_chronicum(owner, chronicum_id)
        operations.erase_owner(owner)
    return written


async def _play_async(url: str, options: dict[str, Any], chronicum_id: str) -> None:
    store = open_async_store(url, **options)
    try:
        chronicarius = AsyncChronicarius(store)
        await chronicarius.record_actum(OWNER, _actum(chronicum_id, 8), idempotency_key=KEY)
        await chronicarius.get_acta(OWNER, chronicum_id, last_n=2)
        try:
            await chronicarius.get_acta(INTRUDER, chronicum_id)
        except ChronicumNotFound:
            pass
        else:
            raise AssertionError("another owner's chronicum was not refused")
        await chronicarius.erase_owner(OWNER)
    finally:
        await store.close()


def scenario_records(url: str, **options: Any) -> tuple[list[logging.LogRecord], list[str]]:
    """Play the scenario on ``url`` (blocking, then asyncio); return the records and chronicum ids.

    ``options`` go to both openers. The store must have every capability (batches, listing,
    erasure, idempotency), as the bundled ones do.
    """
    ids = [f"chronicum-{uuid.uuid4().hex}" for _ in range(3)]
    with capturing() as records:
        with open_store(url, **options) as store:
            play(Chronicarius(store), ids[0], ids[1])
        asyncio.run(_play_async(url, dict(options), ids[2]))
    return list(records), ids


def _shown(record: logging.LogRecord) -> str:
    """Everything a handler could print of ``record``: its message, its exception and its stack."""
    parts = [record.getMessage(), str(record.args)]
    if record.exc_info:
        parts.append(logging.Formatter().formatException(record.exc_info))
    if record.exc_text:
        parts.append(record.exc_text)
    if record.stack_info:
        parts.append(record.stack_info)
    return "\n".join(parts)


def assert_records_keep_secrets(
    records: list[logging.LogRecord], chronicum_ids: list[str], password: str | None = None
) -> None:
    """Assert the rules of the module docstring for ``records`` (``password``: a literal one, too).

    Also asserts that each record comes from a ``chronica`` logger.
    """
    for record in records:
        text = _shown(record)
        where = f"{record.name} {record.levelname} {record.getMessage()!r}"
        assert record.name == "chronica" or record.name.startswith("chronica."), where
        assert not leaked(text), f"{where} shows the URL's password"
        if password:
            assert password not in text, f"{where} shows the password"
        assert CONTENT not in text, f"{where} shows an actum's content"
        if record.levelno >= logging.INFO:
            shown = [name for name in identifiers(chronicum_ids) if name in text]
            assert not shown, f"{where} shows {shown} at {record.levelname}"


class TelemetryCapture:
    """An OpenTelemetry SDK tracer provider and meter provider of their own, exporting to memory.

    Give :attr:`tracer_provider` and :attr:`meter_provider` to one Chronicarius
    (``Chronicarius(store, tracer_provider=..., meter_provider=...)``): the app's global providers
    are left alone. Needs ``opentelemetry-sdk``.

    Raises:
        ModuleNotFoundError: ``opentelemetry-sdk`` is not installed.
    """

    def __init__(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self._exporter = InMemorySpanExporter()
        self._reader = InMemoryMetricReader()
        self.tracer_provider: Any = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self._exporter))
        self.meter_provider: Any = MeterProvider(metric_readers=[self._reader])

    def span_names(self) -> list[str]:
        """The names of the spans ended so far, in the order they ended."""
        return [span.name for span in self._exporter.get_finished_spans()]

    def exported(self) -> list[tuple[str, str]]:
        """Everything exported so far, as ``(what, its JSON)``: each span, then the metrics.

        A span's JSON holds its name, attributes, events, links, status and resource; the
        metrics' JSON every metric's name and each data point's attributes.
        """
        shown = [(f"span {span.name!r}", span.to_json()) for span in self._exporter.get_finished_spans()]
        metrics = self._reader.get_metrics_data()
        if metrics is not None:
            shown.append(("the metrics", metrics.to_json()))
        return shown

    def shutdown(self) -> None:
        """Shut both providers down (their processors and reader)."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def assert_telemetry_keeps_secrets(capture: TelemetryCapture, secrets: Sequence[str]) -> None:
    """Assert that nothing ``capture`` exported shows content, a URL's password or any of ``secrets``.

    Args:
        capture: what a scenario exported.
        secrets: the owner ids, actors, idempotency keys, chronicum ids and actum ids it used.

    Raises:
        AssertionError: naming the span (or the metrics) and what it shows.
    """
    for what, text in capture.exported():
        assert CONTENT not in text, f"{what} shows an actum's content"
        assert not leaked(text), f"{what} shows a URL's password"
        shown = [secret for secret in secrets if secret in text]
        assert not shown, f"{what} shows {shown}"
