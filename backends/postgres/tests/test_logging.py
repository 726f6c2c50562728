"""What chronica-postgres logs through a whole scenario, and what it never shows.

Every record of the ``chronica`` loggers is captured at DEBUG while
:mod:`chronica_conformance.log_secrecy` plays every operation in a fresh schema: the migration
(INFO), the pools opened and closed (DEBUG), another owner refused (INFO without ids, DEBUG with
them), and in none of them the URL's password or an actum's content.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

from chronica_conformance.log_secrecy import assert_records_keep_secrets, scenario_records
from chronica_conformance.secrecy import ENCODED_SECRET
from chronica_postgres.schema import LATEST_VERSION


def test_a_whole_scenario_logs_what_it_did_and_never_a_password_content_or_id(
    postgres_url: str, fresh_schema: str
) -> None:
    # the test server trusts its user whatever the password: the URL carries one never to be shown
    parts = urlsplit(postgres_url)
    user = parts.username or "postgres"
    host = parts.netloc.rpartition("@")[2]
    with_password = urlunsplit(parts._replace(netloc=f"{user}:{ENCODED_SECRET}@{host}"))
    records, chronicum_ids = scenario_records(with_password, schema=fresh_schema)
    assert_records_keep_secrets(records, chronicum_ids, password=ENCODED_SECRET)

    postgres = [
        (record.levelname, record.getMessage()) for record in records if record.name == "chronica.postgres"
    ]
    migrated = f"migrated schema {fresh_schema!r} from version 0 to {LATEST_VERSION}"
    assert ("INFO", migrated) in postgres, postgres
    debug = [message for level, message in postgres if level == "DEBUG"]
    opened = [line for line in debug if line.startswith("opened a pool of ")]
    assert len(opened) == 2 and all(":***@" in line for line in opened), opened
    assert any(line.startswith("closed the pool of the PostgresStore on ") for line in debug), debug
    assert any(line.startswith("closing the pools of the AsyncPostgresStore on ") for line in debug), debug
    refusals = [record for record in records if record.name == "chronica.chronicarius"]
    assert {record.levelno for record in refusals} == {logging.INFO, logging.DEBUG}
