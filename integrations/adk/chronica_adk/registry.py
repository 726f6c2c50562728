"""``chronica+URL`` session-service URLs for ADK's command line (``adk web``, ``adk api_server``).

ADK's service registry chooses a session service by the URL's scheme, exactly (no patterns). An
agents folder's ``services.py`` calls :func:`register_session_services`, and then
``--session_service_uri chronica+postgresql://app@db/app`` (or ``chronica+sqlite:///sessions.db``,
``chronica+memory://``, ...) opens a :class:`chronica_adk.ChronicaSessionService` on the store
URL after ``chronica+``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.adk.cli.service_registry import ServiceRegistry, get_service_registry

from chronica_adk.service import ChronicaSessionService
from chronica_core import list_backends

__all__ = ["SCHEME_PREFIX", "SQLALCHEMY_DRIVERS", "register_session_services", "session_service_from_url"]

SCHEME_PREFIX = "chronica+"

SQLALCHEMY_DRIVERS = {
    "sqlite": ("aiosqlite", "pysqlite"),
    "postgresql": ("psycopg", "asyncpg", "psycopg2"),
    "mysql": ("pymysql", "aiomysql", "asyncmy", "mysqldb"),
    "mariadb": ("pymysql", "aiomysql", "asyncmy", "mariadbconnector"),
}
"""The drivers registered for a backend scheme that takes any driver (``sqlite+*``): ADK's
registry matches schemes exactly, so each ``chronica+<dialect>+<driver>`` is registered by name."""


def session_service_from_url(uri: str, **options: Any) -> ChronicaSessionService:
    """Open a session service on ``uri`` without its ``chronica+`` prefix: ADK's factory signature.

    Args:
        uri: ``chronica+`` followed by a Chronica store URL.
        options: ADK's options for the service; ``agents_dir`` is ADK's own and dropped, the
            rest are the store's options (``open_async_store(url, **options)``).

    Returns:
        A service that owns the store it opened (``await service.close()`` closes it).

    Raises:
        ValueError: ``uri`` does not start with ``chronica+``.
        UnknownBackend, BackendUnavailable, InvalidOption: from ``open_async_store``.
    """
    if not uri.startswith(SCHEME_PREFIX):
        raise ValueError(f"a Chronica session-service URL starts with {SCHEME_PREFIX!r}, not {uri[:20]!r}")
    options.pop("agents_dir", None)
    return ChronicaSessionService(uri.removeprefix(SCHEME_PREFIX), store_options=options)


def _schemes() -> list[str]:
    schemes: list[str] = []
    installed_backends, _broken = list_backends()
    for installed in installed_backends:
        for scheme in installed.backend.schemes:
            if scheme.endswith("+*"):
                dialect = scheme.removesuffix("+*")
                schemes.extend(f"{dialect}+{driver}" for driver in SQLALCHEMY_DRIVERS.get(dialect, ()))
            elif "*" not in scheme:
                schemes.append(scheme)
    return schemes


def register_session_services(
    registry: ServiceRegistry | None = None, *, extra_schemes: Iterable[str] = ()
) -> list[str]:
    """Register ``chronica+<scheme>`` with ADK for every store scheme of the installed backends.

    Args:
        registry: ADK's registry; ``None`` takes ADK's own (``get_service_registry()``).
        extra_schemes: more store schemes (without ``chronica+``), e.g. a third-party backend's
            ``"postgresql+pg8000"``.

    Returns:
        The schemes registered, ``chronica+`` included, in order.
    """
    target = get_service_registry() if registry is None else registry
    registered = [SCHEME_PREFIX + scheme for scheme in dict.fromkeys([*_schemes(), *extra_schemes])]
    for scheme in registered:
        target.register_session_service(scheme, session_service_from_url)
    return registered
