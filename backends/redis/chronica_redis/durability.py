"""What a store checks when it opens: that the server keeps what it acknowledges, and how much it takes.

Two settings lose acknowledged acta without a word:

- ``maxmemory-policy`` other than ``noeviction``: a full server evicts keys (a whole chronicum's
  stream, its index, its owner's index) instead of refusing writes;
- ``appendonly no`` and no ``save`` points: the server keeps nothing on disk, and a restart, even
  a quick one under a supervisor, comes back empty (a cluster replica then copies the emptiness).

The store reads both on every node (a cluster's replicas too: each may become a primary) with
``CONFIG GET`` and refuses to open, naming the node and the setting, unless the option that
accepts that risk is given: ``accept_eviction_loss`` or ``accept_restart_loss``. A server that
refuses ``CONFIG`` (managed services often do) cannot be checked: the store refuses to open
unless both options are given. With an RDB ``save`` point only, a restart loses the writes since
the last snapshot; the store accepts that (said in the README) and checks nothing finer.

The same read gives the server's limits on one argument (``proto-max-bulk-len``) and on a whole
command (``client-query-buffer-limit``): the content limit is the smaller, less room for the
rest of the command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from chronica_core.errors import StoreError
from chronica_core.plans import Plan
from chronica_redis.operations import NodesConfig, Operation

__all__ = ["COMMAND_RESERVE", "CONFIG_NAMES", "DEFAULT_CONTENT_LIMIT", "Durability", "check"]

CONFIG_NAMES: Final = (
    "maxmemory-policy",
    "appendonly",
    "save",
    "proto-max-bulk-len",
    "client-query-buffer-limit",
)
"""The settings read on every node when a store opens."""

DEFAULT_CONTENT_LIMIT: Final = 512 * 1024 * 1024
"""``proto-max-bulk-len``'s default (512 MiB): the content limit when the server's cannot be read."""

COMMAND_RESERVE: Final = 64 * 1024
"""Room left in a command for what is not content (the script's keys, ids, actor, kind)."""


@dataclass(frozen=True, slots=True)
class Durability:
    """The risks a store was opened to accept.

    Attributes:
        accept_eviction_loss: open on a server that may evict keys when its memory is full.
        accept_restart_loss: open on a server that keeps nothing on disk.
    """

    accept_eviction_loss: bool = False
    accept_restart_loss: bool = False


def check(durability: Durability) -> Plan[Operation, int]:
    """Read every node's settings; refuse a server that loses acknowledged acta; return the content limit.

    Returns:
        The largest content, in bytes of UTF-8, that every node takes in one write.

    Raises:
        StoreError: ``redis: open: ...`` naming the node and setting that loses acta (and the
            option accepting the risk), or saying that a node refused ``CONFIG GET``.
    """
    answers: list[tuple[str, Any]] = yield NodesConfig(CONFIG_NAMES)
    limit = DEFAULT_CONTENT_LIMIT
    for node, settings in answers:
        if isinstance(settings, Exception):
            if durability.accept_eviction_loss and durability.accept_restart_loss:
                continue
            raise StoreError(
                "redis: open",
                f"{node} refused CONFIG GET ({settings}), so its eviction and persistence settings "
                "cannot be checked; open with accept_eviction_loss=True and accept_restart_loss=True "
                "once you have checked them yourself (maxmemory-policy noeviction, appendonly yes)",
            ) from settings
        policy = settings.get("maxmemory-policy", "noeviction")
        if policy != "noeviction" and not durability.accept_eviction_loss:
            raise StoreError(
                "redis: open",
                f"{node} has maxmemory-policy {policy}: when its memory is full it evicts keys, "
                "acta included, instead of refusing writes; set maxmemory-policy noeviction, or open "
                "with accept_eviction_loss=True to accept losing acta that way",
            )
        keeps_nothing = settings.get("appendonly") == "no" and not settings.get("save", "").strip()
        if keeps_nothing and not durability.accept_restart_loss:
            raise StoreError(
                "redis: open",
                f"{node} keeps nothing on disk (appendonly no, no save points): a restart loses every "
                "actum; set appendonly yes, or open with accept_restart_loss=True to accept that",
            )
        limit = min(limit, _node_limit(settings))
    return limit


def _node_limit(settings: dict[str, str]) -> int:
    """The content limit a node's ``proto-max-bulk-len`` and ``client-query-buffer-limit`` allow."""
    bulk = int(settings.get("proto-max-bulk-len", DEFAULT_CONTENT_LIMIT))
    command = int(settings.get("client-query-buffer-limit", 2 * DEFAULT_CONTENT_LIMIT))
    return max(min(bulk, command - COMMAND_RESERVE), 0)
