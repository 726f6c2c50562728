"""What chronica-mongodb logs through a whole scenario, and what it never shows.

Every record of the ``chronica`` loggers is captured at DEBUG while
:mod:`chronica_conformance.log_secrecy` plays every operation on a fresh database: the indexes
created (INFO), the clients opened and closed (DEBUG), another owner refused (INFO without ids,
DEBUG with them), and in none of them the URL's password or an actum's content.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

from chronica_conformance.log_secrecy import assert_records_keep_secrets, scenario_records
from chronica_conformance.secrecy import ENCODED_SECRET


def test_a_whole_scenario_logs_what_it_did_and_never_a_password_content_or_id(
    mongodb_server_url: str, database: str
) -> None:
    # a URI option holding a secret (used only with MONGODB-AWS): it must never be shown
    query = f"authMechanismProperties=AWS_SESSION_TOKEN:{ENCODED_SECRET}"
    url = urlunsplit(urlsplit(mongodb_server_url)._replace(path=f"/{database}", query=query))
    records, chronicum_ids = scenario_records(url)
    assert_records_keep_secrets(records, chronicum_ids)

    mongodb = [
        (record.levelname, record.getMessage()) for record in records if record.name == "chronica.mongodb"
    ]
    created = [message for level, message in mongodb if level == "INFO"]
    assert "created the index chronicum_seq of acta" in created, created
    debug = [message for level, message in mongodb if level == "DEBUG"]
    for client in ("MongoClient", "AsyncMongoClient"):
        assert any(
            line.startswith(f"opened a {client} for ") and "authMechanismProperties=***" in line
            for line in debug
        )
        assert any(line.startswith(f"closed the {client} for ") for line in debug), debug
    refusals = [record for record in records if record.name == "chronica.chronicarius"]
    assert {record.levelno for record in refusals} == {logging.INFO, logging.DEBUG}
