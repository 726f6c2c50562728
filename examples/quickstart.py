"""The README's quickstart, kept runnable: record the dinner story's first turns and read a window.

    python examples/quickstart.py                 # sqlite:///chronica.db, as in the README
    python examples/quickstart.py memory://       # or any store URL

It writes one new chronicum of the owner ``ardian`` and touches nothing else; it prints its id,
the command that reads it back, and what stays in the store.
"""

from __future__ import annotations

import sys

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    ChronicumNotFound,
    new_chronicum_id,
    open_store,
)
from chronica_core.redaction import masked_url

url = sys.argv[1] if len(sys.argv) > 1 else "sqlite:///chronica.db"
with open_store(url) as store:
    chronicarius = Chronicarius(store)

    # A new conversation gets an unguessable id; the first write creates it for its owner.
    lunch = new_chronicum_id()
    chronicarius.record_actum(
        "ardian",
        Actum(lunch, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "A quiet table for four?"),
    )
    chronicarius.record_actum(
        "ardian",
        Actum(lunch, ActumKind.THOUGHT, ActorKind.AGENT, "concierge", "Search first."),
    )
    reply = Actum(lunch, ActumKind.MESSAGE, ActorKind.AGENT, "search", "Rumah Teduh has one.")
    first = chronicarius.record_actum("ardian", reply, idempotency_key="search-reply-1")
    retry = chronicarius.record_actum("ardian", reply, idempotency_key="search-reply-1")
    assert retry.id == first.id  # a retried write lands once

    # Before every model call, an agent reads its context window: here the last 2 messages.
    for actum in chronicarius.get_acta("ardian", lunch, actum_kinds=["message"], last_n=2):
        print(f"{actum.actor}: {actum.content}")

    # Reading someone else's chronicum answers exactly like reading a missing one.
    try:
        chronicarius.get_acta("rafa", lunch)
    except ChronicumNotFound as refusal:
        print(f"rafa: {type(refusal).__name__}")

    # What the example made, and what it leaves behind.
    print(f"chronicum {lunch}: chronica acta {lunch} --owner ardian --store {masked_url(url)}")
    kept = "nothing (memory:// keeps nothing)" if url.startswith("memory:") else f"chronicum {lunch}, 3 acta"
    print(f"left behind in {masked_url(url)}: {kept}")
