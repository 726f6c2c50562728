"""The backend registry: plugins found through the ``chronica`` entry-point group, chosen by URL.

Each entry point is loaded on its own: one that fails to import is listed with its error and
never hides the others.
"""

from __future__ import annotations

import difflib
import fnmatch
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar, cast

import pluggy

from chronica_core.errors import BackendConflict, BackendUnavailable, InvalidOption, UnknownBackend
from chronica_core.hookspecs import PROJECT_NAME, Backend, BackendSpec
from chronica_core.install import install_command
from chronica_core.redaction import masked_url, redact_error
from chronica_core.store import AsyncStore, Store

__all__ = [
    "BrokenPlugin",
    "InstalledBackend",
    "Registry",
    "known_distribution",
    "list_backends",
    "lowercase_scheme",
    "open_async_store",
    "open_store",
    "registry",
    "url_scheme",
]

KNOWN_DISTRIBUTIONS = {
    "postgresql": "chronica-postgres[binary]",
    "postgres": "chronica-postgres[binary]",
    "mongodb": "chronica-mongodb",
    "mongodb+srv": "chronica-mongodb",
    "redis": "chronica-redis",
    "rediss": "chronica-redis",
    "redis+cluster": "chronica-redis",
    "rediss+cluster": "chronica-redis",
    "sqlite": "chronica-sqlalchemy",
    "sqlite+aiosqlite": "chronica-sqlalchemy[aiosqlite]",
    "mysql": "chronica-sqlalchemy[mysql]",
    "mariadb": "chronica-sqlalchemy[mysql]",
}
"""The first-party distribution (with the smallest extra that suffices) to install for a scheme,
for when none is installed; a dialect's other drivers (``mysql+asyncmy``) fall back on the dialect's."""


def known_distribution(scheme: str) -> str | None:
    """The first-party requirement that handles ``scheme`` (see :data:`KNOWN_DISTRIBUTIONS`), or ``None``.

    ``postgresql+DRIVER`` is SQLAlchemy's (``chronica-sqlalchemy[postgresql]``), bare ``postgresql``
    chronica-postgres's.
    """
    if scheme in KNOWN_DISTRIBUTIONS:
        return KNOWN_DISTRIBUTIONS[scheme]
    dialect, plus, _ = scheme.partition("+")
    if dialect == "postgresql" and plus:
        return "chronica-sqlalchemy[postgresql]"
    return KNOWN_DISTRIBUTIONS.get(dialect)


_log = logging.getLogger("chronica.registry")


@dataclass(frozen=True, slots=True)
class BrokenPlugin:
    """An entry point that could not be loaded.

    Attributes:
        name: the entry point's name.
        target: what it points at, e.g. ``"chronica_postgres.plugin"``.
        distribution: the distribution that declared it (``""`` if unknown).
        error: the exception, as text.
    """

    name: str
    target: str
    distribution: str
    error: str


@dataclass(frozen=True, slots=True)
class InstalledBackend:
    """A backend and where it came from, as listed by :func:`list_backends`.

    Attributes:
        backend: what the plugin declared.
        plugin: the entry point (or registered plugin) name that provided it.
    """

    backend: Backend
    plugin: str


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+._-]*")
"""What a scheme may hold: RFC 3986's letters, digits, "+", "." and "-", and "_" (no ":", "@" or "/")."""


def url_scheme(url: str) -> str:
    """Return the lowercased scheme of ``url`` (``"mysql+pymysql"`` for ``mysql+pymysql://...``).

    Raises ``UnknownBackend`` when ``url`` is not a str, or has no ``scheme://`` prefix; the
    message shows the URL with its password masked (see :func:`chronica_core.redaction.masked_url`).
    """
    if not isinstance(url, str):
        raise UnknownBackend(f"the store URL must be a str such as memory://, not {type(url).__name__}")
    scheme, separator, _ = url.partition("://")
    if not separator or not _SCHEME.fullmatch(scheme):
        raise UnknownBackend(f"{masked_url(url)!r} is not a store URL; expected scheme://..., e.g. memory://")
    return scheme.lower()


def lowercase_scheme(url: str) -> str:
    """``url`` with its scheme in lower case (``SQLITE:///x.db`` gives ``sqlite:///x.db``); the rest kept.

    Schemes are case-insensitive (RFC 3986) but drivers match them exactly, so a store is opened
    on the lower-case form. Raises what :func:`url_scheme` raises.
    """
    scheme = url_scheme(url)
    return scheme + url[len(scheme) :]


