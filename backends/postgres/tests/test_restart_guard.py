"""The guard that keeps the ``restart`` test away from servers it does not own (no server needed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from postgres_restart_guard import cluster_on_port, local_port

LISTING = """\
15  main    5432 online postgres /var/lib/postgresql/15/main /var/log/postgresql/postgresql-15-main.log
16  spare   5433 down   postgres /var/lib/postgresql/16/spare /var/log/postgresql/postgresql-16-spare.log
"""


@pytest.mark.parametrize(
    ("url", "environment", "port"),
    [
        ("postgresql://postgres@127.0.0.1:5432/test", {}, "5432"),
        ("postgresql://postgres@localhost:5433/test", {}, "5433"),
        ("postgresql://postgres@[::1]/test", {}, "5432"),
        ("postgresql://postgres@%2Fvar%2Frun%2Fpostgresql/test", {}, "5432"),
        ("postgresql:///test", {}, "5432"),
        ("postgresql:///test", {"PGHOST": "localhost", "PGPORT": "6543"}, "6543"),
        ("host=/tmp port=5434 dbname=test", {}, "5434"),
    ],
)
def test_local_servers_are_recognised(url: str, environment: dict[str, str], port: str) -> None:
    assert local_port(url, environment) == port


@pytest.mark.parametrize(
    ("url", "environment", "reason"),
    [
        ("postgresql://postgres@db.example.com/test", {}, "its host 'db.example.com' is not local"),
        ("postgresql://postgres@10.0.0.7/test", {}, "its host '10.0.0.7' is not local"),
        ("postgresql://localhost/test?hostaddr=10.0.0.7", {}, "its address '10.0.0.7' is not local"),
        ("postgresql:///test", {"PGHOST": "db.example.com"}, "its host 'db.example.com' is not local"),
        ("postgresql://localhost,db.example.com/test", {}, "its URL names several hosts"),
        ("postgresql://postgres@127.0.0.1/test?schem=x", {}, 'invalid URI query parameter: "schem"'),
    ],
)
def test_other_servers_are_refused_saying_why(url: str, environment: dict[str, str], reason: str) -> None:
    with pytest.raises(LookupError) as raised:
        local_port(url, environment)
    assert reason in str(raised.value)


def test_only_an_online_cluster_on_the_port_is_chosen_and_only_for_root_or_its_owner() -> None:
    assert cluster_on_port("5432", LISTING, 0) == ("15", "main")
    assert cluster_on_port("5433", LISTING, 0) == "no online pg_ctlcluster cluster listens on port 5433"
    assert cluster_on_port("6000", LISTING, 0) == "no online pg_ctlcluster cluster listens on port 6000"
    assert cluster_on_port("5432", "", 0) == "no online pg_ctlcluster cluster listens on port 5432"
    stranger = 4_000_000  # no such user
    assert cluster_on_port("5432", LISTING, stranger) == "only root or postgres may restart cluster 15/main"


def _collect(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    tests = Path(__file__).parent
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-rA", str(tests)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tests.parent,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("opt_in", [None, "", "0", "true", "yes"])
def test_the_restart_test_is_deselected_unless_asked_for_and_the_reason_is_shown(opt_in: str | None) -> None:
    # As whoever runs the tests, root included (who could restart the local cluster): only "1" opts in.
    environment = {key: value for key, value in os.environ.items() if key != "CHRONICA_TEST_RESTART_POSTGRES"}
    if opt_in is not None:
        environment["CHRONICA_TEST_RESTART_POSTGRES"] = opt_in
    run = _collect(environment)
    reason = "restarting the server is opt-in: set CHRONICA_TEST_RESTART_POSTGRES=1 to run it"
    assert f"chronica-postgres: the restart test is deselected: {reason}" in run.stdout
    assert f"chronica-postgres: the restart test was deselected: {reason}" in run.stdout
    assert "1 deselected" in run.stdout
    assert "test_stores_work_again_after_a_server_restart" not in run.stdout


def test_the_restart_test_is_deselected_for_a_remote_server_and_the_reason_is_shown() -> None:
    run = _collect(
        {
            **os.environ,
            "CHRONICA_TEST_POSTGRES_URL": "postgresql://postgres@db.example.com/test",
            "CHRONICA_TEST_RESTART_POSTGRES": "1",
        }
    )
    reason = (
        "the server at the test URL is not surely this machine's own: its host 'db.example.com' is not local"
    )
    assert f"chronica-postgres: the restart test is deselected: {reason}" in run.stdout
    assert f"chronica-postgres: the restart test was deselected: {reason}" in run.stdout
    assert "1 deselected" in run.stdout
    assert "test_stores_work_again_after_a_server_restart" not in run.stdout
    assert "test_restart_guard.py" in run.stdout  # the rest is still collected
