"""The public JSON form of what a store returns: ``to_dict`` / ``from_dict`` round-trip through ``json``."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chronica_conformance.base import SuiteBase, make_actum, new_id, new_owner
from chronica_conformance.harness import Harness
from chronica_core import ActorKind, Actum, ActumKind, ChronicaPage, Chronicum
from chronica_core.capabilities import LISTING

__all__ = ["JSON_EXAMPLES", "JsonFormContract", "bounded_settings"]

JSON_EXAMPLES = 20
"""The most examples the property runs (fewer when the active hypothesis profile asks for fewer)."""

_TEXT = st.characters(codec="utf-8")
"""Any character UTF-8 can encode: NUL, every plane, combining marks; no lone surrogates."""

_CONTENT = st.one_of(
    st.text(_TEXT, max_size=200), st.sampled_from(["", "\x00", "\u4e2d\U0001f37d\u202e", '"\\\n\t'])
)
_NAME = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=40)
_ACTUM = st.tuples(st.sampled_from(tuple(ActumKind)), st.sampled_from(tuple(ActorKind)), _NAME, _CONTENT)


def bounded_settings() -> settings:
    """The active profile, bounded to :data:`JSON_EXAMPLES` examples, without a deadline."""
    current = settings()  # the active profile's values
    return settings(
        current,
        max_examples=min(current.max_examples, JSON_EXAMPLES),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def _round_trip_actum(actum: Actum) -> None:
    for ensure_ascii in (True, False):
        text = json.dumps(actum.to_dict(), ensure_ascii=ensure_ascii)
        back = Actum.from_dict(json.loads(text))
        assert back == actum, f"Actum.from_dict(json) gave {back!r} for {actum!r}"
    at = actum.to_dict()["at"]
    assert isinstance(at, str) and at.endswith("Z"), f"a stored actum's at is {at!r} in its JSON form"


def _round_trip_chronicum(chronicum: Chronicum) -> None:
    text = json.dumps(chronicum.to_dict())
    back = Chronicum.from_dict(json.loads(text))
    assert back == chronicum, f"Chronicum.from_dict(json) gave {back!r} for {chronicum!r}"


class JsonFormContract(SuiteBase):
    """Acta and chronica as the store returns them survive ``json.dumps(to_dict())`` and back.

    A store returning datetimes that are not timezone-aware, or kinds that are not the enums, or
    text it changed, fails here as an app serving them over HTTP would see it.
    """

    def test_json_form_of_stored_acta_and_chronica_round_trips(self, chronica_harness: Harness) -> None:
        """A hypothesis property: any content, actor and kind, stored and read back, round-trips."""
        harness = chronica_harness
        owner = new_owner()

        @bounded_settings()
        @given(
            acta=st.lists(_ACTUM, min_size=1, max_size=4),
            suffix=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20),
        )
        def stored_acta_round_trip(acta: list[tuple[ActumKind, ActorKind, str, str]], suffix: str) -> None:
            chronicum_id = f"{new_id('json')}-{suffix}"
            written = [
                harness.record_actum(
                    owner,
                    make_actum(
                        chronicum_id,
                        content or "x" if kind in (ActumKind.MESSAGE, ActumKind.THOUGHT) else content,
                        kind=kind,
                        actor_kind=actor_kind,
                        actor=actor,
                    ),
                )
                for kind, actor_kind, actor, content in acta
            ]
            read = harness.get_acta(owner, chronicum_id)
            assert [actum.content for actum in read] == [actum.content for actum in written]
            for actum in (*written, *read):
                _round_trip_actum(actum)
            _round_trip_chronicum(harness.get_chronicum(owner, chronicum_id))
            _round_trip_chronicum(harness.get(chronicum_id))

        stored_acta_round_trip()
        if LISTING in harness.capabilities:
            page = harness.list_chronica(owner, limit=3)
            form = json.loads(json.dumps(page.to_dict()))
            assert set(form) == {"chronica", "next_cursor"}
            back = ChronicaPage([Chronicum.from_dict(data) for data in form["chronica"]], form["next_cursor"])
            assert back == page