class Registry:
    """The installed backends, found through pluggy and the ``chronica`` entry-point group.

    Args:
        load_entry_points: discover installed plugins (``False`` gives an empty registry, for tests).
    """

    def __init__(self, *, load_entry_points: bool = True) -> None:
        self.plugin_manager = pluggy.PluginManager(PROJECT_NAME)
        self.plugin_manager.add_hookspecs(BackendSpec)
        self.broken: list[BrokenPlugin] = []
        if load_entry_points:
            for entry_point in entry_points(group=PROJECT_NAME):
                self._load(entry_point)

    def register(self, plugin: object, name: str) -> None:
        """Register a plugin object (a module or instance with hook implementations) by ``name``."""
        self.plugin_manager.register(plugin, name=name)

    def installed(self) -> list[InstalledBackend]:
        """Return every backend the loaded plugins declare, in registration order.

        A plugin whose hook raises is moved to :attr:`broken` and left out.
        """
        found: list[InstalledBackend] = []
        for implementation in self.plugin_manager.hook.chronica_backends.get_hookimpls():
            try:
                backends: list[Backend] = implementation.function()  # type: ignore[assignment]
            except Exception as error:  # noqa: BLE001 - a broken plugin is listed, not fatal
                self._mark_broken(implementation.plugin_name, repr(implementation.plugin), error)
                continue
            found.extend(InstalledBackend(backend, implementation.plugin_name) for backend in backends)
        return found

    def backend_for(self, url: str) -> Backend:
        """Return the backend that handles ``url``'s scheme.

        Raises:
            UnknownBackend: no installed backend claims the scheme; the message lists the installed
                schemes, suggests a near miss and names the distribution to install if known.
            BackendConflict: two backends claim the scheme equally; the message names both.
        """
        scheme = url_scheme(url)
        installed = self.installed()
        exact = [item for item in installed if scheme in item.backend.schemes]
        claims = exact or [
            item
            for item in installed
            if any(
                "*" in pattern and fnmatch.fnmatchcase(scheme, pattern) for pattern in item.backend.schemes
            )
        ]
        if len(claims) > 1:
            names = " and ".join(f"{item.backend.name} (plugin {item.plugin})" for item in claims)
            raise BackendConflict(f"scheme {scheme!r} is claimed by {names}; uninstall one of them")
        if claims:
            return claims[0].backend
        raise UnknownBackend(self._unknown_message(scheme, installed))

    def open_store(self, url: str, **options: Any) -> Store:
        """Open a blocking store for ``url``; see :func:`open_store`."""
        backend = self.backend_for(url)
        return _opened(backend, backend.open, lowercase_scheme(url), options)

    def open_async_store(self, url: str, **options: Any) -> AsyncStore:
        """Open an asyncio store for ``url``; see :func:`open_async_store`."""
        backend = self.backend_for(url)
        if backend.open_async is None:
            raise BackendUnavailable(f"backend {backend.name!r} has no asyncio store")
        return _opened(backend, backend.open_async, lowercase_scheme(url), options)

    def _load(self, entry_point: EntryPoint) -> None:
        distribution = entry_point.dist.name if entry_point.dist is not None else ""
        try:
            self.register(entry_point.load(), entry_point.name)
        except Exception as error:  # noqa: BLE001 - one broken plugin must not hide the others
            self._mark_broken(entry_point.name, entry_point.value, error, distribution)

    def _mark_broken(self, name: str, target: str, error: Exception, distribution: str = "") -> None:
        if self.plugin_manager.has_plugin(name):
            self.plugin_manager.unregister(name=name)
        self.broken.append(BrokenPlugin(name, target, distribution, f"{type(error).__name__}: {error}"))
        _log.warning("plugin %r (%s) failed to load: %s", name, target, self.broken[-1].error)

    def _unknown_message(self, scheme: str, installed: list[InstalledBackend]) -> str:
        schemes = sorted({s for item in installed for s in item.backend.schemes})
        shown = [pattern.replace("*", "<driver>") for pattern in schemes]
        message = f"no installed backend handles {scheme}:// (installed: {', '.join(shown) or 'none'})"
        near = difflib.get_close_matches(scheme, _typeable(scheme, schemes), n=1)
        if near:
            message += f"; did you mean {near[0]}://?"
        distribution = known_distribution(scheme)
        if distribution:
            message += f"; {install_command(distribution)} to add it"
        for plugin in self.broken:
            message += f"; plugin {plugin.name!r} failed to load ({plugin.error})"
        return message


