"""Fork a conversation at a message, answer it two ways, and compare the two branches.

Run it with any store URL whose backend has the history capability:

    python examples/fork_and_compare.py                      # memory://
    python examples/fork_and_compare.py sqlite:///chronica.db

It writes two chronica of the owner ``example-forks`` (the source and its fork) and prints their
ids and a command that reads each back; erase them with
``chronica erase --owner example-forks --all``.
"""

from __future__ import annotations

import sys

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, new_chronicum_id, open_store

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
        for chronicum_id in (source, fork.id):
            print(f"chronicum {chronicum_id}: chronica acta --owner {OWNER} {chronicum_id}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "memory://")
