"""A booking agent follows the chronicum while the others write, then resumes where it stopped.

Run it with any store URL that has an asyncio flavour:

    python examples/follow.py                 # sqlite:///chronica.db, the embedded default
    python examples/follow.py memory://

It writes one new chronicum of the owner ``ardian`` and touches nothing else; it prints its id,
the command that reads it back, and what stays in the store.
"""

from __future__ import annotations

import asyncio
import sys

from chronica_core import ActorKind, Actum, ActumKind, AsyncChronicarius, new_chronicum_id, open_async_store
from chronica_core.redaction import masked_url

OWNER, CHRONICUM = "ardian", new_chronicum_id()  # a new conversation: an unguessable id


def say(actor_kind: ActorKind, actor: str, content: str, kind: ActumKind = ActumKind.MESSAGE) -> Actum:
    """An actum of the example's chronicum."""
    return Actum(CHRONICUM, kind, actor_kind, actor, content)


async def booking_agent(chronicarius: AsyncChronicarius, after: str, wanted: int) -> str:
    """Print the next ``wanted`` messages after the actum ``after``; return the last one's id."""
    seen = 0
    last = after
    async for actum in chronicarius.follow(OWNER, CHRONICUM, after=after, actum_kinds=["message"]):
        print(f"booking sees {actum.actor}: {actum.content}")
        last, seen = actum.id, seen + 1
        if seen == wanted:
            break
    return last


async def main(url: str) -> None:
    """The person asks, the search agent thinks and answers while the booking agent follows."""
    async with open_async_store(url) as store:
        chronicarius = AsyncChronicarius(store)
        request = await chronicarius.record_actum(
            OWNER, say(ActorKind.HUMAN, OWNER, "A quiet table for four, Friday 7pm.")
        )
        following = asyncio.create_task(booking_agent(chronicarius, request.id, wanted=2))
        await chronicarius.record_actum(
            OWNER, say(ActorKind.AGENT, "search", "Look in Kemang first.", ActumKind.THOUGHT)
        )
        await chronicarius.record_actum(OWNER, say(ActorKind.AGENT, "search", "Rumah Teduh has one."))
        await chronicarius.record_actum(OWNER, say(ActorKind.HUMAN, OWNER, "Rumah Teduh, please."))
        await chronicarius.record_actum(OWNER, say(ActorKind.HUMAN, OWNER, "Under Ardian."))
        last = await following  # it stopped after two messages; a third is waiting
        print("booking stopped; it resumes after the last message it saw")
        await booking_agent(chronicarius, last, wanted=1)

    # What the example made, and what it leaves behind.
    print(f"chronicum {CHRONICUM}: chronica acta {CHRONICUM} --owner {OWNER} --store {masked_url(url)}")
    kept = (
        "nothing (memory:// keeps nothing)" if url.startswith("memory:") else f"chronicum {CHRONICUM}, 5 acta"
    )
    print(f"left behind in {masked_url(url)}: {kept}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///chronica.db"))
