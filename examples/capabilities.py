"""Batches, listing, erasure and the JSON form, as docs/how-to/capabilities.md shows them.

Run it on memory:// (the page's store) or any bundled store's URL:

    python examples/capabilities.py
    python examples/capabilities.py sqlite:///chronica.db

It writes only as its own two owners (``example-ardian``, ``example-rafa``) into chronica it
makes, and erases every chronicum it made before it ends; it prints their ids.
"""

from __future__ import annotations

import json
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

url = sys.argv[1] if len(sys.argv) > 1 else "memory://"
with open_store(url) as store:
    chronicarius = Chronicarius(store)
    ardian, rafa = "example-ardian", "example-rafa"  # owners of the example's own: it erases all it made
    dinner, lunch = new_chronicum_id(), new_chronicum_id()

    # A batch: all of it lands or none, its acta one after another, in one write.
    turn = [
        Actum(dinner, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "Dinner for four on Friday?"),
        Actum(dinner, ActumKind.TOOL_REQUEST, ActorKind.AGENT, "search", '{"query": "table for four"}'),
        Actum(dinner, ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, "search", '["Rumah Teduh"]'),
    ]
    stored = chronicarius.record_acta(ardian, turn, idempotency_key="dinner-turn-1")
    retry = chronicarius.record_acta(ardian, turn, idempotency_key="dinner-turn-1")
    print(f"{len(stored)} acta in one batch; the retry stored nothing new: {retry == stored}")

    # Listing: a page of the owner's chronica, newest first; next_cursor leads to the next page.
    chronicarius.record_actum(ardian, Actum(lunch, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "Lunch?"))
    page = chronicarius.list_chronica(ardian, limit=1)
    listed = list(page.chronica)
    while page.next_cursor is not None:
        page = chronicarius.list_chronica(ardian, limit=1, cursor=page.next_cursor)
        listed += page.chronica
    print(f"ardian has {len(listed)} chronica; rafa has {len(chronicarius.list_chronica(rafa).chronica)}")

    # The JSON form: to_dict() for json.dumps, from_dict() to read it back.
    text = json.dumps(stored[0].to_dict())
    assert Actum.from_dict(json.loads(text)) == stored[0]
    print(sorted(json.loads(text)))

    # Erasure: the chronicum's acta and fields leave the store; reads answer "not found".
    print(f"erased {chronicarius.erase_chronicum(ardian, dinner)} acta")
    try:
        chronicarius.get_acta(ardian, dinner)
    except ChronicumNotFound:
        print("dinner: ChronicumNotFound")
    # The same owner writing to the id again starts a fresh, empty chronicum; no one else can.
    again = Actum(dinner, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "Starting over.")
    chronicarius.record_actum(ardian, again)
    print(f"dinner again: {[actum.content for actum in chronicarius.get_acta(ardian, dinner)]}")
    try:
        chronicarius.record_actum(rafa, Actum(dinner, ActumKind.MESSAGE, ActorKind.HUMAN, "rafa", "Mine?"))
    except ChronicumNotFound:
        print("rafa writing to it: ChronicumNotFound")
    print(f"erased all of ardian's: {chronicarius.erase_owner(ardian)} chronica")

    # What the example made, and what it leaves behind.
    print(f"made chronica {dinner} and {lunch}; both erased, so each reads as missing now:")
    print(f"chronica acta {dinner} --owner {ardian} --store {masked_url(url)}")
    print("left behind: no acta, only the erased chronica's ids, each with a digest of its owner")
