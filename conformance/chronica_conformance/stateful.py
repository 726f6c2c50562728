"""A hypothesis state machine that drives a Chronicarius over the store under test and a reference model.

Random ``record_actum`` / ``get_acta`` / ``get_chronicum`` calls by several owners, with and
without idempotency keys, valid and invalid, go to both; every answer and every error must agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from chronica_conformance.base import TIME_TOLERANCE, SuiteBase, assert_aware_utc, new_id, new_owner
from chronica_conformance.harness import Harness
from chronica_conformance.profiles import stateful_settings
from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    ChronicaError,
    ChronicumNotFound,
    EmptyOwnerID,
    IdempotencyUnsupported,
    InvalidActum,
)

__all__ = ["ReferenceModel", "StatefulRules"]

_HEX_ID = re.compile(r"[0-9a-f]{32}")

SPOILS = [
    "empty_owner",
    "empty_chronicum_id",
    "empty_actor",
    "unknown_kind",
    "unknown_actor_kind",
    "non_str_content",
    "lone_surrogate",
    "empty_key",
]
"""The one thing a generated ``record_actum`` call may get wrong (at most one per call)."""


@dataclass
class _ModelChronicum:
    owner_id: str
    acta: list[Actum] = field(default_factory=list)
    keyed: dict[str, Actum] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Refusal:
    """An error the model expects: its type and, for ``InvalidActum``, the field it names."""

    error: type[ChronicaError]
    field: str | None = None
    chronicum_id: str | None = None


class ReferenceModel:
    """Rules R1–R9 (``docs/contract.md``) in plain Python, over dictionaries; what a Chronicarius must answer.

    Args:
        idempotent: whether the store under test honours idempotency keys.
    """

    def __init__(self, *, idempotent: bool) -> None:
        self.idempotent = idempotent
        self.chronica: dict[str, _ModelChronicum] = {}

    def expect_record(
        self, owner_id: str, actum: Actum, key: str | None, spoil: str | None
    ) -> Refusal | Actum | None:
        """Return the refusal expected, the stored actum a keyed retry returns, or ``None`` (a new actum)."""
        if not owner_id:
            return Refusal(EmptyOwnerID)
        if spoil is not None and spoil not in ("empty_owner", "empty_key"):
            return Refusal(InvalidActum, field=_SPOILED_FIELD[spoil])
        kind = ActumKind(actum.kind)
        if actum.content == "" and kind in (ActumKind.MESSAGE, ActumKind.THOUGHT):
            return Refusal(InvalidActum, field="content")
        if key == "":
            return Refusal(InvalidActum, field="idempotency_key")
        if key is not None and not self.idempotent:
            return Refusal(IdempotencyUnsupported)
        entry = self.chronica.get(actum.chronicum_id)
        if entry is not None and entry.owner_id != owner_id:
            return Refusal(ChronicumNotFound, chronicum_id=actum.chronicum_id)
        if entry is not None and key is not None and key in entry.keyed:
            return entry.keyed[key]
        return None

    def stored(self, owner_id: str, actum: Actum, key: str | None) -> None:
        """Remember that ``actum`` (as the store returned it) was newly recorded by ``owner_id``."""
        entry = self.chronica.setdefault(actum.chronicum_id, _ModelChronicum(owner_id))
        entry.acta.append(actum)
        if key is not None:
            entry.keyed[key] = actum

    def window(
        self,
        owner_id: str,
        chronicum_id: str,
        actum_kinds: list[ActumKind | str] | None,
        actor_kinds: list[ActorKind | str] | None,
        last_n: int,
    ) -> Refusal | list[Actum]:
        """Return the context window ``get_acta`` must answer, or the refusal."""
        if not owner_id:
            return Refusal(EmptyOwnerID)
        entry = self.chronica.get(chronicum_id)
        if entry is None or entry.owner_id != owner_id:
            return Refusal(ChronicumNotFound, chronicum_id=chronicum_id)
        kinds = {ActumKind(kind) for kind in actum_kinds} if actum_kinds else set(ActumKind)
        actors = {ActorKind(kind) for kind in actor_kinds} if actor_kinds else set(ActorKind)
        kept = [actum for actum in entry.acta if actum.kind in kinds and actum.actor_kind in actors]
        return kept[-last_n:] if last_n > 0 else kept

    def chronicum(self, owner_id: str, chronicum_id: str) -> Refusal | _ModelChronicum:
        """Return what ``get_chronicum`` must answer, or the refusal."""
        if not owner_id:
            return Refusal(EmptyOwnerID)
        entry = self.chronica.get(chronicum_id)
        if entry is None or entry.owner_id != owner_id:
            return Refusal(ChronicumNotFound, chronicum_id=chronicum_id)
        return entry


_SPOILED_FIELD = {
    "empty_chronicum_id": "chronicum_id",
    "empty_actor": "actor",
    "unknown_kind": "kind",
    "unknown_actor_kind": "actor_kind",
    "non_str_content": "content",
    "lone_surrogate": "content",
}

_WRITER = st.sampled_from(["its owner"] * 5 + ["another owner"])
_READER = st.sampled_from(["its owner"] * 5 + ["another owner", "empty owner"])
_ACTORS = st.sampled_from(["ardian", "concierge", "search", "booking"])
_KEYS = st.one_of(st.none(), st.none(), st.sampled_from(["key-a", "key-b", "key-c"]))

_KIND_VALUES: list[ActumKind | str] = [*ActumKind, *(kind.value for kind in ActumKind)]
_ACTOR_KIND_VALUES: list[ActorKind | str] = [*ActorKind, *(kind.value for kind in ActorKind)]


def _check_refusal(outcome: object, expected: Refusal, what: str) -> None:
    assert isinstance(outcome, BaseException), f"{what}: expected {expected.error.__name__}, got {outcome!r}"
    assert type(outcome) is expected.error, f"{what}: expected {expected.error.__name__}, got {outcome!r}"
    if expected.field is not None:
        assert isinstance(outcome, InvalidActum)
        assert outcome.field == expected.field, (
            f"{what}: InvalidActum names {outcome.field!r}, not {expected.field!r}"
        )
    if expected.chronicum_id is not None:
        assert str(outcome) == str(ChronicumNotFound(expected.chronicum_id)), f"{what}: {outcome}"


def _same_acta(got: list[Actum], expected: list[Actum], what: str) -> None:
    summary = [(a.id, a.kind, a.actor_kind, a.actor, a.content) for a in got]
    assert summary == [(a.id, a.kind, a.actor_kind, a.actor, a.content) for a in expected], what
    for stored, model in zip(got, expected, strict=True):
        assert model.at is not None
        assert abs(assert_aware_utc(stored.at, "actum.at") - model.at) <= TIME_TOLERANCE, what


class ChronicaMachine(RuleBasedStateMachine):
    """Drives one harness's Chronicarius and a :class:`ReferenceModel` with the same calls.

    Each run uses three fresh chronicum ids and three fresh owners, so runs never meet.
    """

    harness: ClassVar[Harness]
    """The harness to drive, bound by subclassing (as :class:`StatefulRules` does)."""

    def __init__(self) -> None:
        super().__init__()
        harness = self.harness
        self.model = ReferenceModel(idempotent=harness.idempotent)
        prefix = new_id("stateful")
        self.chronicum_ids = [f"{prefix}-{index}" for index in range(3)]
        self.owners = [new_owner("ardian"), new_owner("rafa"), new_owner("booking")]
        self.seen_ids: set[str] = set()

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self.harness, method)(*args, **kwargs)
        except ChronicaError as error:
            return error

    def _owner(self, chronicum: int, who: str) -> str:
        """The owner id for ``who``: the chronicum's usual owner, another owner, or an empty one."""
        usual = chronicum % len(self.owners)
        if who == "its owner":
            return self.owners[usual]
        if who == "another owner":
            return self.owners[(usual + 1) % len(self.owners)]
        return ""

    def _chronicum_id(self, chronicum: int) -> str:
        """One of the run's chronicum ids, or (past their end) an id never written."""
        if chronicum < len(self.chronicum_ids):
            return self.chronicum_ids[chronicum]
        return new_id("never-written")

    @rule(
        who=_WRITER,
        chronicum=st.integers(0, 2),
        kind=st.sampled_from(_KIND_VALUES),
        actor_kind=st.sampled_from(_ACTOR_KIND_VALUES),
        actor=_ACTORS,
        content=st.text(max_size=12),
        key=_KEYS,
        spoil=st.one_of(st.none(), st.none(), st.none(), st.none(), st.sampled_from(SPOILS)),
    )
    def record_actum(
        self,
        who: str,
        chronicum: int,
        kind: ActumKind | str,
        actor_kind: ActorKind | str,
        actor: str,
        content: str,
        key: str | None,
        spoil: str | None,
    ) -> None:
        """A write, valid or spoiled in exactly one way."""
        owner_id = "" if spoil == "empty_owner" else self._owner(chronicum, who)
        actum = Actum(self._chronicum_id(chronicum), kind, actor_kind, actor, content, id="caller-id")  # type: ignore[arg-type]
        if spoil is not None:
            if ActumKind(actum.kind) in (ActumKind.MESSAGE, ActumKind.THOUGHT) and not content:
                actum = replace(actum, content="not empty")
            actum = _spoiled(actum, spoil)
            key = "" if spoil == "empty_key" else key
        self._record_and_compare(owner_id, actum, key, spoil)

    @rule(
        who=_WRITER,
        chronicum=st.integers(0, 2),
        turns=st.lists(
            st.tuples(st.sampled_from(list(ActumKind)), st.sampled_from(list(ActorKind)), _ACTORS, _KEYS),
            min_size=2,
            max_size=6,
        ),
    )
    def record_a_conversation(
        self, who: str, chronicum: int, turns: list[tuple[ActumKind, ActorKind, str, str | None]]
    ) -> None:
        """Several valid writes in a row by one owner (builds histories worth filtering)."""
        owner_id = self._owner(chronicum, who)
        for index, (kind, actor_kind, actor, key) in enumerate(turns):
            actum = Actum(self._chronicum_id(chronicum), kind, actor_kind, actor, f"turn {index} by {actor}")
            self._record_and_compare(owner_id, actum, key, None)

    def _record_and_compare(self, owner_id: str, actum: Actum, key: str | None, spoil: str | None) -> None:
        expected = self.model.expect_record(owner_id, actum, key, spoil)
        outcome = self._call("record_actum", owner_id, actum, idempotency_key=key)
        what = f"record_actum({owner_id!r}, {actum!r}, idempotency_key={key!r})"
        if isinstance(expected, Refusal):
            _check_refusal(outcome, expected, what)
            return
        assert isinstance(outcome, Actum), f"{what}: expected an actum, got {outcome!r}"
        if isinstance(expected, Actum):
            _same_acta([outcome], [expected], f"{what}: a retry must return the first actum")
            return
        assert _HEX_ID.fullmatch(outcome.id), f"{what}: id {outcome.id!r}"
        assert outcome.id not in self.seen_ids, f"{what}: id {outcome.id} reused"
        self.seen_ids.add(outcome.id)
        sent = (
            actum.chronicum_id,
            ActumKind(actum.kind),
            ActorKind(actum.actor_kind),
            actum.actor,
            actum.content,
        )
        got = (outcome.chronicum_id, outcome.kind, outcome.actor_kind, outcome.actor, outcome.content)
        assert got == sent, what
        assert_aware_utc(outcome.at, "actum.at")
        self.model.stored(owner_id, outcome, key)

    @rule(
        who=_READER,
        chronicum=st.integers(0, 3),
        actum_kinds=st.one_of(
            st.none(), st.just([]), st.lists(st.sampled_from(_KIND_VALUES), min_size=1, max_size=2)
        ),
        actor_kinds=st.one_of(
            st.none(), st.lists(st.sampled_from(_ACTOR_KIND_VALUES), min_size=1, max_size=2)
        ),
        last_n=st.sampled_from([1, 2, 3, 5, 1, 2, 0, -1, 50]),
    )
    def get_acta(
        self,
        who: str,
        chronicum: int,
        actum_kinds: list[ActumKind | str] | None,
        actor_kinds: list[ActorKind | str] | None,
        last_n: int,
    ) -> None:
        """A context window by the usual owner, another or an empty one; chronicum 3 was never written."""
        owner_id = self._owner(chronicum, who)
        chronicum_id = self._chronicum_id(chronicum)
        expected = self.model.window(owner_id, chronicum_id, actum_kinds, actor_kinds, last_n)
        outcome = self._call(
            "get_acta",
            owner_id,
            chronicum_id,
            actum_kinds=actum_kinds,
            actor_kinds=actor_kinds,
            last_n=last_n,
        )
        what = f"get_acta({owner_id!r}, {chronicum_id!r}, {actum_kinds!r}, {actor_kinds!r}, last_n={last_n})"
        if isinstance(expected, Refusal):
            _check_refusal(outcome, expected, what)
        else:
            assert isinstance(outcome, list), f"{what}: expected a list, got {outcome!r}"
            _same_acta(outcome, expected, what)

    @rule(who=_READER, chronicum=st.integers(0, 3))
    def get_chronicum(self, who: str, chronicum: int) -> None:
        """The chronicum as one of the owners sees it."""
        owner_id = self._owner(chronicum, who)
        chronicum_id = self._chronicum_id(chronicum)
        expected = self.model.chronicum(owner_id, chronicum_id)
        outcome = self._call("get_chronicum", owner_id, chronicum_id)
        what = f"get_chronicum({owner_id!r}, {chronicum_id!r})"
        if isinstance(expected, Refusal):
            _check_refusal(outcome, expected, what)
            return
        assert not isinstance(outcome, BaseException), f"{what}: {outcome!r}"
        assert (outcome.id, outcome.owner_id) == (chronicum_id, expected.owner_id), what
        assert_aware_utc(outcome.started_at, "started_at")
        if expected.acta:
            last_at = expected.acta[-1].at
            assert last_at is not None
            moved = assert_aware_utc(outcome.last_actum_at, "last_actum_at")
            assert abs(moved - last_at) <= TIME_TOLERANCE, f"{what}: last_actum_at {moved}, last at {last_at}"