def _typeable(scheme: str, schemes: list[str]) -> list[str]:
    """The schemes a near miss of ``scheme`` may be suggested from, none of them a pattern.

    A pattern such as ``postgresql+*`` stands for the scheme with the driver ``scheme`` names
    (``postgresq+psycopg`` may have meant ``postgresql+psycopg``); without a driver, it stands for
    nothing one could type.
    """
    _, plus, driver = scheme.partition("+")
    typeable = [name for name in schemes if "*" not in name]
    if plus and driver:
        typeable += [pattern.replace("*", driver) for pattern in schemes if pattern.endswith("+*")]
    return typeable


Opened = TypeVar("Opened", Store, AsyncStore)


def _opened(backend: Backend, opener: Callable[..., Opened], url: str, options: dict[str, Any]) -> Opened:
    """Open a store with the backend's ``opener``; whatever it raises has ``url``'s secrets redacted."""
    _log.debug("opening %s with backend %r", masked_url(url), backend.name)
    try:
        return opener(url, **options)
    except ModuleNotFoundError as error:
        redact_error(error, url)
        install = (
            install_command(backend.install) if backend.install else f"install the driver {error.name!r}"
        )
        raise BackendUnavailable(
            f"backend {backend.name!r} needs {error.name!r}, which is not installed: {install}"
        ) from error
    except BaseException as error:  # a third-party backend's driver may quote the URL
        redact_error(error, url)
        raise


_registry: Registry | None = None
_registry_lock = threading.Lock()


def registry(*, reload: bool = False) -> Registry:
    """Return the process-wide registry, discovering plugins on first use (or when ``reload``)."""
    global _registry
    with _registry_lock:
        if _registry is None or reload:
            _registry = Registry()
        return _registry


def open_store(url: str, **options: Any) -> Store:
    """Open a blocking store chosen by ``url``'s scheme, e.g. ``memory://`` or ``postgresql://...``.

    Args:
        url: the store URL; its scheme, in any case, selects the backend, which is given the URL
            with the scheme in lower case.
        options: passed to the backend's factory (pool size, ``auto_migrate``, ...), but
            ``encryption_keys``: a :class:`chronica_core.encryption.KeyProvider`, which wraps the
            store so that content is encrypted at rest (:func:`chronica_core.encrypted.encrypted_store`).

    Returns:
        A :class:`Store`; close it (or use it as a context manager) when done.

    Raises:
        UnknownBackend: no installed backend handles the scheme (the message says what to install),
            or ``url`` is not a str (``None`` from an unset environment variable).
        BackendUnavailable: the backend's driver is not installed (the message says what to install),
            or ``encryption_keys`` was given without the ``cryptography`` package.
        BackendConflict: two installed backends claim the scheme.
        InvalidOption: an option the backend does not take, or ``encryption_keys`` that is not a
            key provider.
        StoreError: the backend could not connect or migrate.
    """
    wrap = _encryption(options.pop(ENCRYPTION_OPTION, None))
    store = registry().open_store(url, **options)
    return store if wrap is None else cast(Store, wrap(store))


def open_async_store(url: str, **options: Any) -> AsyncStore:
    """The asyncio twin of :func:`open_store`: returns an :class:`AsyncStore`; same errors.

    Also raises ``BackendUnavailable`` when the backend has no asyncio store.
    """
    wrap = _encryption(options.pop(ENCRYPTION_OPTION, None))
    store = registry().open_async_store(url, **options)
    return store if wrap is None else cast(AsyncStore, wrap(store))


ENCRYPTION_OPTION = "encryption_keys"
"""The ``open_store`` option that encrypts a store at rest with a key provider's keys."""


def _encryption(keys: object) -> Callable[[Store | AsyncStore], Any] | None:
    """What wraps a store opened with ``encryption_keys=keys`` (``None``: no encryption).

    Checked before the store is opened, so a refusal leaves nothing open.

    Raises:
        BackendUnavailable: the ``cryptography`` package is not installed.
        InvalidOption: ``keys`` is not a :class:`chronica_core.encryption.KeyProvider`.
    """
    if keys is None:
        return None
    try:
        from chronica_core.encrypted import encrypted_store  # needs the optional cryptography
        from chronica_core.encryption import KeyProvider
    except ModuleNotFoundError as error:
        raise BackendUnavailable(
            f"{ENCRYPTION_OPTION} needs the cryptography package: {install_command('chronica[encryption]')}"
        ) from error
    if not isinstance(keys, KeyProvider):
        raise InvalidOption(
            "encryption", ENCRYPTION_OPTION, "must be a KeyProvider (chronica_core.encryption)"
        )
    return lambda store: encrypted_store(store, keys)


def list_backends() -> tuple[list[InstalledBackend], list[BrokenPlugin]]:
    """Return the installed backends and the plugins that failed to load, for ``chronica backends``."""
    current = registry()
    installed = current.installed()
    return installed, list(current.broken)
