"""A long session kept within a model's window by summaries: nothing is lost from the record.

Run it with any store URL whose backend has the history capability:

    python examples/long_session.py                 # sqlite:///chronica.db, as the history page shows
    python examples/long_session.py memory://

Before every model call the agent reads its context window; whenever that window holds more
than a budget of characters, a summarizer (a model call in a real app; a stand-in here) records
a summary of its older part. The window shows the summary in that part's place; the record, read
``as_written``, keeps every actum. It writes one new chronicum of its own owner
``example-summaries`` and touches nothing else; it prints its id, the command that reads it back,
and what stays in the store (erase it with ``chronica erase --owner example-summaries --all``).
"""

from __future__ import annotations

import sys

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, Span, new_chronicum_id, open_store
from chronica_core.redaction import masked_url

OWNER = "example-summaries"
BUDGET = 400
"""The most characters of content the agent hands its model at once (a token budget, in an app)."""


def summarize(window: list[Actum]) -> str:
    """Stand in for a summarizing model call: name who spoke, and how much."""
    speakers = sorted({actum.actor for actum in window})
    return f"[summary of {len(window)} earlier acta by {', '.join(speakers)}]"


def main(url: str) -> None:
    """Twelve turns of a conversation, summarizing whenever the window passes the budget."""
    with open_store(url) as store:
        chronicarius = Chronicarius(store)
        session = new_chronicum_id()
        for turn in range(12):
            actor, kind = ("ardian", ActorKind.HUMAN) if turn % 2 == 0 else ("concierge", ActorKind.AGENT)
            text = f"turn {turn}: " + "a detail worth remembering. " * 3
            chronicarius.record_actum(OWNER, Actum(session, ActumKind.MESSAGE, kind, actor, text))
            window = chronicarius.get_acta(OWNER, session)  # what the next model call would get
            if sum(len(actum.content) for actum in window) > BUDGET:
                older = window[:-2]  # keep the last two acta as they are
                chronicarius.record_actum(
                    OWNER,
                    Actum(
                        session,
                        ActumKind.MESSAGE,
                        ActorKind.AGENT,
                        "summarizer",
                        summarize(older),
                        summarizes=Span(older[0].id, older[-1].id),
                    ),
                )
        window = chronicarius.get_acta(OWNER, session)
        record = chronicarius.get_acta(OWNER, session, view="as_written")
        print(f"window: {len(window)} acta, {sum(len(actum.content) for actum in window)} characters")
        print(f"first in the window: {window[0].content}")
        print(
            f"record: {len(record)} acta, {sum(1 for actum in record if actum.summarizes)} of them summaries"
        )
        shown = masked_url(url)  # what the example made, and what it leaves behind
        print(f"chronicum {session}: chronica acta {session} --owner {OWNER} --as-written --store {shown}")
        kept = (
            "nothing (memory:// keeps nothing)"
            if url.startswith("memory:")
            else f"chronicum {session}, {len(record)} acta"
        )
        print(f"left behind in {shown}: {kept}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///chronica.db")
