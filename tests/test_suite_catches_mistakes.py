"""The conformance suite fails each deliberately broken store of broken_stores.py, naming the case.

Each run is the suite in process, through pytester, against one store. A correct store of the
same shape passes the whole suite, so a broken store's failures come from its mistake; a broken
store is run on the cases it must fail and one case every store passes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from chronica_conformance import harness
from chronica_conformance.profiles import register_profiles
from hypothesis import Phase, settings

pytest_plugins = ("pytester",)

TESTS = Path(__file__).parent

Outcomes = tuple[set[str], set[str], set[str]]
SuiteRun = Callable[..., Outcomes]

SUITE_MODULE = """
import pytest

import broken_stores
from chronica_conformance import ConformanceSuite


class TestBrokenStore(ConformanceSuite):
    declares_idempotent = True
    declares_capabilities = {capabilities!r}

    @pytest.fixture
    def store(self):
        return broken_stores.{name}()
{async_fixture}
"""

ASYNC_FIXTURE = """
    @pytest.fixture
    def async_store(self):
        return broken_stores.async_face(broken_stores.{name}())
"""

CAPABILITIES = ("batch", "listing", "erasure", "follow", "native", "history", "retention")

CAPABILITY_GROUPS = (
    "test_batch_",
    "test_listing_",
    "test_erasure_",
    "test_follow_store_",
    "test_follow_of_an_erased_chronicum",
    "test_native_",
    "test_history_",
    "test_retention_",
)
"""The cases of the capability groups, which skip for a store without the capabilities."""

# store -> (flavours it is run in, cases that must fail in each of them)
EXPECTED_FAILURES: dict[str, tuple[tuple[str, ...], set[str]]] = {
    "OrdersByTime": (
        ("sync", "async"),
        {
            "test_s4_order_of_1000",
            "test_s4_write_order_not_id_or_time_order",
            "test_r7_order_is_the_order_of_the_calls",
        },
    ),
    "EmptyForMissing": (("sync", "async"), {"test_s2_acta_of_a_missing_chronicum_raises_not_found"}),
    "LimitsBeforeFiltering": (
        ("sync", "async"),
        {
            "test_s6_filter_then_limit",
            "test_s6_every_combination_of_filters_and_limits",
            "test_r6_filters_apply_before_the_limit",
            "test_stateful_rules_match_the_reference_model",
        },
    ),
    "TrustsEveryClock": (
        ("sync", "async"),
        {"test_at_never_decreases_along_the_order_under_concurrent_writers"},
    ),
    # The async face over a store is closed by itself (the memory store's own), so only the sync
    # flavour meets a store that ignores close.
    "IgnoresClose": (("sync",), {"test_a_closed_store_refuses_every_operation"}),
    # The two below lose or double writes per thread (standing in for a connection), so only the
    # sync flavour, whose concurrent calls run in threads, meets them.
    "DropsAConcurrentWrite": (
        ("sync",),
        {
            "test_s5_forty_concurrent_appends_all_land_once",
            "test_r4_forty_concurrent_first_writes_all_land_once",
            "test_r4_racing_first_writes_by_one_owner_both_land",
        },
    ),
    "WritesKeyTwiceUnderConcurrency": (
        ("sync",),
        {
            "test_s10_forty_concurrent_calls_with_one_key",
            "test_r8_forty_concurrent_record_actum_with_one_key",
        },
    ),
}


# Stores of the memory store's shape, declaring every capability: store -> cases that must fail in
# both flavours ("{flavour}" stands for the flavour in a case of its own parameters). Every mistake
# is deterministic, so both flavours meet it.
CAPABILITY_FAILURES: dict[str, set[str]] = {
    "WritesABatchOneByOne": {"test_batch_with_content_over_the_limit_writes_nothing"},
    "SplitsABatch": {
        "test_batch_lands_consecutively_between_single_writes",
        "test_batch_forty_concurrent_each_stay_consecutive",
    },
    "KeyedBatchReturnsOnlyTheFirst": {
        "test_batch_keyed_retry_returns_the_first_batch",
        "test_batch_forty_concurrent_with_one_key_store_one",
    },
    "ListsOldestFirst": {
        "test_listing_is_newest_first_ties_by_id_descending",
        "test_listing_last_page_has_no_cursor",
        "test_listing_on_the_store_keeps_limit_and_after",
        "test_listing_page_walk_sees_every_chronicum_once[{flavour}-2]",
    },
    "ListsEveryOwner": {"test_listing_shows_only_the_owners_chronica"},
    "IgnoresAfter": {
        "test_listing_page_walk_sees_every_chronicum_once[{flavour}-1]",
        "test_listing_page_walk_sees_every_chronicum_once[{flavour}-3]",
        "test_listing_last_page_has_no_cursor",
        "test_listing_on_the_store_keeps_limit_and_after",
    },
    "HidesErasedActa": {
        "test_erasure_same_owner_writes_into_a_fresh_empty_chronicum",
        "test_erasure_forgets_idempotency_keys",
        "test_erasure_seen_by_a_second_chronicarius_with_the_owner_cached",
    },
    "ReopensForAnyDigest": {"test_erasure_another_owner_cannot_claim_the_id"},
    "WithdrawsWrittenChronica": {
        "test_erasure_withdraw_on_the_store",
        "test_erasure_a_failed_first_write_keeps_what_another_writer_recorded",
    },
    "WithdrawsNothing": {
        "test_erasure_withdraw_on_the_store",
        "test_erasure_a_failed_first_write_leaves_no_chronicum[{flavour}-record]",
        "test_erasure_a_failed_first_write_leaves_no_chronicum[{flavour}-record_idempotent]",
        "test_erasure_a_failed_first_write_leaves_no_chronicum[{flavour}-record_many]",
        "test_erasure_a_fork_of_a_withdrawn_chronicum_stays",
    },
    # The follow cases run as the store is ("as-is") and polled through acta (which is correct).
    "RepeatsTheAfter": {
        "test_follow_yields_in_order_after_the_given_actum[{flavour}-as-is]",
        "test_follow_concurrent_writers_no_gaps_no_duplicates[{flavour}-as-is]",
        "test_follow_resumes_after_the_last_actum_it_yielded[{flavour}-as-is]",
        "test_follow_store_acta_after",
    },
    "SkipsOneAfter": {
        "test_follow_yields_in_order_after_the_given_actum[{flavour}-as-is]",
        "test_follow_concurrent_writers_no_gaps_no_duplicates[{flavour}-as-is]",
        "test_follow_more_than_a_page_at_once[{flavour}-as-is]",
        "test_follow_store_acta_after",
    },
    "DropsNativeInABatch": {"test_native_kept_by_a_batch"},
    "ReadsPastTheForkPoint": {
        "test_history_fork_shares_the_prefix_then_goes_its_own_way",
        "test_history_fork_windows_filters_and_last_n",
        "test_history_fork_followed_from_its_shared_prefix",
        "test_history_page_walk_sees_every_actum_once[{flavour}-7]",
    },
    "LocatesAnywhere": {
        "test_history_fork_reads_an_actum_by_id_within_its_history",
        "test_history_fork_refusals_create_nothing",
        "test_history_actum_by_id_is_owner_checked",
        "test_history_exchange_answers_checked_at_write[{flavour}-another_chronicum]",
        "test_history_exchange_response_keeps_its_request",
        "test_history_summary_refused_writes_nothing[{flavour}-another_chronicum]",
    },
    "ErasesOnlyTheSource": {
        "test_history_fork_erasing_the_source_erases_its_forks",
        "test_history_fork_erasing_a_fork_leaves_its_source",
        "test_history_fork_on_the_store",
    },
    "IgnoresTheLayoutVersion": {
        "test_history_summary_contenders_never_store_partly_overlapping_ranges",
        "test_history_summary_layout_version_changes",
    },
    "ActaIgnoresTheShape": {"test_history_summary_store_acta_raises_stale_layout"},
    "CopiesThePrefix": {
        "test_history_fork_copies_nothing",
        "test_history_fork_shares_the_prefix_then_goes_its_own_way",
    },
}

CAPABILITY_SELECTION = (
    "-k",
    "not stateful and not a_cancelled_first_write and (batch or listing or erasure or follow or native"
    " or history or test_s1_get_returns_the_stored_owner)",
)
"""The capability groups and one case every store passes: the rest of the suite is the same as
the memory store's, checked by the correct store's run (the cancelled first write, an asyncio
store's case, skips on a blocking store)."""


def selecting(cases: set[str]) -> tuple[str, str]:
    """``-k`` for the cases a broken store must fail and one case every store passes.

    Every other case passes on a correct store of the same shape (the runs of ``ListStore`` and
    ``CapableStore``), so running only these keeps each broken store's run to seconds.
    """
    names = sorted({case.split("[")[0] for case in cases} | {"test_s1_get_returns_the_stored_owner"})
    return ("-k", " or ".join(names))


@pytest.fixture
def suite_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> SuiteRun:
    """Run the whole suite against one store of broken_stores; return (passed, skipped, failed) case names."""
    monkeypatch.delenv("CHRONICA_TEST_STORES", raising=False)
    # The suite's ci profile, but a failing stateful run is not shrunk: shrinking only shortens the report.
    register_profiles()
    settings.register_profile(
        "chronica-catch", settings.get_profile("chronica-ci"), phases=[Phase.explicit, Phase.generate]
    )
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "chronica-catch")
    # A broken store that loses an actum leaves its follower waiting out the guard; these stores
    # answer in microseconds, so a short guard finds the same faults (each miss cost 10 s).
    monkeypatch.setattr(harness, "FOLLOW_GUARD_SECONDS", 2.0)
    pytester.syspathinsert(TESTS)

    def run(
        name: str, flavours: tuple[str, ...], *pytest_args: str, capabilities: tuple[str, ...] = ()
    ) -> Outcomes:
        async_fixture = ASYNC_FIXTURE.format(name=name) if "async" in flavours else ""
        module = SUITE_MODULE.format(name=name, async_fixture=async_fixture, capabilities=capabilities)
        pytester.makepyfile(test_broken_store=module)
        outcomes = pytester.inline_run("-p", "no:cacheprovider", "-q", *pytest_args).listoutcomes()
        passed, skipped, failed = (
            {report.nodeid.split("::")[-1] for report in reports} for reports in outcomes
        )
        # the driver-failure group (E1) skips without a chronica_driver_faults fixture, as here; the
        # capability groups skip for a store without the capabilities, unless declared
        expected_skips = ("test_e1_",) if capabilities else ("test_e1_", *CAPABILITY_GROUPS)
        if "async" not in flavours:  # the any-loop group is for asyncio stores
            expected_skips = (*expected_skips, "test_any_loop_")
        return passed, {name for name in skipped if not name.startswith(expected_skips)}, failed

    return run


