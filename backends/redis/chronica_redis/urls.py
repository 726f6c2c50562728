"""The store's URLs and options: which server or cluster, and how the store treats it.

- ``redis://[user:password@]host[:port][/db]`` and ``rediss://`` (TLS): one server; ``db`` is a
  number (redis-py would read ``/abc`` as database 0, so the store refuses it).
- ``redis+cluster://[user:password@]host[:port][,host[:port]...]`` and ``rediss+cluster://``: a
  Redis Cluster, found from any of the hosts named (the others are found from it). A cluster has
  only database 0.

The store's own options (:data:`STORE_OPTIONS`) may also ride in the URL's query
(``redis+cluster://a:7000,b:7000/?wait_replicas=1``), where only a URL can be given
(``CHRONICA_STORE``); an option given as an argument wins. The other query parameters, and the
connection options of :data:`CLIENT_OPTIONS`, go to redis-py; a query parameter redis-py would
not take (its connection would refuse it, or a cluster client drop it) is ``InvalidOption``.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit

import redis
import redis.cluster

from chronica_core.errors import InvalidOption, StoreError
from chronica_core.limits import MAX_CONTENT_OPTION, content_limit_option
from chronica_core.options import count_option, flag_option, seconds_option
from chronica_core.redaction import redact
from chronica_redis.durability import DEFAULT_CONTENT_LIMIT, Durability
from chronica_redis.keys import DEFAULT_PREFIX

__all__ = [
    "CLIENT_OPTIONS",
    "CLUSTER_SCHEMES",
    "DEFAULT_CLIENT_OPTIONS",
    "SCHEMES",
    "STORE_OPTIONS",
    "Settings",
    "Target",
    "settings_of",
]

BACKEND: Final = "redis"
CLUSTER_SCHEMES: Final = ("redis+cluster", "rediss+cluster")
SCHEMES: Final = ("redis", "rediss", *CLUSTER_SCHEMES)

STORE_OPTIONS: Final = (
    "prefix",
    "wait_replicas",
    "wait_timeout",
    "accept_eviction_loss",
    "accept_restart_loss",
    MAX_CONTENT_OPTION,
)
"""The options the store defines (see the README)."""

CLIENT_OPTIONS: Final = (
    "socket_timeout",
    "socket_connect_timeout",
    "socket_keepalive",
    "health_check_interval",
    "max_connections",
    "client_name",
    "username",
    "password",
    "ssl_ca_certs",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_cert_reqs",
    "ssl_check_hostname",
)
"""redis-py's connection options the store passes on (the others are its own to set)."""

DEFAULT_CLIENT_OPTIONS: Final = {"socket_connect_timeout": 5.0, "socket_timeout": 10.0}
"""What the store gives redis-py unless told otherwise: redis-py's own defaults wait forever on a
server that stops answering."""

_SECONDS_OPTIONS: Final = ("socket_timeout", "socket_connect_timeout", "health_check_interval")


@dataclass(frozen=True, slots=True)
class Target:
    """Where the store connects.

    Attributes:
        cluster: a Redis Cluster (``redis+cluster://``) rather than one server.
        url: a ``redis://`` or ``rediss://`` URL of the server, or of the cluster's first host,
            without the store's own options.
        others: the cluster's other hosts named in the URL, ``(host, port)``.
    """

    cluster: bool
    url: str
    others: tuple[tuple[str, int], ...] = ()

    def node_url(self, host: str, port: int) -> str:
        """The URL of one node of the cluster (its credentials and query those of :attr:`url`)."""
        parts = urlsplit(self.url)
        credentials = parts.netloc.rpartition("@")[0]
        at = f"{credentials}@" if credentials else ""
        shown = f"[{host}]" if ":" in host else host
        return parts._replace(netloc=f"{at}{shown}:{port}").geturl()


@dataclass(frozen=True, slots=True)
class Settings:
    """A store's options, checked.

    Attributes:
        target: where it connects.
        prefix: the prefix of its keys.
        wait_replicas: replicas that must confirm each write (0: none).
        wait_timeout: how long a write waits for them, in seconds.
        durability: the risks accepted at open.
        max_content_bytes: a lower content limit than the server's, or ``None``.
        client_options: keyword arguments for redis-py's client.
    """

    target: Target
    prefix: str
    wait_replicas: int
    wait_timeout: float
    durability: Durability
    max_content_bytes: int | None
    client_options: dict[str, Any]


