"""Run the conformance suite and ``test_pgbouncer.py`` through PgBouncer in transaction mode.

``python topologies/through_pgbouncer.py [--whole-suite] [pytest arguments]`` (what ``tox -e
pgbouncer`` runs): starts PgBouncer (:func:`pgbouncer.start_bouncer`) before the machine's
PostgreSQL, runs pytest with the conformance suite (``--chronica-store``) on chronica-postgres
and chronica-sqlalchemy through it, each in a schema of its own, and the tests of
``test_pgbouncer.py`` on the same PgBouncer (``CHRONICA_TEST_PGBOUNCER_PORT``); then stops
PgBouncer by its PID and drops the schemas. Exits with pytest's status.

Of the suite it runs the cases of :data:`SELECTION` (the blocking flavour and the follow cases
in the asyncio one too, but for the longest property-based cases), which keeps the run within a
few minutes; ``--whole-suite`` runs every case in both flavours (about three times as long).
``test_pgbouncer.py`` runs whole either way.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from conftest import PGBOUNCER_PORT  # noqa: E402
from pgbouncer import start_bouncer  # noqa: E402
from test_pgbouncer import DIRECT, URLS  # noqa: E402

SELECTION = "(not async or follow) and not stateful and not oracle and not order_of_1000 or test_pgbouncer"
"""pytest's ``-k``: the suite's blocking cases (their ids end in ``-sync``) and its follow cases in
both flavours, but for its longest property-based ones (the stateful model, the history oracles,
the order of 1000 calls: the statements they run are those of the other cases, many times more,
and they took 175 of 407 s here), and ``test_pgbouncer.py`` whole (its asyncio tests included)."""

WHOLE_SUITE = "--whole-suite"


def main(arguments: list[str]) -> int:
    """Start PgBouncer, run pytest through it with ``arguments`` added, clean up; return pytest's status.

    ``arguments`` holding :data:`WHOLE_SUITE` runs every case (it is not passed on); else only
    :data:`SELECTION`.
    """
    selection = [] if WHOLE_SUITE in arguments else ["-k", SELECTION]
    arguments = [argument for argument in arguments if argument != WHOLE_SUITE]
    bouncer = start_bouncer()
    schemas = [f"chronica_pgbouncer_{uuid.uuid4().hex[:12]}" for _ in URLS]
    try:
        stores = [
            option
            for make, schema in zip(URLS.values(), schemas, strict=True)
            for option in ("--chronica-store", make(bouncer.port, schema))
        ]
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *stores,
            str(HERE / "test_pgbouncer.py"),
        ]
        environment = {**os.environ, PGBOUNCER_PORT: str(bouncer.port)}
        return subprocess.run([*command, *selection, *arguments], env=environment, check=False).returncode
    finally:
        bouncer.stop()
        with psycopg.connect(DIRECT, autocommit=True) as connection:
            for schema in schemas:
                connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
