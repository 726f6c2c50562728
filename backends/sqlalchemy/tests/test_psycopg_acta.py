"""``window_acta``: psycopg's binary rows of a context window turned into acta, without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from chronica_sqlalchemy.psycopg_acta import window_acta

from chronica_core.model import ActorKind, Actum, ActumKind

BERLIN = timezone(timedelta(hours=1))


def test_rows_become_acta_in_utc_with_their_content_decoded() -> None:
    at = datetime(2026, 12, 2, 4, 0, 0, 123456, tzinfo=BERLIN)
    rows = [
        ("dinner-friday", 1, "a1", "message", "human", "ardian", "Grüße".encode(), at),
        ("dinner-friday", 2, "a2", "thought", "agent", "planner", b"", at.astimezone(UTC)),
    ]

    acta = window_acta(rows)

    in_utc = at.astimezone(UTC)
    assert acta == [
        Actum("dinner-friday", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "Grüße", "a1", in_utc),
        Actum("dinner-friday", ActumKind.THOUGHT, ActorKind.AGENT, "planner", "", "a2", in_utc),
    ]
    assert [actum.at.tzinfo for actum in acta if actum.at is not None] == [UTC, UTC]
    assert type(acta[0]) is Actum


def test_content_read_as_text_is_taken_as_it_is() -> None:
    at = datetime(2026, 12, 2, 4, 0, 0, tzinfo=UTC)
    rows = [("dinner-friday", 1, "a1", "message", "human", "ardian", "Grüße \x00 🍜", at)]
    assert [actum.content for actum in window_acta(rows)] == ["Grüße \x00 🍜"]


def test_the_chronicum_s_own_row_is_no_actum() -> None:
    assert window_acta([("dinner-friday", None, None, None, None, None, None, None)]) == []