def _target(url: str) -> tuple[Target, dict[str, str]]:
    """The target of ``url`` and the store options found in its query (removed from the URL)."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError as error:
        raise StoreError("redis: open", redact(f"not a Redis URL: {error}", url)) from error
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise StoreError("redis: open", f"not a Redis URL: the scheme must be one of {', '.join(SCHEMES)}")
    ours = {name: value for name, value in query if name in STORE_OPTIONS}
    _check_driver_query(
        [name for name, _ in query if name not in STORE_OPTIONS],
        scheme in CLUSTER_SCHEMES,
        scheme.startswith("rediss"),
    )
    rest = urlencode([(name, value) for name, value in query if name not in STORE_OPTIONS])
    if scheme not in CLUSTER_SCHEMES:
        database = parts.path.removeprefix("/")
        if database and not (database.isascii() and database.isdecimal()):
            raise StoreError(
                "redis: open",
                f"the database in a redis:// URL is a number (redis://host:6379/0), not {database!r}",
            )
        return Target(False, parts._replace(query=rest).geturl()), ours
    credentials, _, hosts = parts.netloc.rpartition("@")
    named = [host for host in hosts.split(",") if host]
    if not named:
        raise StoreError("redis: open", "a redis+cluster:// URL names at least one host")
    try:
        others = [_host_port(host) for host in named[1:]]
    except ValueError:
        raise StoreError(
            "redis: open", "a redis+cluster:// URL's hosts are host:port, comma-separated"
        ) from None
    if parts.path.strip("/") not in ("", "0"):
        raise StoreError("redis: open", "a Redis Cluster has only database 0: give no database in the URL")
    at = f"{credentials}@" if credentials else ""
    first = parts._replace(
        scheme=scheme.removesuffix("+cluster"), netloc=f"{at}{named[0]}", path="", query=rest
    )
    return Target(True, first.geturl(), tuple(others)), ours


def _driver_query_names(cluster: bool, tls: bool) -> set[str]:
    """The query parameters redis-py takes from a URL: its connection's arguments and the pool's size.

    A cluster client keeps only the connection arguments it allows and drops the others without
    a word, so those alone count for ``redis+cluster://``.
    """
    names = {"max_connections"}
    classes = (redis.SSLConnection if tls else redis.Connection).__mro__
    for class_ in classes:
        initialiser = vars(class_).get("__init__")
        if initialiser is not None and class_ is not object:
            parameters = inspect.signature(initialiser).parameters.values()
            names.update(
                p.name for p in parameters if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD
            )
    names.discard("self")
    if cluster:
        names &= set(redis.cluster.REDIS_ALLOWED_KEYS) - set(redis.cluster.KWARGS_DISABLED_KEYS)
    return names


def _check_driver_query(names: list[str], cluster: bool, tls: bool) -> None:
    """Raise ``InvalidOption`` for the first of a URL's query parameters redis-py would not take."""
    taken = _driver_query_names(cluster, tls) if names else set()
    for name in names:
        if name not in taken:
            close = difflib.get_close_matches(name, [*STORE_OPTIONS, *sorted(taken)], n=2, cutoff=0.6)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            kind = "a Redis Cluster client" if cluster else "a redis-py connection"
            raise InvalidOption(
                BACKEND,
                name,
                f"unknown URL query parameter{hint}: neither a store option ({', '.join(STORE_OPTIONS)}) "
                f"nor one {kind} takes",
            )


def _host_port(text: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` as ``(host, port)`` (6379 when no port is given)."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = text.partition(":")
    return host, int(port or "6379")


def _client_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """redis-py's options, checked (unknown ones are refused, naming the known)."""
    options: dict[str, Any] = dict(DEFAULT_CLIENT_OPTIONS)
    for name, value in given.items():
        if name not in CLIENT_OPTIONS:
            close = difflib.get_close_matches(name, [*STORE_OPTIONS, *CLIENT_OPTIONS], n=2, cutoff=0.6)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise InvalidOption(
                BACKEND,
                name,
                f"unknown option{hint}; known options: {', '.join(STORE_OPTIONS)}, and redis-py's "
                f"{', '.join(CLIENT_OPTIONS)}",
            )
        if name in _SECONDS_OPTIONS:
            value = seconds_option(BACKEND, name, value, least=0.01, most=3600.0)
        elif name == "max_connections":
            value = count_option(BACKEND, name, value, least=1, most=10_000)
        elif name in ("socket_keepalive", "ssl_check_hostname"):
            value = flag_option(BACKEND, name, value)
        options[name] = value
    return options


def settings_of(url: str, options: Mapping[str, Any]) -> Settings:
    """Check ``url`` and every option before anything connects.

    Raises:
        InvalidOption: an unknown option (the known ones are listed), or a malformed or
            out-of-range value (the reason gives the bounds).
        StoreError: ``redis: open: ...`` for a URL that is not a Redis URL.
    """
    target, in_url = _target(url)
    given = {**in_url, **{name: value for name, value in options.items() if name in STORE_OPTIONS}}
    prefix = str(given.get("prefix", DEFAULT_PREFIX))
    if not prefix or "{" in prefix or "}" in prefix:
        raise InvalidOption(BACKEND, "prefix", f"expected text without braces, got {prefix!r}")
    wait_replicas = count_option(BACKEND, "wait_replicas", given.get("wait_replicas", 0), least=0, most=64)
    wait_timeout = seconds_option(
        BACKEND, "wait_timeout", given.get("wait_timeout", 1.0), least=0.001, most=60.0
    )
    durability = Durability(
        flag_option(BACKEND, "accept_eviction_loss", given.get("accept_eviction_loss", False)),
        flag_option(BACKEND, "accept_restart_loss", given.get("accept_restart_loss", False)),
    )
    limit = given.get(MAX_CONTENT_OPTION)
    max_content = None if limit is None else content_limit_option(BACKEND, limit, DEFAULT_CONTENT_LIMIT)
    client = _client_options({name: value for name, value in options.items() if name not in STORE_OPTIONS})
    if wait_replicas and client["socket_timeout"] <= wait_timeout:
        raise InvalidOption(
            BACKEND,
            "socket_timeout",
            f"must be longer than wait_timeout ({wait_timeout:g} s): a write waits that long for replicas",
        )
    return Settings(target, prefix, wait_replicas, wait_timeout, durability, max_content, client)
