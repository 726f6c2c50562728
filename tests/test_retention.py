"""Retention: erase_idle erases the chronica idle since a moment, in steps, keeping what is written to."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncMemoryStore,
    CapabilityUnsupported,
    Chronicarius,
    ChronicumNotFound,
    EmptyOwnerID,
    InvalidQuery,
    MemoryStore,
)
from chronica_core.retention import IDLE_PAGE


def say(chronicum_id: str, owner: str, text: str = "hello") -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, owner, text)


@pytest.fixture
def chronicarius() -> Chronicarius:
    return Chronicarius(MemoryStore())


def test_it_erases_what_is_idle_and_keeps_what_is_not(chronicarius: Chronicarius) -> None:
    for number in range(3):
        chronicarius.record_actum("ardian", say(f"old-{number}", "ardian"))
    cutoff = datetime.now(UTC)
    chronicarius.record_actum("ardian", say("fresh", "ardian"))
    chronicarius.record_actum("rafa", say("rafa-fresh", "rafa"))
    assert chronicarius.erase_idle(before=cutoff, dry_run=True) == 3
    assert len(chronicarius.get_acta("ardian", "old-0")) == 1  # a dry run erases nothing
    assert chronicarius.erase_idle(before=cutoff) == 3
    for number in range(3):
        with pytest.raises(ChronicumNotFound):
            chronicarius.get_acta("ardian", f"old-{number}")
    assert [actum.content for actum in chronicarius.get_acta("ardian", "fresh")] == ["hello"]
    assert chronicarius.erase_idle(before=cutoff) == 0


def test_one_owner_only_when_asked(chronicarius: Chronicarius) -> None:
    chronicarius.record_actum("ardian", say("a", "ardian"))
    chronicarius.record_actum("rafa", say("r", "rafa"))
    cutoff = datetime.now(UTC)
    assert chronicarius.erase_idle(before=cutoff, owner_id="ardian") == 1
    assert len(chronicarius.get_acta("rafa", "r")) == 1
    with pytest.raises(ChronicumNotFound):
        chronicarius.get_acta("ardian", "a")


def test_more_than_a_page_is_erased_in_steps(chronicarius: Chronicarius) -> None:
    for number in range(IDLE_PAGE * 2 + 7):
        chronicarius.record_actum("ardian", say(f"c-{number}", "ardian"))
    assert chronicarius.erase_idle(before=datetime.now(UTC)) == IDLE_PAGE * 2 + 7
    assert chronicarius.list_chronica("ardian").chronica == []


def test_an_erased_id_stays_its_owner_s(chronicarius: Chronicarius) -> None:
    chronicarius.record_actum("ardian", say("kept-id", "ardian"))
    assert chronicarius.erase_idle(before=datetime.now(UTC)) == 1
    with pytest.raises(ChronicumNotFound):
        chronicarius.record_actum("rafa", say("kept-id", "rafa"))
    chronicarius.record_actum("ardian", say("kept-id", "ardian", "again"))  # a fresh chronicum
    assert [actum.content for actum in chronicarius.get_acta("ardian", "kept-id")] == ["again"]


def test_a_source_with_an_active_fork_is_kept_with_it(chronicarius: Chronicarius) -> None:
    chronicarius.record_actum("ardian", say("source", "ardian"))
    fork = chronicarius.fork_chronicum("ardian", "source")
    cutoff = datetime.now(UTC)
    chronicarius.record_actum("ardian", say(fork.id, "ardian", "the fork goes on"))
    assert chronicarius.erase_idle(before=cutoff) == 0  # the source shares its acta with an active fork
    assert [actum.content for actum in chronicarius.get_acta("ardian", fork.id)] == [
        "hello",
        "the fork goes on",
    ]
    assert chronicarius.erase_idle(before=datetime.now(UTC)) == 2  # both idle now: the fork goes with it


def test_bad_arguments_are_refused_before_anything(chronicarius: Chronicarius) -> None:
    chronicarius.record_actum("ardian", say("a", "ardian"))
    with pytest.raises(InvalidQuery) as naive:
        chronicarius.erase_idle(before=datetime.now() - timedelta(days=1))
    assert naive.value.field == "before"
    with pytest.raises(EmptyOwnerID):
        chronicarius.erase_idle(before=datetime.now(UTC), owner_id="")
    assert len(chronicarius.get_acta("ardian", "a")) == 1


def test_a_store_without_the_capability_is_refused() -> None:
    from chronica_notebook.plugin import NotebookStore

    with pytest.raises(CapabilityUnsupported) as refused:
        Chronicarius(NotebookStore()).erase_idle(before=datetime.now(UTC))
    assert refused.value.capability == "retention"


def test_the_asyncio_flavour_erases_alike() -> None:
    async def scenario() -> int:
        chronicarius = AsyncChronicarius(AsyncMemoryStore())
        await chronicarius.record_actum("ardian", say("a", "ardian"))
        return await chronicarius.erase_idle(before=datetime.now(UTC))

    assert asyncio.run(scenario()) == 1


@pytest.mark.parametrize("dry_run", ["no", "false", None, 1])
def test_a_dry_run_that_is_not_a_bool_is_refused_and_erases_nothing(
    chronicarius: Chronicarius, dry_run: object
) -> None:
    chronicarius.record_actum("ardian", say("c", "ardian"))
    with pytest.raises(InvalidQuery) as raised:
        chronicarius.erase_idle(before=datetime.now(UTC) + timedelta(days=1), dry_run=dry_run)  # type: ignore[arg-type]
    assert raised.value.field == "dry_run"
    assert str(raised.value) == f"invalid query: dry_run: must be a bool, not {type(dry_run).__name__}"
    assert [actum.content for actum in chronicarius.get_acta("ardian", "c")] == ["hello"]
