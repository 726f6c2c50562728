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
import asyncio, json, sys
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
if "--look-in-another-loop" in sys.argv:  # asyncio.run makes a loop of its own, then closes it
    print(len(asyncio.run(session.get_items())))
"""


@pytest.mark.parametrize("store_target", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("another_loop", [False, True], ids=["run_sync", "then-asyncio-run"])
def test_run_sync_without_close_leaves_nothing_pending_at_exit(
    store_target: StoreTarget, another_loop: bool
) -> None:
    command = [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", PROGRAM]
    command += [store_target.url, json.dumps(store_target.options)]
    done = subprocess.run(
        command + (["--look-in-another-loop"] if another_loop else []),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "one\ntwo\n4\n" if another_loop else "one\ntwo\n")
    # (-X dev also reports the loop the SDK's run_sync leaves open: the SDK's, not the session's)
    assert "Task was destroyed but it is pending" not in done.stderr, done.stderr
