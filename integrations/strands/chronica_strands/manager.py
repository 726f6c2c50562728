"""``ChronicaSessionManager``: Strands' ``RepositorySessionManager`` over a Chronica repository.

What it adds to ``RepositorySessionManager``: an agent that joins a session whose chronicum
already holds a conversation (the person's messages, other agents') starts from that
conversation, where Strands would start a new agent empty.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from strands.session.repository_session_manager import RepositorySessionManager
from strands.types.agent import LocalAgent
from strands.types.session import SessionAgent

from chronica_core import Chronicarius, Store
from chronica_core.readable import ForeignActa
from chronica_strands.repository import ChronicaSessionRepository

__all__ = ["ChronicaSessionManager"]


class ChronicaSessionManager(RepositorySessionManager):
    """A Strands session manager keeping the session in one chronicum of one person.

    Pass it as ``Agent(session_manager=..., agent_id=...)`` (or to a ``Graph`` or ``Swarm``).
    The session id is the chronicum id. Every agent of the session, with this manager or another
    one on the same store and session id, reads the whole conversation: its own messages exactly,
    everyone else's from their readable content.

    Args:
        session_id: the chronicum id (1 to 255 characters, no NUL). Give a new conversation an
            unguessable one: ``chronica_core.new_chronicum_id()``.
        store: a store URL, an open blocking :class:`chronica_core.Store` or a
            :class:`chronica_core.Chronicarius` (see :class:`ChronicaSessionRepository`).
        owner_id: the person the session belongs to; only they read or write it.
        human_actor: the writer of the person's messages; the owner by default.
        foreign: which of other writers' thoughts and tool exchanges an agent reads (their
            messages always); by default none.
        store_options: options for ``open_store`` when ``store`` is a URL.
        **kwargs: passed on to ``RepositorySessionManager``.

    Raises:
        CapabilityUnsupported: the store lacks the ``native`` or ``batch`` capability.
        StoreError: the store failed reading the session.
        TypeError, UnknownBackend, BackendUnavailable, InvalidOption: as for the repository.
    """

    def __init__(
        self,
        session_id: str,
        store: str | Store | Chronicarius,
        *,
        owner_id: str,
        human_actor: str | None = None,
        foreign: ForeignActa | None = None,
        store_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.repository = ChronicaSessionRepository(
            store, owner_id=owner_id, human_actor=human_actor, foreign=foreign, store_options=store_options
        )
        try:
            super().__init__(session_id=session_id, session_repository=self.repository, **kwargs)
        except BaseException:
            self.repository.close()
            raise

    def initialize(self, agent: LocalAgent, **kwargs: Any) -> None:
        """Restore ``agent`` from the session, or start it from the conversation the session holds.

        An agent the session has no state for, joining a chronicum that holds acta, is recorded
        first and then restored like a returning agent: its messages are the conversation so far
        (its own ``messages=`` are replaced, as a restored agent's are).

        Raises:
            SessionException: another agent with the same ``agent_id`` was initialized here.
            StoreError: the store failed.
        """
        agent_id = agent.agent_id
        if (
            agent_id is not None
            and self.repository.read_agent(self.session_id, agent_id) is None
            and self.repository.has_acta(self.session_id)
        ):
            self.repository.create_agent(self.session_id, SessionAgent.from_agent(agent))
        super().initialize(agent, **kwargs)

    def close(self) -> None:
        """Close the store the manager opened from a URL (a store or keeper given is left open)."""
        self.repository.close()

    def __enter__(self) -> ChronicaSessionManager:
        return self

    def __exit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
