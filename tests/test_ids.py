"""Fresh ids: ``new_chronicum_id`` gives unguessable chronicum ids of the actum ids' shape."""

from __future__ import annotations

import re

import pytest

import chronica_core
from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    ChronicumNotFound,
    MemoryStore,
    new_actum_id,
    new_chronicum_id,
)
from chronica_core import ids as ids_module

HEX_128 = re.compile(r"[0-9a-f]{32}")


def test_a_chronicum_id_is_32_lowercase_hex_characters() -> None:
    for _ in range(200):
        assert HEX_128.fullmatch(new_chronicum_id())


def test_chronicum_ids_do_not_repeat() -> None:
    assert len({new_chronicum_id() for _ in range(10_000)}) == 10_000


def test_chronicum_ids_use_every_bit() -> None:
    """Over 2,000 ids each of the 128 bits is seen both set and clear (random bits, not a counter)."""
    every_bit = (1 << 128) - 1
    ored, anded = 0, every_bit
    for _ in range(2_000):
        value = int(new_chronicum_id(), 16)
        ored |= value
        anded &= value
    assert ored == every_bit
    assert anded == 0


def test_chronicum_ids_come_from_the_actum_id_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """One generator for both kinds of id: replacing the actum ids' changes the chronicum ids."""
    monkeypatch.setattr(ids_module, "new_actum_id", lambda: "f" * 32)
    assert new_chronicum_id() == "f" * 32
    monkeypatch.undo()
    assert HEX_128.fullmatch(new_actum_id())


def test_new_chronicum_id_is_exported_from_the_core() -> None:
    assert "new_chronicum_id" in chronica_core.__all__
    assert chronica_core.new_chronicum_id is new_chronicum_id


def test_a_write_into_another_owners_id_is_refused_and_writes_nothing() -> None:
    """As the README says: a fresh id is created by its first writer; another owner's write fails."""
    chronicarius = Chronicarius(MemoryStore())
    lunch = new_chronicum_id()
    chronicarius.record_actum("ardian", Actum(lunch, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi"))
    with pytest.raises(ChronicumNotFound):
        chronicarius.record_actum("rafa", Actum(lunch, ActumKind.MESSAGE, ActorKind.HUMAN, "rafa", "hi"))
    assert [actum.actor for actum in chronicarius.get_acta("ardian", lunch)] == ["ardian"]
