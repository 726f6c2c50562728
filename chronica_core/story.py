"""The dinner story: the canonical example, for the demo, the docs, tests and benchmarks."""

from __future__ import annotations

from chronica_core.model import ActorKind, Actum, ActumKind

__all__ = ["DINNER_CHRONICUM", "DINNER_OWNER", "DINNER_STORY"]

DINNER_OWNER = "ardian"
"""The person the story's chronicum belongs to."""

DINNER_CHRONICUM = "dinner-friday"
"""The story's chronicum id."""

DINNER_STORY: tuple[Actum, ...] = tuple(
    Actum(DINNER_CHRONICUM, kind, actor_kind, actor, content)
    for kind, actor_kind, actor, content in (
        (
            ActumKind.MESSAGE,
            ActorKind.HUMAN,
            "ardian",
            "Find us a quiet table for four in Kemang on Friday at 7pm.",
        ),
        (ActumKind.THOUGHT, ActorKind.AGENT, "concierge", "Search first, then hand the booking over."),
        (ActumKind.TOOL_REQUEST, ActorKind.AGENT, "search", '{"area":"Kemang","party":4,"quiet":true}'),
        (
            ActumKind.TOOL_RESPONSE,
            ActorKind.AGENT,
            "search",
            '[{"name":"Rumah Teduh","table":true},{"name":"Kayu Manis","table":true}]',
        ),
        (
            ActumKind.MESSAGE,
            ActorKind.AGENT,
            "search",
            "Rumah Teduh and Kayu Manis both have a quiet table for four at 7pm.",
        ),
        (ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "Rumah Teduh."),
        (
            ActumKind.MESSAGE,
            ActorKind.AGENT,
            "concierge",
            "Book Rumah Teduh for four at 7pm on Friday under Ardian.",
        ),
    )
)
"""The seven acta of the story, in order, not yet recorded (no id, no ``at``)."""
