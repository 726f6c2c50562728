"""A store opened with ``encryption_keys`` keeps no content or native data in plaintext in Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import store_options

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    Native,
    Span,
    Store,
    open_store,
)
from chronica_core.encryption import DerivedKeys
from chronica_core.history import RangeRead, Segment, WindowReads

SECRET = "the door code is 4711"
NATIVE_SECRET = '{"note": "the door code is 4711"}'
OWNER = "ardian"


@pytest.fixture
def encrypted(redis_url: str, prefix: str) -> Iterator[Store]:
    keys = DerivedKeys({"k1": b"m" * 32}, current="k1")
    with open_store(redis_url, prefix=prefix, encryption_keys=keys, **store_options()) as store:
        yield store


def _values(raw: Any, key: str) -> list[str]:
    """Every name and value a key holds, whatever its type."""
    kind = raw.type(key)
    if kind == "stream":
        return [text for _, fields in raw.xrange(key) for pair in fields.items() for text in pair]
    if kind == "hash":
        return [text for pair in raw.hgetall(key).items() for text in pair]
    if kind == "list":
        return list(raw.lrange(key, 0, -1))
    if kind == "set":
        return list(raw.smembers(key))
    if kind == "zset":
        return list(raw.zrange(key, 0, -1))
    return [raw.get(key)]


def test_content_and_native_data_are_sealed(encrypted: Store, redis_url: str, prefix: str) -> None:
    """Acta, a batch, a summary and a fork written through the encrypted store: no key holds the secret."""
    chronicarius = Chronicarius(encrypted)
    said = Actum(
        "sealed", ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, SECRET, native=Native("app.item", NATIVE_SECRET)
    )
    first = chronicarius.record_actum(OWNER, said)
    batch = chronicarius.record_acta(
        OWNER,
        [Actum("sealed", ActumKind.THOUGHT, ActorKind.AGENT, "bot", f"{SECRET} again") for _ in range(2)],
    )
    summary = Actum(
        "sealed",
        ActumKind.MESSAGE,
        ActorKind.AGENT,
        "bot",
        f"in short: {SECRET}",
        summarizes=Span(first.id, batch[0].id),
    )
    chronicarius.record_actum(OWNER, summary)
    fork = chronicarius.fork_chronicum(OWNER, "sealed")
    chronicarius.record_actum(OWNER, Actum(fork.id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, SECRET))
    window = chronicarius.get_acta(OWNER, "sealed", view="as_written")
    assert [actum.content for actum in window][:3] == [SECRET, f"{SECRET} again", f"{SECRET} again"]
    assert window[0].native == Native("app.item", NATIVE_SECRET)
    with open_store(redis_url, prefix=prefix, **store_options()) as plain:
        raw = plain.client  # type: ignore[attr-defined]
        names = list(raw.scan_iter(match=f"{prefix}:*", count=1000))
        assert len(names) > 10
        held = [text for name in names for text in _values(raw, name)]
        assert [text for text in held if "4711" in text] == []
        whole = WindowReads((RangeRead(Segment("sealed", 0, None), None, None, 0, True, True),))
        rows = plain.window("sealed", whole)  # type: ignore[attr-defined]
    assert len(rows.acta) == 4 and all("4711" not in actum.content for actum in rows.acta)
    assert rows.acta[0].native is not None and "4711" not in rows.acta[0].native.data
