"""What the history groups share: the capability fixture, writing helpers and the window oracle.

The oracle (:func:`expected_window`) computes a context window from a chronicum's whole history
as written, in a few lines of its own: it shares no code with ``chronica_core.history``, so a
store (or rules) that shape a window wrongly disagree with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import pytest

from chronica_conformance.base import SuiteBase, ids, make_actum, require_capability
from chronica_conformance.harness import Harness
from chronica_core import ActorKind, Actum, ActumKind, Span
from chronica_core.capabilities import HISTORY

__all__ = [
    "HistoryBase",
    "Shape",
    "assert_exchanges_whole",
    "expected_window",
    "request",
    "respond",
    "summary",
    "write",
    "write_mixed",
]

_MIXED = (
    (ActumKind.MESSAGE, ActorKind.HUMAN),
    (ActumKind.THOUGHT, ActorKind.AGENT),
    (ActumKind.TOOL_REQUEST, ActorKind.AGENT),
    (ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM),
    (ActumKind.MESSAGE, ActorKind.AGENT),
)


@dataclass(frozen=True, slots=True)
class Shape:
    """What a context window asks ``get_acta`` for, besides the owner and the chronicum.

    Attributes are ``get_acta``'s keyword arguments of the same names.
    """

    actum_kinds: tuple[ActumKind, ...] | None = None
    actor_kinds: tuple[ActorKind, ...] | None = None
    last_n: int = 0
    before: str | None = None
    newest_first: bool = False
    view: str = "summarized"
    tool_exchanges: str = "whole"

    def read(self, harness: Harness, owner_id: str, chronicum_id: str) -> list[Actum]:
        """The window of this shape, read through the harness's Chronicarius."""
        return harness.get_acta(
            owner_id,
            chronicum_id,
            actum_kinds=self.actum_kinds,
            actor_kinds=self.actor_kinds,
            last_n=self.last_n,
            before=self.before,
            newest_first=self.newest_first,
            view=self.view,
            tool_exchanges=self.tool_exchanges,
        )


class HistoryBase(SuiteBase):
    """Base of the history groups: their cases run where the store has the ``history`` capability.

    Skipped, with the reason, elsewhere, unless the suite declares ``"history"`` in
    ``declares_capabilities`` (then they fail).
    """

    @pytest.fixture
    def history_harness(self, chronica_harness: Harness) -> Harness:
        """The harness, when its store has the history capability (else skip, or fail if declared)."""
        return require_capability(chronica_harness, HISTORY, "the history contract")


def write(
    harness: Harness,
    owner_id: str,
    chronicum_id: str,
    count: int,
    label: str = "m",
    *,
    actor_kind: ActorKind = ActorKind.HUMAN,
) -> list[Actum]:
    """Record ``count`` messages ``"<label>-<index>"`` through the Chronicarius; return them stored."""
    return [
        harness.record_actum(owner_id, make_actum(chronicum_id, f"{label}-{index}", actor_kind=actor_kind))
        for index in range(count)
    ]


def write_mixed(harness: Harness, owner_id: str, chronicum_id: str, count: int, label: str) -> list[Actum]:
    """Record ``count`` acta ``"<label>-<index>"`` of every kind and actor kind, in turn.

    A human's message, an agent's thought, an agent's tool request, a system's tool response
    (naming no request), an agent's message, and again from the start.
    """
    written = []
    for index in range(count):
        kind, actor_kind = _MIXED[index % len(_MIXED)]
        actum = make_actum(chronicum_id, f"{label}-{index}", kind=kind, actor_kind=actor_kind)
        written.append(harness.record_actum(owner_id, actum))
    return written


def summary(
    chronicum_id: str,
    first: str,
    last: str,
    content: str = "in short",
    *,
    actor_kind: ActorKind = ActorKind.AGENT,
    kind: ActumKind = ActumKind.MESSAGE,
) -> Actum:
    """A summary of the range ``first`` to ``last`` (actum ids) of ``chronicum_id``'s history."""
    return replace(
        make_actum(chronicum_id, content, kind=kind, actor_kind=actor_kind, actor="summarizer"),
        summarizes=Span(first, last),
    )


