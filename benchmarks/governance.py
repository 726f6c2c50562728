"""What encryption at rest, tracing and retention cost: printed ratios, never asserted.

- **encryption** (each ``--store``): ``record_actum`` and a last-20 window of 1 KiB acta through
  ``open_store(url, encryption_keys=MemoryKeys())`` against the same store opened plain, the four
  columns interleaved (:func:`benchmarks.timing.time_interleaved`), ``--runs`` times.
- **tracing** (each ``--tracing-store``): the same two operations with an SDK tracer provider and
  the in-memory exporter (and metric reader) against tracing off (``opentelemetry-api`` installed, no provider
  set), interleaved in one child process, and off against no ``opentelemetry`` at all ("not
  installed" is a process's state: two children, one after the other); a round runs the three
  children in a shuffled order, and each round gives one ratio of each.
- **retention** (each ``--retention-store``, SQLite or PostgreSQL; the store must be empty:
  ``erase_idle`` is store-wide): ``--chronica`` chronica bulk-loaded through the baseline's
  loader, ``--idle`` of them started long ago, erased by one ``Chronicarius.erase_idle`` while a
  writer thread appends to a chronicum of its own; printed: the time, how many were erased, and
  the writer's median and longest wait, during and before.

Targets: ``benchmarks/targets.toml``, harness ``governance``.

    python -m benchmarks.governance --store memory:// --store sqlite:////tmp/gov.db \\
        --store postgresql://postgres@127.0.0.1/test --option schema=bench \\
        --tracing-store memory:// --tracing-store sqlite:////tmp/trace.db \\
        --retention-store sqlite:////tmp/ret.db
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.baselines import load_baseline
from benchmarks.targets import Verdict, targets_for
from benchmarks.timing import new_seed, shuffled, time_interleaved
from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, Chronicum, open_store
from chronica_core.registry import registry

CONTENT = "x" * 1024
"""Each actum's content: 1 KiB."""

HISTORY = 100
"""Acta each timed chronicum holds before the timing."""

MODES = ("traced", "off", "none")
"""The tracing children: on and off interleaved; off (the API, no provider); no opentelemetry."""


def _actum(chronicum_id: str, index: int) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "concierge", f"{index} {CONTENT}"[:1024])


def _filled(rules: Chronicarius, owner: str) -> str:
    chronicum_id = f"gov-{uuid.uuid4().hex}"
    rules.record_acta(owner, [_actum(chronicum_id, index) for index in range(HISTORY)])
    return chronicum_id


def _pair(rules: Chronicarius, owner: str) -> dict[str, Any]:
    """An append column and a last-20 column over ``rules``, each on a chronicum of its own."""
    appended, read = _filled(rules, owner), _filled(rules, owner)
    return {
        "append": lambda index: rules.record_actum(owner, _actum(appended, index)),
        "read": lambda index: rules.get_acta(owner, read, last_n=20),
    }


