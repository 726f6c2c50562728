"""The Chronica conformance suite: checks that a store keeps the store contract and the rules.

Also the contracts of the optional capabilities a store has (batch, listing, erasure, follow,
native, history: see :mod:`chronica_core.capabilities`): each group runs where the store has its
capability, fails where the suite declares it but the store lacks it, and is skipped, saying
why, otherwise.

Subclass :class:`ConformanceSuite` (or one of its groups) in a ``test_*.py`` module and supply a
``store`` fixture (a blocking ``Store``) and/or an ``async_store`` fixture (an ``AsyncStore``)::

    class TestMyStoreConformance(ConformanceSuite):
        declares_idempotent = True
        declares_capabilities = ("batch", "listing", "erasure")

        @pytest.fixture
        def store(self) -> Iterator[Store]:
            with MyStore("mystore://...") as store:
                yield store

Or run the whole suite against store URLs: ``pytest --chronica-store URL`` (repeatable),
``CHRONICA_TEST_STORES=URL,URL pytest``, or :func:`run`.
"""

import pytest

pytest.register_assert_rewrite(
    *(
        f"chronica_conformance.{module}"
        for module in (
            "base",
            "batch_contract",
            "capability_contract",
            "driver_failures",
            "erasure_contract",
            "exchange_contract",
            "follow_contract",
            "fork_contract",
            "harness",
            "history_base",
            "history_contract",
            "idempotent_contract",
            "json_contract",
            "listing_contract",
            "loop_contract",
            "loop_scenario",
            "native_contract",
            "one_clock",
            "process_contract",
            "retention_contract",
            "rules_contract",
            "size_contract",
            "stateful",
            "store_contract",
            "summary_contract",
            "telemetry_contract",
        )
    )
)

from chronica_conformance.base import SuiteBase, Target, require_capability  # noqa: E402
from chronica_conformance.batch_contract import BatchContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.capability_contract import CapabilityContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.driver_failures import DriverFailureContract, DriverFaults, FailureKind, Injection  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.erasure_contract import ErasureContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.exchange_contract import ExchangeContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.follow_contract import FollowContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.fork_contract import ForkContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.harness import AsyncHarness, Call, Harness, SyncHarness, rules_call, store_call  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.history_contract import HistoryContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.idempotent_contract import IdempotentContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.json_contract import JsonFormContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.listing_contract import ListingContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.loop_contract import AnyLoopContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.native_contract import NativeContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.process_contract import ProcessForkContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.retention_contract import RetentionContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.rules_contract import RulesContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.runner import run  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.size_contract import SizeContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.stateful import ReferenceModel, StatefulRules  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.store_contract import StoreContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.summary_contract import SummaryContract  # noqa: E402 - after the assert-rewrite registration
from chronica_conformance.telemetry_contract import TelemetryContract  # noqa: E402 - after the assert-rewrite registration

__all__ = [
    "AnyLoopContract",
    "AsyncHarness",
    "BatchContract",
    "Call",
    "CapabilityContract",
    "ConformanceSuite",
    "DriverFailureContract",
    "DriverFaults",
    "ErasureContract",
    "ExchangeContract",
    "FailureKind",
    "FollowContract",
    "ForkContract",
    "Harness",
    "HistoryContract",
    "IdempotentContract",
    "Injection",
    "JsonFormContract",
    "ListingContract",
    "NativeContract",
    "ProcessForkContract",
    "ReferenceModel",
    "RetentionContract",
    "RulesContract",
    "SizeContract",
    "StatefulRules",
    "StoreContract",
    "SuiteBase",
    "SummaryContract",
    "SyncHarness",
    "Target",
    "TelemetryContract",
    "require_capability",
    "rules_call",
    "run",
    "store_call",
]


class ConformanceSuite(
    StoreContract,
    IdempotentContract,
    RulesContract,
    SizeContract,
    BatchContract,
    ListingContract,
    ErasureContract,
    RetentionContract,
    FollowContract,
    NativeContract,
    HistoryContract,
    CapabilityContract,
    JsonFormContract,
    StatefulRules,
    DriverFailureContract,
    AnyLoopContract,
    TelemetryContract,
    ProcessForkContract,
):
    """Every group of the conformance suite, each case once per flavour the subclass supplies.

    The groups (numbered as in the repository's ``docs/contract.md``): the store contract
    (S1–S9), the idempotent contract (S10, R8), the rules (R1–R9), the size contract (content up
    to the store's limit), the batch, listing and erasure contracts (each where the store has the
    capability; the erasure contract also checks R10 with a cached owner), following (every
    store; the follow capability's own case where the store has it), the native and history
    contracts (native forms; forks, summaries, tool exchanges, an actum by id and pages back,
    where the store has the capability), missing capabilities
    refused before the store is touched, the public JSON form, the stateful model test and driver
    failures (E1), for an asyncio store, one store serving every event loop (the any-loop
    contract), and, where ``opentelemetry-sdk`` is installed, what the store's operations export
    to OpenTelemetry (the telemetry contract).

    Supply ``store`` and/or ``async_store`` fixtures; set ``declares_idempotent = True`` when the
    store promises idempotency (the idempotent group then fails instead of skipping) and
    ``declares_capabilities = ("batch", "listing", "erasure")`` (those it promises) likewise
    for the capability groups; supply a ``chronica_driver_faults`` fixture for the
    driver-failure group (skipped without one).
    """
