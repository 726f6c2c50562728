"""Fork a conversation at a message, answer it two ways, and compare the two branches.

Run it with any store URL whose backend has the history capability:

    python examples/fork_and_compare.py                 # sqlite:///chronica.db, as the history page shows
    python examples/fork_and_compare.py memory://

It writes two new chronica of its own owner ``example-forks`` (the source and its fork) and
touches nothing else; it prints their ids, a command that reads each back, and what stays in the
store (erase it with ``chronica erase --owner example-forks --all``).
"""

from __future__ import annotations

import sys

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, new_chronicum_id, open_store
from chronica_core.redaction import masked_url

OWNER = "example-forks"


def say(chronicum_id: str, actor: str, text: str) -> Actum:
    """An actum: the person's message when ``actor`` is the owner, else an agent's."""
    kind = ActorKind.HUMAN if actor == OWNER else ActorKind.AGENT
    return Actum(chronicum_id, ActumKind.MESSAGE, kind, actor, text)


def main(url: str) -> None:
    """Write a short conversation, fork it at the question, and answer the fork another way."""
    with open_store(url) as store:
        chronicarius = Chronicarius(store)
        source = new_chronicum_id()
        question = chronicarius.record_actum(OWNER, say(source, OWNER, "Where should we eat on Friday?"))
        chronicarius.record_actum(OWNER, say(source, "concierge", "Kemang: Rumah Teduh, quiet, at 7."))

        # A second opinion from the question on: the fork shares the question, nothing is copied.
        fork = chronicarius.fork_chronicum(OWNER, source, at=question.id)
        chronicarius.record_actum(OWNER, say(fork.id, "concierge", "Senopati: Kayu Manis, livelier, at 8."))

        for name, chronicum_id in (("source", source), ("fork", fork.id)):
            window = chronicarius.get_acta(OWNER, chronicum_id)
            print(f"{name}: {' / '.join(actum.content for actum in window)}")
        print(f"the fork branched off at: {chronicarius.get_actum(OWNER, source, question.id).content}")
        shown = masked_url(url)  # what the example made, and what it leaves behind
        for chronicum_id in (source, fork.id):
            print(f"chronicum {chronicum_id}: chronica acta {chronicum_id} --owner {OWNER} --store {shown}")
        kept = (
            "nothing (memory:// keeps nothing)" if url.startswith("memory:") else "these 2 chronica, 3 acta"
        )
        print(f"left behind in {shown}: {kept}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///chronica.db")