def case_names(cases: set[str], flavours: tuple[str, ...]) -> set[str]:
    return {
        case.format(flavour=flavour) if "[" in case else f"{case}[{flavour}]"
        for case in cases
        for flavour in flavours
    }


def test_a_correct_store_of_the_same_shape_passes_every_case(suite_run: SuiteRun) -> None:
    passed, skipped, failed = suite_run("ListStore", ("sync", "async"))
    assert not failed
    assert not skipped
    assert len(passed) >= 80
    assert case_names({"test_s5_forty_concurrent_appends_all_land_once"}, ("sync", "async")) <= passed


@pytest.mark.parametrize("store_name", list(EXPECTED_FAILURES))
def test_the_suite_fails_a_broken_store_naming_the_case(suite_run: SuiteRun, store_name: str) -> None:
    flavours, cases = EXPECTED_FAILURES[store_name]
    passed, skipped, failed = suite_run(store_name, flavours, *selecting(cases))
    missing = case_names(cases, flavours) - failed
    assert not missing, f"the suite let {store_name} pass {sorted(missing)}"
    assert not skipped
    assert case_names({"test_s1_get_returns_the_stored_owner"}, flavours) <= passed, (
        "the store is not broken everywhere"
    )


def test_the_memory_store_with_a_limit_passes_every_case_with_every_capability(suite_run: SuiteRun) -> None:
    passed, skipped, failed = suite_run(
        "CapableStore", ("sync", "async"), "-k", "not stateful", capabilities=CAPABILITIES
    )
    assert not failed
    assert not skipped
    assert len(passed) >= 150
    batch_cases = {
        "test_batch_with_content_over_the_limit_writes_nothing",
        "test_erasure_racing_batches_leaves_only_whole_batches",
        "test_listing_walk_during_concurrent_creates_sees_each_existing_once",
    }
    assert case_names(batch_cases, ("sync", "async")) <= passed