def encryption(
    url: str, options: dict[str, str], repeat: int, runs: int, rng: random.Random
) -> list[Verdict]:
    """Time plain and encrypted append and last-20 on ``url``; print each run and the verdicts."""
    from chronica_core.encryption import MemoryKeys

    plain_store = open_store(url, **options)
    sealed_store = open_store(url, **options, encryption_keys=MemoryKeys())
    owner = f"gov-enc-{uuid.uuid4().hex[:8]}"
    ratios: dict[str, list[float]] = {"append": [], "read": []}
    try:
        plain, sealed = Chronicarius(plain_store), Chronicarius(sealed_store)
        columns = {f"plain {name}": call for name, call in _pair(plain, owner).items()}
        columns |= {f"encrypted {name}": call for name, call in _pair(sealed, owner).items()}
        for run in range(1, runs + 1):
            timings = asyncio.run(time_interleaved(columns, max(20, repeat // 10), repeat, rng=rng))
            for name in ratios:
                ratio = timings[f"encrypted {name}"].median_ns / timings[f"plain {name}"].median_ns
                ratios[name].append(ratio)
                print(
                    f"  run {run} {name:6}: plain {timings[f'plain {name}'].median_ns / 1000:8.1f} us, "
                    f"encrypted {timings[f'encrypted {name}'].median_ns / 1000:8.1f} us, {ratio:.2f}x"
                )
    finally:
        plain.erase_owner(owner)
        plain_store.close()
        sealed_store.close()
    backend = registry().backend_for(url).name
    verdicts = []
    for target in targets_for("governance"):
        measure = target.measure.removeprefix("encrypted_")
        if measure in ratios:
            text = f"{backend} encrypted {measure} <= {target.limit:.2f}x plain"
            verdicts.append(Verdict.judge(target, text, ratios[measure]))
    return verdicts


def _child(url: str, mode: str, repeat: int) -> None:
    """In a child process: time appends and last-20 reads on ``url`` in ``mode``; print JSON medians.

    ``traced``: the columns with an SDK provider (``on ...``) and without (``off ...``), interleaved
    in this process; ``off``: without a provider only; ``none``: without ``opentelemetry`` at all.
    """
    if mode == "none":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment] # the import system's "not installed"
    owner = f"gov-tracing-{uuid.uuid4().hex[:8]}"
    with open_store(url) as store:
        plain = Chronicarius(store)
        columns = {f"off {name}": call for name, call in _pair(plain, owner).items()}
        if mode == "traced":
            from chronica_conformance.log_secrecy import TelemetryCapture

            capture = TelemetryCapture()
            traced = Chronicarius(
                store, tracer_provider=capture.tracer_provider, meter_provider=capture.meter_provider
            )
            columns |= {f"on {name}": call for name, call in _pair(traced, owner).items()}
        timings = asyncio.run(time_interleaved(columns, max(50, repeat // 5), repeat))
        if mode == "traced":
            assert capture.span_names(), "nothing was traced"
        plain.erase_owner(owner)
    print(json.dumps({name: timing.median_ns for name, timing in timings.items()}))


def tracing(url: str, rounds: int, repeat: int, rng: random.Random) -> list[Verdict]:
    """Time the modes on ``url`` in child processes, ``rounds`` rounds in shuffled orders; print them.

    Tracing on against off: interleaved in one child (``traced``). Off against no opentelemetry:
    two children, one after the other, in a shuffled order each round.
    """
    ratios: dict[str, list[float]] = {}
    medians: dict[str, list[float]] = {}
    for _ in range(rounds):
        got: dict[str, dict[str, float]] = {}
        for mode in shuffled(MODES, rng):
            command = [
                sys.executable,
                "-m",
                "benchmarks.governance",
                "--child",
                mode,
                "--repeat",
                str(repeat),
            ]
            command += ["--store", url]
            output = subprocess.run(command, check=True, capture_output=True, text=True, timeout=600)
            got[mode] = json.loads(output.stdout)
        for name in ("append", "read"):
            on, off = got["traced"][f"on {name}"], got["traced"][f"off {name}"]
            ratios.setdefault(f"tracing_{name}", []).append(on / off)
            ratios.setdefault(f"no_provider_{name}", []).append(
                got["off"][f"off {name}"] / got["none"][f"off {name}"]
            )
            for label, value in (("on", on), ("off", off), ("none", got["none"][f"off {name}"])):
                medians.setdefault(f"{label} {name}", []).append(value)
    for name in ("append", "read"):
        on, off, none = (
            statistics.median(medians[f"{label} {name}"]) / 1000 for label in ("on", "off", "none")
        )
        print(
            f"  {name:6}: on {on:9.2f} us, off {off:9.2f} us, no opentelemetry {none:9.2f} us "
            f"(medians over {rounds} rounds)"
        )
    verdicts = []
    backend = registry().backend_for(url).name
    for target in targets_for("governance"):
        for name in ("append", "read"):
            if target.measure == "tracing":
                text = f"{backend} {name}, tracing on (in-memory exporter) <= {target.limit:.2f}x off"
                verdicts.append(Verdict.judge(target, text, ratios[f"tracing_{name}"], over="rounds"))
            elif target.measure == "no_provider":
                text = f"{backend} {name}, tracing off <= {target.limit:.2f}x no opentelemetry"
                verdicts.append(Verdict.judge(target, text, ratios[f"no_provider_{name}"], over="rounds"))
    return verdicts


def retention(url: str, options: dict[str, str], chronica: int, idle: int) -> None:
    """Load ``chronica`` chronica (``idle`` of them long idle), erase the idle ones under a writer; print."""
    backend = registry().backend_for(url).name
    now = datetime.now(UTC)
    long_ago = now - timedelta(days=120)
    store = open_store(url, **options)  # creates the tables
    rules = Chronicarius(store)
    writer_owner = f"gov-writer-{uuid.uuid4().hex[:8]}"
    writer_chronicum = f"gov-writer-{uuid.uuid4().hex}"
    rules.record_actum(writer_owner, _actum(writer_chronicum, 0))
    rows = [
        Chronicum(
            f"gov-ret-{index:06d}-{uuid.uuid4().hex[:8]}",
            f"owner-{index % 1000}",
            long_ago if index < idle else now,
        )
        for index in range(chronica)
    ]
    loader = load_baseline(backend).open_loader(url, options)
    started = time.perf_counter()
    try:
        loader.fill_chronica(rows)
    finally:
        loader.close()
    loaded = time.perf_counter() - started
    print(f"  loaded {chronica:,} chronica ({idle:,} idle since {long_ago:%Y-%m-%d}) in {loaded:.1f} s")
    waits: list[float] = []
    stop = threading.Event()

    def write() -> None:
        index = 1
        while not stop.is_set():
            begun = time.perf_counter()
            rules.record_actum(writer_owner, _actum(writer_chronicum, index))
            waits.append(time.perf_counter() - begun)
            index += 1

    writer = threading.Thread(target=write, name="gov-writer", daemon=True)
    writer.start()
    time.sleep(3.0)  # the writer's waits before retention starts, to compare with
    before = len(waits)
    started = time.perf_counter()
    erased = rules.erase_idle(before=now - timedelta(days=90))
    took = time.perf_counter() - started
    stop.set()
    writer.join()
    during, quiet = waits[before:], waits[:before]
    print(
        f"  {backend}: erase_idle erased {erased:,} of {chronica:,} chronica in {took:.1f} s "
        f"({took / max(erased, 1) * 1000:.2f} ms each)"
    )
    print(
        f"  the writer during it: {len(during)} writes, median {statistics.median(during) * 1000:.1f} ms, "
        f"longest {max(during) * 1000:.1f} ms; before it: {len(quiet)} writes, median "
        f"{statistics.median(quiet) * 1000:.1f} ms, longest {max(quiet) * 1000:.1f} ms"
    )
    rules.erase_owner(writer_owner)
    store.close()


def _options(pairs: Sequence[str]) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in pairs)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments and run the phases asked for; print every figure and verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", action="append", default=[], help="store URL for encryption (repeatable)")
    parser.add_argument(
        "--tracing-store",
        action="append",
        default=[],
        help="a store URL for tracing, no options (repeatable)",
    )
    parser.add_argument("--option", action="append", default=[], help="KEY=VALUE for the server stores")
    parser.add_argument("--retention-store", action="append", default=[], help="an EMPTY store for retention")
    parser.add_argument("--phases", default="encryption,tracing,retention")
    parser.add_argument("--repeat", type=int, default=300, help="timed calls per column and run")
    parser.add_argument("--runs", type=int, default=3, help="runs (encryption) or rounds (tracing)")
    parser.add_argument("--chronica", type=int, default=100_000)
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.child:
        _child(arguments.store[0], arguments.child, arguments.repeat)
        return 0
    seed = new_seed() if arguments.seed is None else arguments.seed
    rng = random.Random(seed)
    phases = arguments.phases.split(",")
    print(f"benchmarks.governance, seed {seed}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    verdicts: list[Verdict] = []
    if "encryption" in phases:
        for url in arguments.store:
            options = {} if url.startswith(("memory:", "sqlite:")) else _options(arguments.option)
            print(f"encryption at rest, 1 KiB content, {url} {options or ''}")
            verdicts += encryption(url, options, arguments.repeat, arguments.runs, rng)
    if "tracing" in phases:
        for url in arguments.tracing_store:
            print(f"tracing, {url}, in child processes")
            verdicts += tracing(url, max(arguments.runs, 5), arguments.repeat, rng)
    if "retention" in phases:
        for url in arguments.retention_store:
            options = {} if url.startswith("sqlite:") else _options(arguments.option)
            print(f"retention, {url} {options or ''}")
            retention(url, options, arguments.chronica, arguments.idle)
    for verdict in verdicts:
        print(f"  {verdict.line()}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