_SPOIL_CHANGES: dict[str, dict[str, Any]] = {
    "empty_owner": {},
    "empty_key": {},
    "empty_chronicum_id": {"chronicum_id": ""},
    "empty_actor": {"actor": ""},
    "unknown_kind": {"kind": "memo"},
    "unknown_actor_kind": {"actor_kind": "robot"},
    "non_str_content": {"content": 42},
    "lone_surrogate": {"content": "half \udc00 a pair"},
}


def _spoiled(actum: Actum, spoil: str) -> Actum:
    changes: Any = _SPOIL_CHANGES[spoil]
    return replace(actum, **changes)


class StatefulRules(SuiteBase):
    """The hypothesis stateful test: a Chronicarius over the store agrees with :class:`ReferenceModel`.

    Runs under :func:`~chronica_conformance.profiles.stateful_settings` (``HYPOTHESIS_PROFILE=ci``
    is deterministic); no deadline, since a database may be slow.
    """

    def test_stateful_rules_match_the_reference_model(self, chronica_harness: Harness) -> None:
        """Random calls by several owners, with and without keys, valid and invalid: every answer agrees."""
        bound = type(
            f"ChronicaMachine_{chronica_harness.flavour}", (ChronicaMachine,), {"harness": chronica_harness}
        )
        run_state_machine_as_test(
            bound,
            settings=stateful_settings(),
        )
