"""The pytest plugin (entry point ``pytest11``): ``--chronica-store URL`` and ``CHRONICA_TEST_STORES``.

``--chronica-sync-only`` / ``--chronica-async-only`` run one flavour of every case (of the added
suite and of any :class:`~chronica_conformance.ConformanceSuite` subclass).

With either, the whole suite (:mod:`chronica_conformance.test_stores`) is added to the run once
per URL, in each flavour the URL's backend provides. With neither, nothing is added: a run that
collects the suite itself (``pytest --pyargs chronica_conformance`` or :func:`run` with no URLs)
runs it against every installed backend that needs no server.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from chronica_conformance.harness import Flavour
from chronica_conformance.profiles import load_profile_from_environment, register_profiles
from chronica_core import BackendUnavailable, ChronicaError, Store, open_async_store, open_store
from chronica_core.redaction import masked_url, redact
from chronica_core.registry import registry

__all__ = [
    "ENVIRONMENT_VARIABLE",
    "FLAVOURS",
    "StoreCache",
    "discovered_urls",
    "missing_async_driver",
    "redacted_report",
    "requested_urls",
    "selected_flavours",
    "suite_module_path",
    "suite_urls",
]

FLAVOURS: tuple[Flavour, ...] = ("sync", "async")
"""The flavours of every case: through the blocking store and through the asyncio store."""

ENVIRONMENT_VARIABLE = "CHRONICA_TEST_STORES"
"""Comma-separated store URLs to run the suite against, like repeated ``--chronica-store``."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--chronica-store URL`` (repeatable)."""
    group = parser.getgroup("chronica", "Chronica conformance suite")
    group.addoption(
        "--chronica-store",
        action="append",
        default=[],
        dest="chronica_stores",
        metavar="URL",
        help=(
            "run the Chronica conformance suite against this store URL "
            f"(repeatable; also ${ENVIRONMENT_VARIABLE}, comma-separated)"
        ),
    )
    for flavour in FLAVOURS:
        group.addoption(
            f"--chronica-{flavour}-only",
            action="store_true",
            default=False,
            dest=f"chronica_{flavour}_only",
            help=f"run only the {flavour} flavour of the Chronica conformance suite's cases",
        )


def selected_flavours(config: pytest.Config) -> tuple[Flavour, ...]:
    """The flavours to run: both, or the one ``--chronica-sync-only`` / ``--chronica-async-only`` names.

    Raises:
        pytest.UsageError: both options were given.
    """
    only = [flavour for flavour in FLAVOURS if config.getoption(f"chronica_{flavour}_only", default=False)]
    if len(only) > 1:
        raise pytest.UsageError("--chronica-sync-only and --chronica-async-only exclude each other: give one")
    return tuple(only) or FLAVOURS


def requested_urls(config: pytest.Config) -> list[str]:
    """Return the URLs asked for by ``--chronica-store`` then ``CHRONICA_TEST_STORES``, each once."""
    urls = list(config.getoption("chronica_stores", default=None) or [])
    urls += [url.strip() for url in os.environ.get(ENVIRONMENT_VARIABLE, "").split(",")]
    return list(dict.fromkeys(url for url in urls if url))


def discovered_urls() -> list[str]:
    """Return the example URL of every installed backend that needs no server."""
    return [
        item.backend.example_url
        for item in registry().installed()
        if not item.backend.needs_server and item.backend.example_url
    ]


def suite_urls(config: pytest.Config) -> list[str]:
    """The URLs the suite module runs against: the requested ones, else the discovered ones."""
    return requested_urls(config) or discovered_urls()


def suite_module_path() -> str:
    """The file of :mod:`chronica_conformance.test_stores`, the module the plugin adds to a run."""
    return str(Path(__file__).with_name("test_stores.py"))


def pytest_configure(config: pytest.Config) -> None:
    """Register the hypothesis profiles; with requested URLs, check them and add the suite module.

    Raises ``pytest.UsageError`` for a URL no installed backend handles (the message says what
    to install).
    """
    register_profiles()
    load_profile_from_environment()
    selected_flavours(config)  # both options: a usage error before anything runs
    urls = requested_urls(config)
    if not urls:
        return
    for url in urls:
        try:
            registry().backend_for(url)
        except ChronicaError as error:
            raise pytest.UsageError(f"--chronica-store {masked_url(url)}: {error}") from error
    path = suite_module_path()
    if not any(Path(arg.split("::")[0]).resolve() == Path(path).resolve() for arg in config.args):
        config.args.append(path)
    config.stash[_SUITE_REQUESTED] = True