def request(chronicum_id: str, content: str = "call", *, actum_id: str | None = None) -> Actum:
    """A tool request by an agent (with ``actum_id`` as the id it is given, for a batch)."""
    return make_actum(
        chronicum_id,
        content,
        kind=ActumKind.TOOL_REQUEST,
        actor_kind=ActorKind.AGENT,
        actor="planner",
        actum_id=actum_id,
    )


def respond(
    chronicum_id: str,
    answers: str,
    content: str = "result",
    *,
    actor_kind: ActorKind = ActorKind.SYSTEM,
) -> Actum:
    """A tool response naming the request ``answers`` (``""``: naming none)."""
    actum = make_actum(
        chronicum_id, content, kind=ActumKind.TOOL_RESPONSE, actor_kind=actor_kind, actor="tool"
    )
    return replace(actum, answers=answers)


def _range(history: Sequence[Actum], index: dict[str, int], at: int) -> tuple[int, int]:
    """The indexes of ``history`` the summary at ``at`` stands for (an endpoint summary: its range)."""
    span = history[at].summarizes
    assert span is not None
    first, last = index[span.first], index[span.last]
    if history[first].summarizes is not None:
        first = _range(history, index, first)[0]
    if history[last].summarizes is not None:
        last = _range(history, index, last)[1]
    return first, last


def _matches(actum: Actum, shape: Shape) -> bool:
    return (shape.actum_kinds is None or actum.kind in shape.actum_kinds) and (
        shape.actor_kinds is None or actum.actor_kind in shape.actor_kinds
    )


def expected_window(history: Sequence[Actum], shape: Shape = Shape()) -> list[Actum]:
    """The window of ``shape`` ``get_acta`` must return, from ``history``: every actum, as written, in order.

    Summarized view: each summary whose range no other summary's range holds (of equal ranges,
    the newest) stands at its range's first place instead of the range; other summaries are
    not shown. ``before`` keeps what stands before that actum's place. Then the filters (a
    summary is a message of its actor kind), then the newest ``last_n``. Then tool exchanges:
    ``whole`` adds each missing request at its own place, ``drop_orphans`` drops the response.
    """
    index = {actum.id: at for at, actum in enumerate(history)}
    ranges = {at: _range(history, index, at) for at, actum in enumerate(history) if actum.summarizes}
    place: dict[int, int] = {}  # history index -> its place, for what the view shows
    if shape.view == "summarized":
        shown = [
            at
            for at, (first, last) in ranges.items()
            if not any(
                other != at
                and other_first <= first
                and last <= other_last
                and ((other_first, other_last) != (first, last) or other > at)
                for other, (other_first, other_last) in ranges.items()
            )
        ]
        covered = {covered for at in shown for covered in range(ranges[at][0], ranges[at][1] + 1)}
        place.update({at: ranges[at][0] for at in shown})
        place.update(
            {at: at for at, actum in enumerate(history) if actum.summarizes is None and at not in covered}
        )
    else:
        place.update({at: at for at in range(len(history))})
    if shape.before is not None:
        end = place.get(index[shape.before], index[shape.before])
        place = {at: where for at, where in place.items() if where < end}
    kept = sorted((where, at) for at, where in place.items() if _matches(history[at], shape))
    if shape.last_n > 0:
        kept = kept[-shape.last_n :]
    held = {history[at].id for _, at in kept}
    missing = {
        history[at].answers
        for _, at in kept
        if history[at].kind is ActumKind.TOOL_RESPONSE
        and history[at].answers
        and history[at].answers not in held
    }
    if shape.tool_exchanges == "whole":
        kept = sorted([*kept, *((index[request_id], index[request_id]) for request_id in missing)])
    elif shape.tool_exchanges == "drop_orphans":
        kept = [(where, at) for where, at in kept if history[at].answers not in missing]
    window = [history[at] for _, at in kept]
    return window[::-1] if shape.newest_first else window


def assert_exchanges_whole(window: Sequence[Actum], tool_exchanges: str, what: str) -> None:
    """Assert every response in ``window`` has its request before it, unless orphans are kept."""
    if tool_exchanges == "as_written":
        return
    seen: set[str] = set()
    for actum in window:
        if actum.kind is ActumKind.TOOL_RESPONSE and actum.answers:
            assert actum.answers in seen, (
                f"{what}: the response {actum.id} comes without the request {actum.answers} it answers "
                f"before it (window {ids(window)})"
            )
        seen.add(actum.id)
