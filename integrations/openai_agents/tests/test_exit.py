"""A program that runs ``Runner.run_sync`` turns on a session opened from a URL and never closes it
leaves nothing pending at exit (each case in a fresh interpreter, as a user's script runs): on
SQLite, and on PostgreSQL through chronica-postgres, whose pool keeps tasks of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import StoreTarget

PROGRAM = """
import json, sys
from agents import Agent, RunConfig, Runner
from chronica_openai_agents import ChronicaSession
from chronica_core import new_chronicum_id
from scripted_model import ScriptedModel, say

url, options = sys.argv[1], json.loads(sys.argv[2])
model = ScriptedModel([[say("one")], [say("two", "msg_2")]])
agent = Agent(name="concierge", model=model)
session = ChronicaSession(
    new_chronicum_id(), url, owner_id="ardian", actor="concierge", store_options=options
)
quiet = RunConfig(tracing_disabled=True)
print(Runner.run_sync(agent, "first", session=session, run_config=quiet).final_output)
print(Runner.run_sync(agent, "second", session=session, run_config=quiet).final_output)
"""


@pytest.mark.parametrize("store_target", ["sqlite", "postgres"], indirect=True)
def test_run_sync_without_close_leaves_nothing_pending_at_exit(store_target: StoreTarget) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, store_target.url, json.dumps(store_target.options)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "one\ntwo\n", "")