def test_a_store_declaring_capabilities_it_lacks_fails_their_groups(suite_run: SuiteRun) -> None:
    passed, skipped, failed = suite_run(
        "ListStore", ("sync",), *CAPABILITY_SELECTION, capabilities=CAPABILITIES
    )
    assert not skipped
    assert case_names({"test_s1_get_returns_the_stored_owner"}, ("sync",)) <= passed
    assert {name for name in failed if not name.startswith(CAPABILITY_GROUPS)} == set()
    expected = {
        "test_batch_returns_the_acta_in_order_with_fresh_ids",
        "test_listing_is_newest_first_ties_by_id_descending",
        "test_erasure_returns_the_count_and_the_chronicum_is_gone",
        "test_native_kept_by_record_and_every_read",
        "test_history_fork_shares_the_prefix_then_goes_its_own_way",
    }
    assert case_names(expected, ("sync",)) <= failed


@pytest.mark.parametrize("store_name", list(CAPABILITY_FAILURES))
def test_the_suite_fails_a_store_breaking_a_capability_rule(suite_run: SuiteRun, store_name: str) -> None:
    flavours = ("sync", "async")
    passed, skipped, failed = suite_run(
        store_name, flavours, *selecting(CAPABILITY_FAILURES[store_name]), capabilities=CAPABILITIES
    )
    missing = case_names(CAPABILITY_FAILURES[store_name], flavours) - failed
    assert not missing, f"the suite let {store_name} pass {sorted(missing)}"
    assert not skipped
    assert case_names({"test_s1_get_returns_the_stored_owner"}, flavours) <= passed, (
        "the store is not broken everywhere"
    )
