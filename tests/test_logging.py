"""Chronica's loggers: a NullHandler on ``chronica``, named loggers below it, and what they show.

Through a whole scenario on ``memory://`` (and the bundled backends in their own tests, through
:mod:`chronica_conformance.log_secrecy`), no record shows the URL's password or an actum's
content, and records at INFO and above show no id.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from chronica_conformance.log_secrecy import (
    INTRUDER,
    assert_records_keep_secrets,
    capturing,
    scenario_records,
)
from chronica_conformance.secrecy import ENCODED_SECRET

from chronica_core.registry import Registry

CHRONICA = str(Path(sys.executable).with_name("chronica"))


def test_the_chronica_logger_has_a_null_handler_and_the_app_decides_the_rest() -> None:
    chronica = logging.getLogger("chronica")
    assert any(isinstance(handler, logging.NullHandler) for handler in chronica.handlers)
    assert chronica.level == logging.NOTSET and chronica.propagate


def test_a_whole_scenario_on_memory_never_logs_a_password_content_or_id_above_debug() -> None:
    records, chronicum_ids = scenario_records(f"memory://ardian:{ENCODED_SECRET}@localhost")
    assert_records_keep_secrets(records, chronicum_ids)
    said = [(record.name, record.levelname, record.getMessage()) for record in records]
    assert (
        "chronica.registry",
        "DEBUG",
        "opening memory://ardian:***@localhost with backend 'memory'",
    ) in said
    refusals = [(level, message) for name, level, message in said if name == "chronica.chronicarius"]
    assert refusals.count(("INFO", "refused a read: the chronicum belongs to another owner")) == 3
    assert ("INFO", "refused a write: the chronicum belongs to another owner") in refusals
    assert ("INFO", "refused an erasure: the chronicum belongs to another owner") in refusals
    assert (
        "DEBUG",
        f"refused owner {INTRUDER!r} a write of chronicum {chronicum_ids[0]!r}, another owner's",
    ) in refusals


def test_a_plugin_that_fails_to_load_is_a_warning_naming_it() -> None:
    with capturing() as records:
        Registry()
    warnings = [record.getMessage() for record in records if record.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("plugin 'broken-example' (")
    assert "failed to load: ModuleNotFoundError: " in warnings[0]


def test_the_command_prints_no_log_record_unless_the_app_configures_logging() -> None:
    """The broken plugin's WARNING goes to the NullHandler: not to standard error (logging's last resort)."""
    result = subprocess.run([CHRONICA, "backends"], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "BROKEN plugin 'broken-example'" in result.stdout
    assert result.stderr == ""
