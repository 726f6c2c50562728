"""Three agents share one chronicum in one asyncio loop; each reads its own context window first.

Run it with any store URL that has an asyncio flavour:

    python examples/three_agents.py                 # sqlite:///agents.db, as in the README
    python examples/three_agents.py memory://

It writes one new chronicum of the owner ``ardian`` and touches nothing else; it prints its id,
the command that reads it back, and what stays in the store.
"""

from __future__ import annotations

import asyncio
import sys

from chronica_core import ActorKind, Actum, ActumKind, AsyncChronicarius, new_chronicum_id, open_async_store
from chronica_core.redaction import masked_url

OWNER, CHRONICUM = "ardian", new_chronicum_id()  # a new conversation: an unguessable id


async def agent(chronicarius: AsyncChronicarius, name: str, kinds: list[ActumKind], last_n: int) -> None:
    """Read this agent's context window, 'call the model', and record the reply."""
    window = await chronicarius.get_acta(OWNER, CHRONICUM, actum_kinds=kinds, last_n=last_n)
    print(f"{name} reads {len(window)} acta: {[actum.content[:30] for actum in window]}")
    reply = f"{name} has read {len(window)} acta and answers."  # a model call would go here
    await chronicarius.record_actum(
        OWNER,
        Actum(CHRONICUM, ActumKind.MESSAGE, ActorKind.AGENT, name, reply),
        idempotency_key=f"{name}-reply-1",  # a retried reply lands once
    )


async def main(url: str) -> None:
    """Record the person's request, then let three agents answer concurrently."""
    async with open_async_store(url) as store:
        chronicarius = AsyncChronicarius(store)
        request = Actum(
            CHRONICUM, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "A quiet table for four, Friday 7pm."
        )
        await chronicarius.record_actum(OWNER, request, idempotency_key="request-1")
        await asyncio.gather(
            agent(chronicarius, "concierge", [], last_n=0),  # no kinds named, no limit: everything
            agent(chronicarius, "search", [ActumKind.MESSAGE], last_n=5),
            agent(chronicarius, "booking", [ActumKind.MESSAGE], last_n=3),
        )
        acta = await chronicarius.get_acta(OWNER, CHRONICUM)
        print(f"the chronicum holds {len(acta)} acta: {[actum.actor for actum in acta]}")

    # What the example made, and what it leaves behind.
    print(f"chronicum {CHRONICUM}: chronica acta {CHRONICUM} --owner {OWNER} --store {masked_url(url)}")
    kept = (
        "nothing (memory:// keeps nothing)" if url.startswith("memory:") else f"chronicum {CHRONICUM}, 4 acta"
    )
    print(f"left behind in {masked_url(url)}: {kept}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///agents.db"))
