"""OpenTelemetry for every ``Chronicarius`` operation: a span and a duration, when the app traces.

Optional (``pip install 'chronica[otel]'``: ``opentelemetry-api`` only; the app brings the SDK and
its exporters). When the app has set a tracer provider (or gave one to the ``Chronicarius``:
its ``tracer_provider`` and ``meter_provider`` arguments), each operation of a ``Chronicarius`` or an
``AsyncChronicarius`` (``record_actum``, ``record_acta``, ``get_acta``, ``get_actum``,
``get_chronicum``, ``list_chronica``, ``fork_chronicum``, ``erase_chronicum``, ``erase_owner``,
``erase_idle``)
is a span named ``chronica <operation>``, and its duration goes to the histogram
``db.client.operation.duration`` (seconds) of the app's meter provider. Attributes follow OpenTelemetry's
database conventions where they fit:

- ``db.system.name``: the store's backend (``postgres``, ``sqlalchemy``, ``memory``, ...);
- ``db.operation.name``: the operation;
- ``chronica.acta.count``: how many acta it wrote, read or erased (a window's size;
  ``record_acta``'s batch; ``erase_chronicum``'s count), where it has one (``erase_owner`` and
  ``erase_idle`` count chronica, and have none); ``chronica.query.last_n``: the ``last_n`` a window asked for;
- ``error.type``: the class of the error it raised, if any (the span's status is then ERROR).

Never content, owner ids, chronicum ids or actum ids: nothing that says who said what. Without a
tracer provider set (or without ``opentelemetry-api``) an operation costs one check more and
records nothing (see :data:`PROVIDER_CHECK_INTERVAL`).
"""

from __future__ import annotations

import functools
import importlib.util
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

__all__ = ["INSTRUMENTATION_NAME", "PROVIDER_CHECK_INTERVAL", "Telemetry", "telemetry_for"]

INSTRUMENTATION_NAME: Final = "chronica"
"""The name Chronica's tracer and meter are given."""

PROVIDER_CHECK_INTERVAL: Final = 1.0
"""Seconds between two looks for the app's tracer provider while none is set: a ``Chronicarius``
made after the provider is set traces from its first operation, one made before within a second."""

Result = TypeVar("Result")
Counter = Callable[[Any], int | None]
"""Says how many acta an operation's result holds (``None``: nothing to count)."""


class Telemetry:
    """Spans and durations for one ``Chronicarius``; made by :func:`telemetry_for`.

    Args:
        backend: the store's backend name (``db.system.name``).
        tracer_provider: the tracer provider to use instead of the app's global one (an SDK
            ``TracerProvider``); ``None``: the global one, once the app sets it.
        meter_provider: the meter provider for the duration histogram; ``None``: the global one.
    """

    def __init__(self, backend: str, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        from opentelemetry import metrics, trace

        self._trace = trace
        self._metrics = metrics
        self._backend = backend
        self._tracer: Any = None
        self._histogram: Any = None
        self._next_check = 0.0
        if tracer_provider is not None:
            self._start(tracer_provider, meter_provider)

    def tracing(self) -> bool:
        """Whether the app has set a tracer provider: operations are then traced and timed.

        A tracer provider, once set, stays set; until then it is looked for at most once every
        :data:`PROVIDER_CHECK_INTERVAL` seconds (the lookup reads the environment).
        """
        if self._tracer is not None:
            return True
        now = time.monotonic()
        if now < self._next_check:
            return False
        self._next_check = now + PROVIDER_CHECK_INTERVAL
        provider = self._trace.get_tracer_provider()
        if isinstance(provider, self._trace.ProxyTracerProvider):
            return False
        self._start(provider, None)
        return True

    def _start(self, tracer_provider: Any, meter_provider: Any) -> None:
        """Take the tracer and the duration histogram from the providers (``None``: the global one)."""
        self._histogram = self._metrics.get_meter(
            INSTRUMENTATION_NAME, meter_provider=meter_provider
        ).create_histogram(
            "db.client.operation.duration", unit="s", description="Duration of Chronica operations."
        )
        self._tracer = self._trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=tracer_provider)

    def _attributes(self, operation: str, last_n: int | None) -> dict[str, Any]:
        attributes: dict[str, Any] = {"db.system.name": self._backend, "db.operation.name": operation}
        if last_n is not None:
            attributes["chronica.query.last_n"] = last_n if isinstance(last_n, int) and last_n > 0 else 0
        return attributes

    def run(
        self, operation: str, call: Callable[[], Result], count: Counter | None, last_n: int | None
    ) -> Result:
        """Run ``call()`` inside the operation's span and duration (after :meth:`tracing` said so).

        ``count`` tells how many acta the result holds; ``last_n`` is a window's (``None``: none).
        """
        if not self.tracing():
            return call()
        tracer, histogram = self._tracer, self._histogram
        attributes = self._attributes(operation, last_n)
        started = time.perf_counter()
        span = tracer.start_span(f"chronica {operation}", attributes=attributes)
        try:
            result = call()
        except BaseException as error:
            self._failed(span, histogram, attributes, started, error)
            raise
        self._done(span, histogram, attributes, started, None if count is None else count(result))
        return result

    async def run_async(
        self, operation: str, call: Callable[[], Awaitable[Result]], count: Counter | None, last_n: int | None
    ) -> Result:
        """:meth:`run` for a coroutine: await ``call()`` inside the operation's span and duration."""
        if not self.tracing():
            return await call()
        tracer, histogram = self._tracer, self._histogram
        attributes = self._attributes(operation, last_n)
        started = time.perf_counter()
        span = tracer.start_span(f"chronica {operation}", attributes=attributes)
        try:
            result = await call()
        except BaseException as error:
            self._failed(span, histogram, attributes, started, error)
            raise
        self._done(span, histogram, attributes, started, None if count is None else count(result))
        return result

    def _done(
        self, span: Any, histogram: Any, attributes: dict[str, Any], started: float, count: int | None
    ) -> None:
        histogram.record(time.perf_counter() - started, attributes)
        if count is not None:
            span.set_attribute("chronica.acta.count", count)
        span.end()

    def _failed(
        self, span: Any, histogram: Any, attributes: dict[str, Any], started: float, error: BaseException
    ) -> None:
        failed = {**attributes, "error.type": type(error).__qualname__}
        histogram.record(time.perf_counter() - started, failed)
        span.set_attribute("error.type", failed["error.type"])
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
        span.end()


def telemetry_for(store: object, tracer_provider: Any = None, meter_provider: Any = None) -> Telemetry | None:
    """A :class:`Telemetry` for a Chronicarius over ``store``; ``None`` without ``opentelemetry-api``.

    ``tracer_provider`` and ``meter_provider``: as :class:`Telemetry` takes them.

    Raises:
        ModuleNotFoundError: a ``tracer_provider`` was given and ``opentelemetry-api`` is not installed.
    """
    if tracer_provider is not None:
        return Telemetry(_backend(store), tracer_provider, meter_provider)
    if not _api_installed():
        return None
    try:
        return Telemetry(_backend(store))
    except ModuleNotFoundError:
        return None


def _backend(store: object) -> str:
    return str(getattr(store, "backend_name", type(store).__name__))


@functools.cache
def _api_installed() -> bool:
    """Whether ``opentelemetry-api`` is installed, looked up once a process.

    A failed import searches the whole path again each time it is tried.
    """
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except ModuleNotFoundError:  # no opentelemetry package at all
        return False
