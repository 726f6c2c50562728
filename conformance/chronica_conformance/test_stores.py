"""The whole conformance suite against store URLs (``--chronica-store``, ``CHRONICA_TEST_STORES``).

Collected when the plugin adds it for requested URLs, or by ``pytest --pyargs chronica_conformance``
(then, without URLs, against every installed backend that needs no server).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chronica_conformance import ConformanceSuite, Target
from chronica_conformance.plugin import StoreCache, missing_async_driver, selected_flavours, suite_urls
from chronica_core import AsyncStore, Store, open_async_store, open_store
from chronica_core.registry import registry


class TestChronicaStores(ConformanceSuite):
    """Every case, for each URL, in each flavour its backend provides (ids: ``[<url>-<flavour>]``)."""

    def chronica_targets(self, metafunc: pytest.Metafunc) -> list[Target]:
        """One target per URL and flavour; a backend must have the capabilities it declares.

        A URL whose asyncio driver is not installed gets no async target (the run's summary says
        what to install: :func:`~chronica_conformance.plugin.missing_async_driver`).
        """
        targets: list[Target] = []
        wants_async = "async" in selected_flavours(metafunc.config)
        for url in suite_urls(metafunc.config):
            backend = registry().backend_for(url)
            capabilities = tuple(backend.capabilities)
            targets.append(Target("sync", url, backend.idempotent, capabilities))
            if (
                backend.open_async is not None
                and wants_async
                and missing_async_driver(metafunc.config, url) is None
            ):
                targets.append(Target("async", url, backend.idempotent, capabilities))
        return targets

    @pytest.fixture
    def store(self, chronica_target: Target, chronica_store_cache: StoreCache) -> Store:
        """The blocking store for the target's URL, shared by the session."""
        assert chronica_target.url is not None
        return chronica_store_cache.store(chronica_target.url)

    @pytest.fixture
    def store_to_close(self, chronica_target: Target) -> Iterator[Store]:
        """A blocking store of its own for the target's URL (the shared one must stay open)."""
        assert chronica_target.url is not None
        store = open_store(chronica_target.url)
        try:
            yield store
        finally:
            store.close()

    @pytest.fixture
    def async_store(self, chronica_target: Target) -> AsyncStore:
        """A fresh async store for the target's URL; the harness closes it in the test's loop."""
        assert chronica_target.url is not None
        return open_async_store(chronica_target.url)
