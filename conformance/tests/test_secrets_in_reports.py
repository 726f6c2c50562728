"""The plugin shows no password of a ``--chronica-store`` URL: not in test ids nor in any report."""

from __future__ import annotations

import pytest
from chronica_conformance import Target
from chronica_conformance.secrecy import ENCODED_SECRET, SECRET, assert_hidden

pytest_plugins = ("pytester",)

URL = f"memory://ardian:{ENCODED_SECRET}@localhost?token={ENCODED_SECRET}"

LEAKY_TEST = f"""
import logging

def test_leaky():
    url = {URL!r}
    conninfo = "user=ardian password={SECRET} dbname=test"
    print("captured output:", url)
    logging.getLogger("driver").warning("connecting with %s", conninfo)
    raise ConnectionError(f"cannot connect with {{url}}")
"""


def test_a_target_shows_its_url_masked() -> None:
    target = Target("sync", URL)
    assert target.id == "memory://ardian:***@localhost?token=***-sync"
    assert repr(target) == (
        "Target(flavour='sync', url='memory://ardian:***@localhost?token=***', declares_idempotent=None, "
        "declares_capabilities=None)"
    )


def test_a_failure_report_shows_no_password_even_with_showlocals(pytester: pytest.Pytester) -> None:
    """The exception, each frame's arguments and locals, captured output and logs, the summary."""
    pytester.makepyfile(test_leaky=LEAKY_TEST)
    result = pytester.runpytest_subprocess(
        "--chronica-store", URL, "--showlocals", "-rA", "-v", "-p", "no:cacheprovider", "-k", "leaky"
    )
    result.assert_outcomes(failed=1)
    said = result.stdout.str() + result.stderr.str()
    assert "ConnectionError: cannot connect with memory://ardian:***@localhost?token=***" in said, said
    assert "password=*** dbname=test" in said, said
    assert_hidden(said, "pytest --chronica-store")


def test_a_url_no_backend_handles_is_refused_without_its_password(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--chronica-store", f"nosuchscheme://ardian:{SECRET}@localhost")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = result.stdout.str() + result.stderr.str()
    assert "nosuchscheme://ardian:***@localhost" in said, said
    assert_hidden(said, "pytest --chronica-store")
