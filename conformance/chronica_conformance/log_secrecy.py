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
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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

__all__ = [
    "ACTOR",
    "CONTENT",
    "INTRUDER",
    "KEY",
    "OWNER",
    "assert_records_keep_secrets",
    "capturing",
    "identifiers",
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


def _play(chronicarius: Chronicarius, chronicum_id: str, other_id: str) -> None:
    chronicarius.record_actum(OWNER, _actum(chronicum_id, 1))
    chronicarius.record_actum(OWNER, _actum(chronicum_id, 2), idempotency_key=KEY)
    chronicarius.record_actum(OWNER, _actum(chronicum_id, 3), idempotency_key=KEY)  # a retry
    chronicarius.record_acta(OWNER, [_actum(chronicum_id, 4), _actum(chronicum_id, 5)])
    chronicarius.get_acta(OWNER, chronicum_id, actum_kinds=[ActumKind.MESSAGE], last_n=3)
    chronicarius.get_chronicum(OWNER, chronicum_id)
    chronicarius.list_chronica(OWNER, limit=10)
    for refused in (
        lambda: chronicarius.get_acta(INTRUDER, chronicum_id),
        lambda: chronicarius.get_chronicum(INTRUDER, chronicum_id),
        lambda: chronicarius.record_actum(INTRUDER, _actum(chronicum_id, 6)),
        lambda: chronicarius.erase_chronicum(INTRUDER, chronicum_id),
    ):
        try:
            refused()
        except ChronicumNotFound:
            pass
        else:
            raise AssertionError("another owner's chronicum was not refused")
    chronicarius.record_actum(OWNER, _actum(other_id, 7))
    chronicarius.erase_chronicum(OWNER, chronicum_id)
    chronicarius.erase_owner(OWNER)


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
            _play(Chronicarius(store), ids[0], ids[1])
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
