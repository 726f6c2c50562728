"""What a plan asks a Redis client to do: the operations, and the answer to a write.

Plans (:mod:`chronica_redis.plans`) yield these; the blocking and the asyncio clients
(:mod:`chronica_redis.clients`) perform them on a standalone server or a cluster, and send back
the answer or throw in redis-py's exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chronica_redis.scripts import Script

__all__ = ["Batch", "Call", "NodesConfig", "Operation", "Run", "Scan", "Written"]

Argument = str | int


@dataclass(frozen=True, slots=True)
class Run:
    """Run ``script`` on the node of ``keys`` (all of one slot).

    Attributes:
        script: the script.
        keys: its ``KEYS``.
        args: its ``ARGV``.
        writes: whether it may write: then the answer is a :class:`Written`, confirmed by
            ``WAIT`` on the same connection when the store waits for replicas.
    """

    script: Script
    keys: tuple[str, ...]
    args: tuple[Argument, ...]
    writes: bool = False


@dataclass(frozen=True, slots=True)
class Call:
    """One command (``args[0]`` is its name) on the node of its key; ``writes`` as for :class:`Run`."""

    args: tuple[Argument, ...]
    writes: bool = False


@dataclass(frozen=True, slots=True)
class Batch:
    """Reads on keys of several slots: the answers in order, one round trip per node."""

    calls: tuple[tuple[Argument, ...], ...]


@dataclass(frozen=True, slots=True)
class NodesConfig:
    """``CONFIG GET`` of ``names`` on every node (a cluster's replicas included).

    The answer is a list of ``(node, {name: value})``; a node that refuses ``CONFIG`` answers
    with the error instead of the dict.
    """

    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Written:
    """The answer to a writing :class:`Run` or :class:`Call`.

    Attributes:
        value: what the command answered.
        replicas: how many replicas confirmed it (``WAIT``'s answer), or ``None`` when the store
            does not wait for replicas.
    """

    value: Any
    replicas: int | None


@dataclass(frozen=True, slots=True)
class Scan:
    """The names of every key matching the glob ``match``, on every node (``SCAN``): a list."""

    match: str


Operation = Run | Call | Batch | NodesConfig | Scan