def redacted_report(report: pytest.TestReport | pytest.CollectReport, urls: list[str]) -> None:
    """Redact the secrets of ``urls`` from ``report``, in place, before anything shows or writes it.

    A failure's report holds the exception's text and, for each frame of its traceback, the
    frame's arguments (``url``, libpq's ``conninfo``) and with ``--showlocals`` its locals, besides
    the captured output and log records: any of them may hold a store URL's password. A report
    whose text holds none is left untouched; one that does keeps its outcome, with its failure
    shown as plain text.
    """
    if not any(masked_url(url) != url for url in urls):
        return

    def redacted(text: str) -> str:
        for url in urls:
            text = redact(text, url)
        return text

    longrepr: object = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        report.longrepr = (longrepr[0], longrepr[1], redacted(str(longrepr[2])))
    elif longrepr is not None:
        text = str(longrepr)
        if redacted(text) != text:
            report.longrepr = redacted(text)
    report.sections = [(title, redacted(content)) for title, content in report.sections]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Redact the requested URLs' secrets from each test report (see :func:`redacted_report`)."""
    report = yield
    redacted_report(report, requested_urls(item.config))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Redact the requested URLs' secrets from each collection report (an error while collecting)."""
    report = yield
    redacted_report(report, requested_urls(collector.config))
    return report


_ASYNC_PROBED = pytest.StashKey[dict[str, "str | None"]]()


def missing_async_driver(config: pytest.Config, url: str) -> str | None:
    """Why ``url``'s asyncio store cannot be opened here (its driver is not installed), or ``None``.

    Opens the asyncio store once per URL and run (an asyncio store connects on first use, so this
    touches no server) and closes it unused. When ``open_async_store`` raises
    ``BackendUnavailable``, the suite leaves the URL's async cases out and the run's summary says
    so once, with what to install (:func:`pytest_terminal_summary`), instead of one traceback per
    case. Any other error is left for the cases to show.

    Args:
        config: the run's configuration (it keeps the answer for the run).
        url: a requested store URL whose backend has an asyncio store.

    Returns:
        ``"the asyncio driver of <masked url> is not installed: <message naming what to install>"``,
        or ``None`` when the store opens (or fails otherwise).
    """
    probed = config.stash.setdefault(_ASYNC_PROBED, {})
    if url not in probed:
        probed[url] = None
        try:
            store = open_async_store(url)
        except BackendUnavailable as error:
            probed[url] = (
                f"the asyncio driver of {masked_url(url)} is not installed: {redact(str(error), url)}"
            )
        except ChronicaError:
            pass  # a bad URL or option: every async case shows it
        else:
            asyncio.run(store.close())
    return probed[url]


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """One line per URL whose async cases were left out for a missing asyncio driver."""
    for reason in config.stash.get(_ASYNC_PROBED, {}).values():
        if reason is not None:
            terminalreporter.write_line(f"chronica-conformance: async cases not run: {reason}")


_SUITE_REQUESTED = pytest.StashKey[bool]()
_GUARDED_FOLDER = pytest.StashKey["Path | None"]()


def _guarded_folder(config: pytest.Config) -> Path | None:
    """The highest folder above the suite module that pytest would skip without this plugin.

    That is a virtualenv (``.venv``, ``env``: a folder with ``pyvenv.cfg``) or a folder matching
    ``norecursedirs`` on the way from the file system's root to the installed suite; ``None``
    when pytest would walk down to the suite anyway (e.g. an editable install in a checkout).
    """
    if _GUARDED_FOLDER not in config.stash:
        others = config.pluginmanager.subset_hook_caller(
            "pytest_ignore_collect", remove_plugins=[sys.modules[__name__]]
        )
        suite = Path(suite_module_path())
        config.stash[_GUARDED_FOLDER] = next(
            (folder for folder in reversed(suite.parents) if others(collection_path=folder, config=config)),
            None,
        )
    return config.stash[_GUARDED_FOLDER]


@pytest.hookimpl(tryfirst=True)
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Let pytest walk down to the requested suite even inside a virtualenv, and to nothing else there.

    pytest folds an added path into a folder argument that contains it (``pytest`` run from a
    project whose ``.venv`` holds the suite adds it under ``.``), then skips the virtualenv on
    the way down. When the suite was requested, this keeps the suite module and the folders
    leading to it, and skips every other path below the folder pytest would have skipped.
    Returns ``False`` (collect), ``True`` (skip), or ``None`` (leave it to pytest's own rules).
    """
    if not config.stash.get(_SUITE_REQUESTED, False):
        return None
    guarded = _guarded_folder(config)
    if guarded is None:
        return None
    suite = Path(suite_module_path())
    if collection_path == suite or collection_path in suite.parents:
        return False if collection_path.is_relative_to(guarded) else None
    if collection_path.parent in suite.parents and collection_path.parent.is_relative_to(guarded):
        return True
    return None


class StoreCache:
    """Blocking stores opened by URL, shared by every case of a session, closed at its end."""

    def __init__(self) -> None:
        self._stores: dict[str, Store] = {}

    def store(self, url: str) -> Store:
        """Return the store for ``url``, opening it with ``open_store`` on first use."""
        if url not in self._stores:
            self._stores[url] = open_store(url)
        return self._stores[url]

    def close(self) -> None:
        """Close every store opened."""
        while self._stores:
            _, store = self._stores.popitem()
            store.close()


@pytest.fixture(scope="session")
def chronica_store_cache() -> Iterator[StoreCache]:
    """The session's :class:`StoreCache`."""
    cache = StoreCache()
    try:
        yield cache
    finally:
        cache.close()
