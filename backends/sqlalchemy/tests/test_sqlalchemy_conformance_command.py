"""``chronica conformance URL`` runs the driver-failure group with the backend's own faults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHRONICA = str(Path(sys.executable).with_name("chronica"))


def test_chronica_conformance_runs_the_driver_failure_group_without_a_skip(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'conformance.db'}"  # a file: an in-memory database skips the group
    command = [CHRONICA, "conformance", url, "-q", "-p", "no:cacheprovider", "-k", "test_e1_"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0, result.stdout[-3000:]
    # 12 operations, 3 failure kinds, 2 flavours: each one run, none skipped
    assert summary.startswith("72 passed, "), summary
    assert "skipped" not in summary
