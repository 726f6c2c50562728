"""Performing the plans' operations with redis-py: blocking and asyncio, one server or a cluster.

A script is sent by SHA-1 (``EVALSHA``) and loaded first on a server that answers ``NOSCRIPT``
(a fresh server, a replica just promoted). redis-py's cluster client sends each command to the
node of its key's slot and follows the cluster's redirections.

A write is confirmed by replicas with ``WAIT``, which counts only the writes of the connection it
is sent on: so when the store waits for replicas, a write and its ``WAIT`` go together in one
non-transactional pipeline, on one connection, to the node of the write's slot (on a cluster,
through a client of that node; a redirection answered there, after a failover or a slot's move,
refreshes the cluster client's map and sends the pair again: the node did not run the write).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Final

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import AskError, MovedError, NoScriptError, RedisError, ResponseError, TryAgainError

from chronica_redis.operations import Batch, Call, NodesConfig, Operation, Run, Scan, Written
from chronica_redis.urls import Settings

__all__ = [
    "REDIRECTED_TRIES",
    "SCAN_COUNT",
    "AsyncClient",
    "BlockingClient",
    "blocking_client",
    "open_async_client",
]

REDIRECTED_TRIES: Final = 5
"""How many times a confirmed write is sent again after its node answered that it does not hold
the slot (``MOVED``, ``ASK``, ``TRYAGAIN``), before the redirection is raised."""

SCAN_COUNT: Final = 1000
"""How many keys each ``SCAN`` step looks at."""

_REDIRECTED_PAUSE: Final = 0.05
"""Seconds between two such tries (a slot being moved settles)."""


def _command(operation: Run | Call) -> tuple[Any, ...]:
    if isinstance(operation, Run):
        return ("EVALSHA", operation.script.sha, len(operation.keys), *operation.keys, *operation.args)
    return operation.args


def _first_key(operation: Run | Call) -> str:
    return operation.keys[0] if isinstance(operation, Run) else str(operation.args[1])


def blocking_client(settings: Settings) -> redis.Redis | RedisCluster:
    """The redis-py client of ``settings`` (a cluster client connects to find the cluster's nodes)."""
    options = {**settings.client_options, "decode_responses": True}
    target = settings.target
    if not target.cluster:
        return redis.Redis.from_url(target.url, **options)
    node: Any = ClusterNode  # redis-py's blocking cluster module has no annotations
    others = [node(host, port) for host, port in target.others]
    return RedisCluster.from_url(target.url, startup_nodes=others, **options)


class BlockingClient:
    """Performs operations with a blocking ``redis.Redis`` or ``redis.cluster.RedisCluster``."""

    def __init__(self, client: redis.Redis | RedisCluster, settings: Settings) -> None:
        self.client: Any = client
        """The ``redis.Redis`` or ``redis.cluster.RedisCluster`` (whose module has no annotations)."""
        self._wait = (settings.wait_replicas, round(settings.wait_timeout * 1000))

    def perform(self, operation: Operation) -> Any:
        """Perform ``operation`` and return its answer (see :mod:`chronica_redis.operations`)."""
        if isinstance(operation, Run | Call):
            if operation.writes and self._wait[0]:
                return self._confirmed(operation)
            value = self._send(self.client, operation)
            return Written(value, None) if operation.writes else value
        if isinstance(operation, Batch):
            client = self.client
            cluster = isinstance(client, RedisCluster)
            pipeline = client.pipeline() if cluster else client.pipeline(transaction=False)
            for call in operation.calls:
                pipeline.execute_command(*call)
            return pipeline.execute()
        if isinstance(operation, Scan):
            return list(self.client.scan_iter(match=operation.match, count=SCAN_COUNT))
        return self._nodes_config(operation)

    def _send(self, client: Any, operation: Run | Call) -> Any:
        try:
            return client.execute_command(*_command(operation))
        except NoScriptError:
            assert isinstance(operation, Run)
            client.script_load(operation.script.source)
            return client.execute_command(*_command(operation))

    def _confirmed(self, operation: Run | Call) -> Written:
        key = _first_key(operation)
        failure: Exception | None = None
        for _ in range(REDIRECTED_TRIES):
            node = self._node_for(key)
            pipeline = node.pipeline(transaction=False)
            pipeline.execute_command(*_command(operation))
            pipeline.execute_command("WAIT", *self._wait)
            value, replicas = pipeline.execute(raise_on_error=False)
            if isinstance(value, NoScriptError) and isinstance(operation, Run):
                node.script_load(operation.script.source)
                continue
            if isinstance(value, MovedError | AskError | TryAgainError):
                failure = value
                self._refresh(key)
                time.sleep(_REDIRECTED_PAUSE)
                continue
            for answer in (value, replicas):
                if isinstance(answer, Exception):
                    raise answer
            return Written(value, int(replicas))
        assert failure is not None
        raise failure

    def _node_for(self, key: str) -> Any:
        client: Any = self.client
        if isinstance(self.client, RedisCluster):
            return client.get_redis_connection(client.get_node_from_key(key))
        return client

    def _refresh(self, key: str) -> None:
        """Let the cluster client learn where ``key``'s slot lives now (a read through it)."""
        if isinstance(self.client, RedisCluster):
            with contextlib.suppress(RedisError):
                self.client.exists(key)

    def _nodes_config(self, operation: NodesConfig) -> list[tuple[str, Any]]:
        if not isinstance(self.client, RedisCluster):
            pool = self.client.connection_pool.connection_kwargs
            name = f"{pool.get('host', 'localhost')}:{pool.get('port', 6379)}"
            self.client.ping()  # a server out of reach, a refused login or database: raised as such
            try:
                return [(name, _as_dict(self.client.execute_command("CONFIG", "GET", *operation.names)))]
            except ResponseError as error:
                return [(name, error)]
        cluster: Any = self.client
        return [
            (
                node.name,
                _config(
                    lambda node=node: cluster.execute_command(
                        "CONFIG", "GET", *operation.names, target_nodes=node
                    )
                ),
            )
            for node in cluster.get_nodes()
        ]

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()


def _config(read: Any) -> Any:
    """A cluster node's ``CONFIG GET`` answer as a dict, or the error it failed with.

    A node out of reach is returned as one that refused: its settings cannot be checked either.
    """
    try:
        answer = read()
    except RedisError as error:
        return error
    return _as_dict(answer)


def _as_dict(answer: Any) -> Any:
    if isinstance(answer, dict):
        return answer
    return dict(zip(answer[::2], answer[1::2], strict=True))


class AsyncClient:
    """Performs operations in one event loop with ``redis.asyncio.Redis`` or its ``RedisCluster``."""

    def __init__(self, client: redis.asyncio.Redis | AsyncRedisCluster, settings: Settings) -> None:
        self.client = client
        self._settings = settings
        self._wait = (settings.wait_replicas, round(settings.wait_timeout * 1000))
        self._nodes: dict[tuple[str, int], redis.asyncio.Redis] = {}

    async def perform(self, operation: Operation) -> Any:
        """Perform ``operation`` and return its answer (see :mod:`chronica_redis.operations`)."""
        if isinstance(operation, Run | Call):
            if operation.writes and self._wait[0]:
                return await self._confirmed(operation)
            value = await self._send(self.client, operation)
            return Written(value, None) if operation.writes else value
        if isinstance(operation, Batch):
            pipeline = (
                self.client.pipeline()
                if isinstance(self.client, AsyncRedisCluster)
                else self.client.pipeline(transaction=False)
            )
            for call in operation.calls:
                pipeline.execute_command(*call)
            return await pipeline.execute()
        if isinstance(operation, Scan):
            return [key async for key in self.client.scan_iter(match=operation.match, count=SCAN_COUNT)]
        return await self._nodes_config(operation)

    async def _send(self, client: redis.asyncio.Redis | AsyncRedisCluster, operation: Run | Call) -> Any:
        try:
            return await client.execute_command(*_command(operation))
        except NoScriptError:
            assert isinstance(operation, Run)
            await client.script_load(operation.script.source)
            return await client.execute_command(*_command(operation))

    async def _confirmed(self, operation: Run | Call) -> Written:
        key = _first_key(operation)
        failure: Exception | None = None
        for _ in range(REDIRECTED_TRIES):
            node = await self._node_for(key)
            pipeline = node.pipeline(transaction=False)
            pipeline.execute_command(*_command(operation))
            pipeline.execute_command("WAIT", *self._wait)
            value, replicas = await pipeline.execute(raise_on_error=False)
            if isinstance(value, NoScriptError) and isinstance(operation, Run):
                await node.script_load(operation.script.source)
                continue
            if isinstance(value, MovedError | AskError | TryAgainError):
                failure = value
                await self._refresh(key)
                await asyncio.sleep(_REDIRECTED_PAUSE)
                continue
            for answer in (value, replicas):
                if isinstance(answer, Exception):
                    raise answer
            return Written(value, int(replicas))
        assert failure is not None
        raise failure

    async def _node_for(self, key: str) -> redis.asyncio.Redis:
        if not isinstance(self.client, AsyncRedisCluster):
            return self.client
        await self.client.initialize()  # once per client: it reads the cluster's slots
        node = self.client.get_node_from_key(key)
        assert node is not None
        address = (str(node.host), int(node.port))
        client = self._nodes.get(address)
        if client is None:
            options = {**self._settings.client_options, "decode_responses": True}
            url = self._settings.target.node_url(*address)
            client = self._nodes[address] = redis.asyncio.Redis.from_url(url, **options)
        return client

    async def _refresh(self, key: str) -> None:
        if isinstance(self.client, AsyncRedisCluster):
            with contextlib.suppress(RedisError):
                await self.client.exists(key)

    async def _nodes_config(self, operation: NodesConfig) -> list[tuple[str, Any]]:
        names = operation.names
        if not isinstance(self.client, AsyncRedisCluster):
            server: Any = self.client
            pool = server.connection_pool.connection_kwargs
            name = f"{pool.get('host', 'localhost')}:{pool.get('port', 6379)}"
            await server.ping()  # a server out of reach, a refused login or database: raised as such
            try:
                return [(name, _as_dict(await server.execute_command("CONFIG", "GET", *names)))]
            except ResponseError as error:
                return [(name, error)]
        await self.client.initialize()
        answers: list[tuple[str, Any]] = []
        for node in self.client.get_nodes():
            try:
                answer = await self.client.execute_command("CONFIG", "GET", *names, target_nodes=node)
            except RedisError as error:
                answers.append((node.name, error))
                continue
            answers.append((node.name, _as_dict(answer)))
        return answers

    async def close(self) -> None:
        """Close the client and the node clients, in this loop."""
        for node in self._nodes.values():
            await node.aclose()
        self._nodes.clear()
        await self.client.aclose()


def open_async_client(settings: Settings) -> AsyncClient:
    """An :class:`AsyncClient` for the running loop (nothing is connected yet)."""
    options = {**settings.client_options, "decode_responses": True}
    target = settings.target
    client: redis.asyncio.Redis | AsyncRedisCluster
    if target.cluster:
        from redis.asyncio.cluster import ClusterNode as AsyncClusterNode

        others = [AsyncClusterNode(host, port) for host, port in target.others]
        client = AsyncRedisCluster.from_url(target.url, startup_nodes=others, **options)
    else:
        client = redis.asyncio.Redis.from_url(target.url, **options)
    return AsyncClient(client, settings)
