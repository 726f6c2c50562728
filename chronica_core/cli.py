"""The ``chronica`` command: the dinner-story demo, the installed backends, and reading and writing.

``python -m chronica_core`` runs the same command; ``chronica --version`` prints the version.

Every subcommand but ``backends`` and ``conformance`` takes ``--store URL`` (default:
``$CHRONICA_STORE``, else the embedded default ``sqlite:///chronica.db`` when chronica-sqlalchemy
is installed, else ``memory://``) and ``--option KEY=VALUE`` (repeatable, the last of a key wins;
each goes to ``open_store`` as a string, the value as written).
Exit codes: 0 success; 2 bad usage (and an ``erase`` that cannot ask for confirmation and was not
given ``--yes``); 3 chronicum not found (or the actum ``--after``, ``--before`` or ``--at`` names);
4 invalid input (an actum, a query, a cursor, an owner, a store option or a value in the store
URL; an empty ``--after``, ``--before`` or ``--at`` too); 5 no
usable backend for the URL; 6 the store failed; 7 the store lacks a capability the command needs
(``chronica backends`` lists them); 1 any other Chronica error, an erasure that was not confirmed,
or failed conformance cases; 130 stopped by Ctrl-C (SIGINT), without a traceback (how ``follow``
normally ends).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import itertools
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, NoReturn, TextIO
from urllib.parse import unquote

from chronica_core._version import __version__
from chronica_core.capabilities import (
    ALL_CAPABILITIES,
    ERASURE,
    FOLLOW,
    HISTORY,
    IDEMPOTENCY,
    RETENTION,
    store_capabilities,
)
from chronica_core.chronicarius import Chronicarius
from chronica_core.errors import (
    ActumNotFound,
    BackendConflict,
    BackendUnavailable,
    CapabilityUnsupported,
    ChronicaError,
    ChronicumNotFound,
    InvalidActum,
    InvalidOption,
    InvalidOwnerID,
    InvalidQuery,
    StoreError,
    UnknownBackend,
)
from chronica_core.history import View
from chronica_core.hookspecs import Backend
from chronica_core.install import install_command
from chronica_core.listing import DEFAULT_LIST_LIMIT
from chronica_core.memory import MemoryStore
from chronica_core.model import ActorKind, Actum, ActumKind, ChronicaPage, Span
from chronica_core.redaction import masked_url, redact, redact_error
from chronica_core.registry import list_backends, open_async_store, open_store, registry
from chronica_core.store import Store
from chronica_core.story import DINNER_CHRONICUM, DINNER_OWNER, DINNER_STORY

__all__ = ["EMBEDDED_DEFAULT_URL", "default_store_url", "main", "version_text"]

EMBEDDED_DEFAULT_URL = "sqlite:///chronica.db"
"""The store the CLI uses when none is named and chronica-sqlalchemy is installed."""

EXIT_OTHER, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_INVALID, EXIT_BACKEND, EXIT_STORE = 1, 2, 3, 4, 5, 6
EXIT_UNSUPPORTED = 7
EXIT_INTERRUPTED = 130
"""A command stopped by Ctrl-C (SIGINT; ``follow``'s normal end), as shells report a process SIGINT ended."""

_EXIT_CODES: tuple[tuple[type[ChronicaError] | tuple[type[ChronicaError], ...], int], ...] = (
    ((ChronicumNotFound, ActumNotFound), EXIT_NOT_FOUND),
    ((InvalidActum, InvalidQuery, InvalidOwnerID, InvalidOption), EXIT_INVALID),
    ((UnknownBackend, BackendUnavailable, BackendConflict), EXIT_BACKEND),
    (StoreError, EXIT_STORE),
    (CapabilityUnsupported, EXIT_UNSUPPORTED),
)

ERASE_ALL_CONFIRMATION = "erase all"
"""What a person types at ``chronica erase --owner O --all`` to confirm it."""


def default_store_url() -> str:
    """Return ``$CHRONICA_STORE``, else the embedded SQLite default if a backend handles it, else ``memory://``."""
    configured = os.environ.get("CHRONICA_STORE")
    if configured:
        return configured
    try:
        registry().backend_for(EMBEDDED_DEFAULT_URL)
    except ChronicaError:
        return "memory://"
    return EMBEDDED_DEFAULT_URL


def _split(values: str | None) -> list[str] | None:
    if values is None:
        return None
    return [value.strip() for value in values.split(",") if value.strip()]


_ESCAPED = {
    code: ascii(chr(code))[1:-1]
    for code in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]  # control characters, line breaks
}


def _printable(text: str) -> str:
    r"""``text`` as one line with nothing a terminal acts on: each control character escaped.

    Line breaks, carriage returns, tabs and escape sequences (C0, DEL, C1, U+2028, U+2029) are
    written as Python writes them in a string literal (``\n``, ``\r``, ``\x1b``, ``\u2028``),
    so text from the store (an agent's content, an id) can neither split a line nor rewrite
    lines printed before it. Other characters are kept; ``--json`` keeps every character.
    """
    return text.translate(_ESCAPED)


def _row(actum: Actum) -> str:
    actor, content = _printable(actum.actor), _printable(actum.content)
    return f"{actum.kind.value:<13} {actum.actor_kind.value:<10} {actor:<10} {content}"


def _actum_line(position: int, actum: Actum) -> str:
    return f"{position:>4}  {_row(actum)}"


ACTA_HEADER = f"{'#':>4}  {'kind':<13} {'actor kind':<10} {'actor':<10} content"
"""The header row above the acta the demo prints: each row's number is its place in the chronicum."""


def _listed_line(position: int, actum: Actum) -> str:
    """An actum as ``acta`` and ``follow`` print it: number, id, kind, actor kind, actor, content."""
    return f"{position:>4}  {actum.id}  {_row(actum)}"


@dataclass
class _Output:
    out: TextIO

    def line(self, text: str = "") -> None:
        print(text, file=self.out)

    def json(self, value: object) -> None:
        print(json.dumps(value, ensure_ascii=False, indent=2), file=self.out)


def _demo(arguments: argparse.Namespace, chronicarius: Chronicarius, output: _Output) -> int:
    shown = masked_url(arguments.store)
    output.line(f"Chronica demo on {shown}: owner {DINNER_OWNER!r}, chronicum {DINNER_CHRONICUM!r}")
    output.line()
    output.line("The dinner story, as recorded (each with an idempotency key, so a rerun adds nothing):")
    for position, actum in enumerate(DINNER_STORY, start=1):
        chronicarius.record_actum(DINNER_OWNER, actum, idempotency_key=f"dinner-story-{position}")
    listing = chronicarius.get_acta(DINNER_OWNER, DINNER_CHRONICUM)
    number = {actum.id: position for position, actum in enumerate(listing, start=1)}
    output.line(ACTA_HEADER)
    for actum in listing:
        output.line(_actum_line(number[actum.id], actum))
    output.line()
    output.line("The booking agent's context window (the last 3 messages, oldest first; # as above):")
    window = chronicarius.get_acta(DINNER_OWNER, DINNER_CHRONICUM, actum_kinds=[ActumKind.MESSAGE], last_n=3)
    output.line(ACTA_HEADER)
    for actum in window:
        output.line(_actum_line(number[actum.id], actum))
    output.line()
    try:
        chronicarius.get_acta("rafa", DINNER_CHRONICUM)
        output.line("Owner 'rafa' read ardian's chronicum: THIS IS A BUG")
        return EXIT_OTHER
    except ChronicumNotFound as refusal:
        output.line(
            f"Owner 'rafa' asks for {DINNER_CHRONICUM!r}: refused, {type(refusal).__name__}: {refusal}"
        )
    output.line()
    reply = Actum(
        DINNER_CHRONICUM,
        ActumKind.MESSAGE,
        ActorKind.AGENT,
        "booking",
        "Booked: Rumah Teduh, Friday 7pm, four.",
    )
    first = chronicarius.record_actum(DINNER_OWNER, reply, idempotency_key="booking-reply-1")
    reworded = Actum(
        DINNER_CHRONICUM,
        ActumKind.MESSAGE,
        ActorKind.AGENT,
        "booking",
        "Your table at Rumah Teduh is booked for Friday at 7pm.",
    )
    retry = chronicarius.record_actum(DINNER_OWNER, reworded, idempotency_key="booking-reply-1")
    output.line(f"The booking agent's reply, key 'booking-reply-1': actum {first.id}")
    output.line(f"Retried with reworded content:                  actum {retry.id}")
    verdict = "the same actum, stored once" if retry == first else "A DIFFERENT ACTUM: THIS IS A BUG"
    output.line(f"  -> {verdict}: {retry.content!r}")
    count = len(chronicarius.get_acta(DINNER_OWNER, DINNER_CHRONICUM))
    output.line(f"The chronicum holds {count} acta.")
    return 0 if retry == first else EXIT_OTHER


def _standard_input_content() -> str:
    """The content piped to ``record``, byte for byte (no newline translated or dropped).

    On a terminal it first says, on standard error, that it is reading, and how to end.

    Raises:
        InvalidActum: ``--content``: standard input is not valid UTF-8.
    """
    if _interactive(sys.stdin):
        print(
            "chronica record: reading the content from standard input; end it with Ctrl-D "
            "(Ctrl-Z then Enter on Windows), or give --content",
            file=sys.stderr,
            flush=True,
        )
    binary = getattr(sys.stdin, "buffer", None)
    if binary is None:  # a text stream standing in for standard input (tests, embedding)
        return sys.stdin.read()
    data: bytes = binary.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidActum(
            "content", f"standard input is not valid UTF-8 ({error.reason} at byte {error.start})"
        ) from None


def _record(arguments: argparse.Namespace, chronicarius: Chronicarius, output: _Output) -> int:
    content = arguments.content if arguments.content is not None else _standard_input_content()
    summarizes = None if arguments.summarizes is None else Span(*arguments.summarizes)
    actum = Actum(
        arguments.chronicum_id,
        arguments.kind,
        arguments.actor_kind,
        arguments.actor,
        content,
        answers=arguments.answers,
        summarizes=summarizes,
    )
    stored = chronicarius.record_actum(arguments.owner, actum, idempotency_key=arguments.key)
    if arguments.store.startswith("memory:"):
        print(
            "chronica: note: memory:// keeps nothing once this command ends; name a store with "
            "--store or CHRONICA_STORE (or install chronica-sqlalchemy for sqlite:///chronica.db)",
            file=sys.stderr,
        )
    if arguments.json:
        output.json(stored.to_dict())
    else:
        output.line(stored.id)
    return 0


def _acta(arguments: argparse.Namespace, chronicarius: Chronicarius, output: _Output) -> int:
    acta = chronicarius.get_acta(
        arguments.owner,
        arguments.chronicum_id,
        actum_kinds=_split(arguments.kinds),
        actor_kinds=_split(arguments.actor_kinds),
        last_n=arguments.last,
        before=arguments.before,
        view=View.AS_WRITTEN if arguments.as_written else View.SUMMARIZED,
    )
    if arguments.json:
        output.json([actum.to_dict() for actum in acta])
    else:
        for position, actum in enumerate(acta, start=1):
            output.line(_listed_line(position, actum))
    return 0


def _follow(arguments: argparse.Namespace, chronicarius: Chronicarius, output: _Output) -> int:
    """Print the chronicum's acta as they are recorded, like ``tail -f``, until Ctrl-C (exit 130).

    With ``--last N`` the newest N acta of the kinds asked for come first, then what follows them.
    On a terminal a note on standard error says what is followed and how to stop.
    """
    owner, chronicum_id = arguments.owner, arguments.chronicum_id
    kinds, actor_kinds = _split(arguments.kinds), _split(arguments.actor_kinds)
    first: list[Actum] = []
    after = arguments.after
    if arguments.last:
        first = chronicarius.get_acta(
            owner, chronicum_id, actum_kinds=kinds, actor_kinds=actor_kinds, last_n=arguments.last
        )
        newest = first or chronicarius.get_acta(owner, chronicum_id, last_n=1)
        after = newest[-1].id if newest else None
    follower = chronicarius.follow(
        owner, chronicum_id, after=after, actum_kinds=kinds, actor_kinds=actor_kinds
    )
    if _interactive(output.out):
        print(f"chronica: following {chronicum_id}; Ctrl-C to stop", file=sys.stderr, flush=True)
    try:
        for position, actum in enumerate(itertools.chain(first, follower), start=1):
            if arguments.json:  # one JSON object a line (JSON Lines): a reader can parse each as it comes
                output.out.write(json.dumps(actum.to_dict(), ensure_ascii=False) + "\n")
            else:
                output.out.write(_listed_line(position, actum) + "\n")
            output.out.flush()
    except KeyboardInterrupt:
        follower.close()
        return EXIT_INTERRUPTED
    return 0


def _fork(arguments: argparse.Namespace, chronicarius: Chronicarius, output: _Output) -> int:
    """Fork the chronicum (up to ``--at``, else its newest actum) and print the fork's id."""
    fork = chronicarius.fork_chronicum(arguments.owner, arguments.chronicum_id, at=arguments.at)
    if arguments.json:
        output.json(fork.to_dict())
    else:
        output.line(fork.id)
    return 0


def _show(arguments: argparse.Namespace, chronicarius: Chronicarius, output: _Output) -> int:
    chronicum = chronicarius.get_chronicum(arguments.owner, arguments.chronicum_id)
    if arguments.json:
        output.json(chronicum.to_dict())
    else:
        for key, value in chronicum.to_dict().items():
            if isinstance(value, dict):  # forked_from: the source, and the last actum it shares
                value = f"{value['chronicum_id']} at {value['actum_id'] or '(no actum)'}"
            output.line(f"{key}: {_printable(str(value))}")
    return 0


def _list(arguments: argparse.Namespace, chronicarius: Chronicarius, output: _Output) -> int:
    page = chronicarius.list_chronica(arguments.owner, limit=arguments.limit, cursor=arguments.cursor)
    if arguments.json:
        output.json(page.to_dict())
        return 0
    _print_page(page, arguments, output)
    return 0


def _print_page(page: ChronicaPage, arguments: argparse.Namespace, output: _Output) -> None:
    """One line per chronicum (id, started_at, last_actum_at), then the next page's cursor."""
    if page.chronica:
        forms = [chronicum.to_dict() for chronicum in page.chronica]
        rows = [("id", "started_at", "last_actum_at")] + [
            (_printable(form["id"]), form["started_at"], form["last_actum_at"] or "-") for form in forms
        ]
        widths = [max(len(row[column]) for row in rows) for column in range(2)]
        for row in rows:
            output.line(f"{row[0].ljust(widths[0])}  {row[1].ljust(widths[1])}  {row[2]}")
    else:
        after = " after this cursor" if arguments.cursor else ""
        output.line(f"owner {arguments.owner!r} has no chronica{after}")
    if page.next_cursor is None:
        output.line("next cursor: none (this is the last page)")
    else:
        output.line(f"next cursor: {page.next_cursor}")


def _usage_refusal(arguments: argparse.Namespace) -> str | None:
    """Why the command must not run, though each argument parsed (``None``: it may run)."""
    if arguments.command == "erase":
        return _erase_refusal(arguments)
    if arguments.command == "follow" and arguments.after is not None and arguments.last:
        return "give --after or --last, not both"
    return None


def _erase_refusal(arguments: argparse.Namespace) -> str | None:
    """Why ``erase`` must not run (bad usage, or no way to confirm), or ``None`` when it may."""
    if arguments.idle_for is not None:
        if arguments.all or arguments.chronicum_id is not None:
            return "give a chronicum id, --all or --idle-for, one of them"
    elif arguments.dry_run:
        return "--dry-run goes with --idle-for (the others erase at once)"
    elif arguments.owner is None:
        return "the following argument is required: --owner"
    if arguments.dry_run:
        return None
    if arguments.all and arguments.chronicum_id is not None:
        return "give a chronicum id or --all, not both"
    if not arguments.all and arguments.chronicum_id is None and arguments.idle_for is None:
        return (
            "name the chronicum to erase, or give --all to erase every chronicum of the owner, "
            "or --idle-for to erase the idle ones"
        )
    if not arguments.yes and not _interactive(sys.stdin):
        return (
            "refusing to erase without confirmation: standard input is not a terminal, so "
            "nothing can be confirmed; pass --yes to erase without asking (nothing was erased)"
        )
    return None


def _interactive(stream: TextIO | None) -> bool:
    """Whether ``stream`` is a terminal a person can answer a question on."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        return False


def _confirmed(question: str, expected: str) -> bool:
    """Ask ``question`` on standard error; whether the person typed ``expected`` exactly."""
    print(question, end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return answer.rstrip("\r\n") == expected


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _not_confirmed() -> int:
    print("chronica: not confirmed; nothing was erased", file=sys.stderr)
    return EXIT_OTHER


ERASE_IDLE_CONFIRMATION = "erase idle"
"""What a person types at ``chronica erase --idle-for D`` to confirm it."""


def _erase_idle(arguments: argparse.Namespace, chronicarius: Chronicarius, output: _Output) -> int:
    """``erase --idle-for``: count the idle chronica, confirm unless ``--yes``, erase them."""
    owner = arguments.owner
    store = chronicarius.store
    if RETENTION not in store_capabilities(store):  # said before asking anything
        raise CapabilityUnsupported(type(store).__name__, RETENTION)
    before = datetime.now(UTC) - arguments.idle_for
    moment = before.isoformat(timespec="seconds").replace("+00:00", "Z")
    whose = "of every owner" if owner is None else f"of owner {owner!r}"
    idle = chronicarius.erase_idle(before=before, owner_id=owner, dry_run=True)
    erased = 0
    if not arguments.dry_run and idle:
        if not arguments.yes and not _confirmed(
            f"Erase {_plural(idle, 'chronicum', 'chronica')} {whose} idle since before {moment}, "
            f"with all their acta? This cannot be undone.\nType {ERASE_IDLE_CONFIRMATION!r} to "
            "confirm: ",
            ERASE_IDLE_CONFIRMATION,
        ):
            return _not_confirmed()
        erased = chronicarius.erase_idle(before=before, owner_id=owner)
    if arguments.json:
        counted = {"chronica_idle": idle} if arguments.dry_run else {"chronica_erased": erased}
        output.json({"idle_before": moment, "owner_id": owner, "dry_run": arguments.dry_run, **counted})
    elif arguments.dry_run:
        output.line(
            f"{_plural(idle, 'chronicum', 'chronica')} {whose} idle since before {moment}; "
            "dry run: nothing was erased"
        )
    else:
        output.line(f"erased {_plural(erased, 'chronicum', 'chronica')} {whose} idle since before {moment}")
    return 0


def _erase(arguments: argparse.Namespace, chronicarius: Chronicarius, output: _Output) -> int:
    if arguments.idle_for is not None:
        return _erase_idle(arguments, chronicarius, output)
    owner = arguments.owner
    store = chronicarius.store
    if ERASURE not in store_capabilities(store):  # said before asking anything
        raise CapabilityUnsupported(type(store).__name__, ERASURE)
    if arguments.all:
        if not arguments.yes and not _confirmed(
            f"Erase EVERY chronicum of owner {owner!r}, with all their acta? This cannot be undone.\n"
            f"Type {ERASE_ALL_CONFIRMATION!r} to confirm: ",
            ERASE_ALL_CONFIRMATION,
        ):
            return _not_confirmed()
        chronica = chronicarius.erase_owner(owner)
        if arguments.json:
            output.json({"owner_id": owner, "chronica_erased": chronica})
        else:
            output.line(f"erased {_plural(chronica, 'chronicum', 'chronica')} of owner {owner!r}")
        return 0
    chronicum_id = arguments.chronicum_id
    if not arguments.yes:
        form = chronicarius.get_chronicum(owner, chronicum_id).to_dict()  # not found: before asking
        forks = " and every fork of it (forks share its acta)" if HISTORY in store_capabilities(store) else ""
        if not _confirmed(
            f"Erase chronicum {chronicum_id!r} of owner {owner!r} (started {form['started_at']}, "
            f"last actum {form['last_actum_at'] or 'never'}) with all its acta{forks}? This cannot "
            "be undone.\nType the chronicum id to confirm: ",
            chronicum_id,
        ):
            return _not_confirmed()
    acta = chronicarius.erase_chronicum(owner, chronicum_id)
    if arguments.json:
        output.json({"chronicum_id": chronicum_id, "owner_id": owner, "acta_erased": acta})
    else:
        output.line(f"erased chronicum {chronicum_id!r} of owner {owner!r}: {_plural(acta, 'actum', 'acta')}")
    return 0


def backend_capabilities(backend: Backend) -> list[str]:
    """The capabilities ``backend`` declares: ``idempotency`` when it is idempotent, then its others.

    Known ones come in :data:`chronica_core.capabilities.ALL_CAPABILITIES` order, unknown ones
    after them as declared, each once.
    """
    declared = ([IDEMPOTENCY] if backend.idempotent else []) + list(backend.capabilities)
    known = [name for name in ALL_CAPABILITIES if name in declared]
    return known + [name for name in dict.fromkeys(declared) if name not in ALL_CAPABILITIES]


POLLING_THROUGH_ACTA = "polling through acta"
"""What ``chronica backends`` says of how a backend without the ``follow`` capability follows."""

OWN_WAKE_UPS = "the store's own wake-ups (follow capability)"
"""What it says of a backend with the ``follow`` capability that does not say how it follows."""


def backend_follows(backend: Backend) -> str:
    """How ``backend``'s followers learn of new acta, as ``chronica backends`` shows it.

    What it declares as ``follows``, else :data:`POLLING_THROUGH_ACTA` (no ``follow``
    capability) or :data:`OWN_WAKE_UPS` (with it).
    """
    if backend.follows:
        return backend.follows
    return OWN_WAKE_UPS if FOLLOW in backend.capabilities else POLLING_THROUGH_ACTA


def _backends(arguments: argparse.Namespace, output: _Output) -> int:
    installed, broken = list_backends()
    rows = [("backend", "schemes", "async", "capabilities", "plugin", "follows")] + [
        (
            item.backend.name,
            ", ".join(f"{scheme}://" for scheme in item.backend.schemes),
            "yes" if item.backend.open_async is not None else "no",
            ", ".join(backend_capabilities(item.backend)) or "none",
            item.plugin,
            backend_follows(item.backend),
        )
        for item in installed
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(5)]
    for row in rows:
        output.line(
            "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[5]])
        )
    for plugin in broken:
        source = f" from {plugin.distribution}" if plugin.distribution else ""
        output.line(f"BROKEN plugin {plugin.name!r} ({plugin.target}{source}): {plugin.error}")
    return 0


def _store_option(text: str) -> tuple[str, str]:
    """Parse ``--option KEY=VALUE``; a malformed one is a usage error (exit 2)."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


_PLACE_OPTIONS = ("schema", "database")
"""Store options that say where in the URL's server a store keeps its tables, named in output.
Other options are never printed: they may hold credentials (MongoDB's ``password``, say)."""


def _opened_store(arguments: argparse.Namespace) -> Store:
    return open_store(arguments.store, **dict(arguments.option))


def _migrate(arguments: argparse.Namespace, output: _Output) -> int:
    with _opened_store(arguments) as store:  # a backend with a schema migrates as it opens
        migrate: Callable[[], object] | None = getattr(store, "migrate", None)
        if migrate is None:
            output.line(f"{type(store).__name__} keeps no schema; nothing to migrate")
            return 0
        migrate()
    options = dict(arguments.option)
    where = ", ".join(f"{name}={options[name]}" for name in _PLACE_OPTIONS if name in options)
    output.line(f"schema of {masked_url(arguments.store)}{f' ({where})' if where else ''} is current")
    return 0


COMMANDS_GROUP = "chronica.commands"
"""The entry-point group through which a distribution adds a ``chronica`` subcommand.

The entry point's name is the command; its object is ``main(argv: list[str]) -> int``, called
with the words after the command's name (it parses them itself) and returning the exit code. A
``ChronicaError`` it raises is reported as any command's is, with the same exit codes.
"""

_OWN_PLUGIN_COMMANDS = {
    "conformance": ("chronica-conformance", "run the conformance suite against a store URL")
}
"""Subcommands of the project's own distributions: the one that provides each, and its help."""


def plugin_commands() -> dict[str, importlib.metadata.EntryPoint]:
    """The installed ``chronica`` subcommands of :data:`COMMANDS_GROUP`, by name (not loaded)."""
    return {point.name: point for point in importlib.metadata.entry_points(group=COMMANDS_GROUP)}


def _run_plugin_command(name: str, point: importlib.metadata.EntryPoint | None, argv: list[str]) -> int:
    """Load the subcommand ``name`` and run it with ``argv``; say what to install when it is missing."""
    if point is None:
        distribution = _OWN_PLUGIN_COMMANDS[name][0]
        print(
            f"chronica {name}: {distribution} is not installed: {install_command(distribution)}",
            file=sys.stderr,
        )
        return EXIT_BACKEND
    url = next((word for word in argv if "://" in word), "")  # a store URL's secrets stay unshown
    try:
        try:
            command: Callable[[list[str]], int] = point.load()
        except Exception as error:  # noqa: BLE001 - a broken plugin is reported, as `backends` does
            source = f" of {point.dist.name}" if point.dist is not None else ""
            print(
                f"chronica {name}: the command{source} failed to load ({point.value}): "
                f"{type(error).__name__}: {redact(str(error), url)}",
                file=sys.stderr,
            )
            return EXIT_BACKEND
        return command(argv)
    except ChronicaError as error:
        return _report(error, argparse.Namespace(command=name), url, None)
    except BaseException as error:  # not ours to handle, but its traceback must not show a password
        redact_error(error, url)
        raise


def version_text() -> str:
    """What ``chronica --version`` prints: the core's version, then each installed plugin distribution's.

    Returns:
        One line, e.g. ``"chronica 0.2.0 (plugins: chronica-postgres 0.2.0)"``; the plugins are the
        distributions other than ``chronica`` that register in the ``chronica`` entry-point group,
        each once, sorted by name.
    """
    plugins = sorted(
        {
            f"{point.dist.name} {point.dist.version}"
            for point in importlib.metadata.entry_points(group="chronica")
            if point.dist is not None and point.dist.name != "chronica"
        }
    )
    return f"chronica {__version__}" + (f" (plugins: {', '.join(plugins)})" if plugins else "")


class _VersionAction(argparse.Action):
    """``--version``: print :func:`version_text` and exit 0 (the plugins are looked up only then)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **_: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and exit"
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        print(version_text())
        parser.exit()


_DURATION = re.compile(r"(?P<count>[0-9]+)(?P<unit>[smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _duration(text: str) -> timedelta:
    """Parse ``--idle-for``: a whole number over 0 and a unit (``90d``, ``12h``, ``30m``, ``45s``, ``2w``).

    A negative duration (``-5d``) is refused saying so. A duration reaching back before year 1 is
    "too long": it names no moment to erase before.
    """
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(
            f"must be a duration over 0, such as 90d (how long a chronicum has had no new actum), "
            f"not a negative one, got {text!r}"
        )
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a duration such as 90d, 12h, 30m or 2w, got {text!r}")
    count = int(match["count"])
    if count == 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text!r}")
    try:
        duration = timedelta(**{_UNITS[match["unit"]]: count})
    except OverflowError:
        duration = timedelta.max
    if duration >= datetime.now(UTC) - datetime.min.replace(tzinfo=UTC):
        raise argparse.ArgumentTypeError(f"too long, got {text!r}")
    return duration


_DURATION_OPTIONS = ("--idle-for",)


def _joined_durations(words: list[str]) -> list[str]:
    """``words`` with ``--idle-for -5d`` given as ``--idle-for=-5d``.

    argparse reads a word starting with ``-`` as an option (its own test for a negative number
    does not take ``-5d``), and would say the option lacks its argument; joined, the duration's
    own check says what is wrong with it.
    """
    joined: list[str] = []
    for word in words:
        if joined and joined[-1] in _DURATION_OPTIONS and re.fullmatch(r"-[0-9]+[a-z]*", word):
            joined[-1] = f"{joined[-1]}={word}"
        else:
            joined.append(word)
    return joined


def _newest_count(text: str) -> int:
    """Parse ``--last N``: a whole number, 0 or more (0 keeps every actum); else a usage error."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more (0 keeps every actum), got {count}")
    return count


_DESCRIPTIONS = {
    "demo": "Play the dinner story (owner 'ardian', chronicum 'dinner-friday') on the store: record "
    "it with idempotency keys (a rerun adds nothing), print it and the booking agent's context window, "
    "show that another owner is refused, and that a retried reply is stored once.",
    "backends": "List the installed backends (schemes, asyncio store, capabilities, plugin, and how "
    "their followers learn of new acta) and any plugin that failed to load, with its error.",
    "migrate": "Create the store's tables (collections, indexes), or bring them to the current "
    "schema version; safe to repeat, and from many processes at once.",
    "record": "Record one actum into a chronicum of the owner (the first write creates the "
    "chronicum) and print its id. Without --content the content is read from standard input, "
    "byte for byte.",
    "acta": "Print a context window of a chronicum of the owner, oldest first: the acta of the "
    "kinds and actor kinds given (before --before), then the newest --last of those. Each "
    "summary stands for the acta it summarizes unless --as-written.",
    "show": "Print a chronicum of the owner: its id, owner, started_at and last_actum_at.",
    "fork": "Fork a chronicum of the owner: a new chronicum that shares its history up to --at "
    "(else its newest actum), then goes on by itself; print the fork's id. Nothing is copied; "
    "the source is unchanged.",
    "list": "Print one page of the owner's chronica, newest first, then the cursor of the next page.",
}
"""What each command's ``--help`` says it does (``erase`` says it where it is declared)."""


class _Parser(argparse.ArgumentParser):
    """``argparse``, whose usage errors are JSON on standard error when ``json_errors``.

    Args:
        json_errors: the arguments hold ``--json``: print usage errors as JSON.
        arguments: as for ``argparse.ArgumentParser``.
    """

    def __init__(self, *arguments: Any, json_errors: bool = False, **keywords: Any) -> None:
        super().__init__(*arguments, **keywords)
        self.json_errors = json_errors

    def error(self, message: str) -> NoReturn:
        """Print a usage error (JSON when ``json_errors``) on standard error and exit with code 2."""
        if self.json_errors:
            _print_json_error("UsageError", f"{self.prog}: {message}", EXIT_USAGE)
            sys.exit(EXIT_USAGE)
        super().error(message)


def _print_json_error(name: str, message: str, code: int, **fields: str) -> None:
    """Print an error as one JSON object on standard error: ``error``, ``message``, ``exit_code``, ..."""
    form = {"error": name, "message": message, "exit_code": code, **fields}
    print(json.dumps(form, ensure_ascii=False), file=sys.stderr)


def _parser(json_errors: bool = False) -> argparse.ArgumentParser:
    store = _Parser(add_help=False)
    store.add_argument(
        "--store",
        default=None,
        help="store URL (default: $CHRONICA_STORE, else sqlite:///chronica.db with chronica-sqlalchemy, "
        "else memory://)",
    )
    store.add_argument(
        "--option",
        action="append",
        default=[],
        type=_store_option,
        metavar="KEY=VALUE",
        help="a store option, e.g. schema=chronica (repeatable; see the backend's README)",
    )
    owned = _Parser(add_help=False, parents=[store])
    owned.add_argument("chronicum_id", help="the chronicum id")
    owned.add_argument("--owner", required=True, help="the owner id (the person the chronicum belongs to)")
    owned.add_argument(
        "--json", action="store_true", help="print the public JSON form (errors too, on standard error)"
    )

    parser = _Parser(
        prog="chronica", description="One conversation, one person, many agents.", json_errors=json_errors
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    commands.add_parser("demo", parents=[store], help="play the dinner story and print each context window")
    commands.add_parser("backends", help="list the installed backends and broken plugins")
    commands.add_parser("migrate", parents=[store], help="create or upgrade the store's schema")
    record = commands.add_parser("record", parents=[owned], help="record one actum")
    record.add_argument(
        "--kind", required=True, help="what happened: " + ", ".join(kind.value for kind in ActumKind)
    )
    record.add_argument(
        "--actor-kind", required=True, help="who wrote it: " + ", ".join(kind.value for kind in ActorKind)
    )
    record.add_argument("--actor", required=True, help="stable id of the writer, e.g. booking")
    record.add_argument(
        "--content", default=None, help="the content (default: standard input, byte for byte)"
    )
    record.add_argument("--key", default=None, help="idempotency key: a retry with it lands once")
    record.add_argument(
        "--answers",
        default="",
        metavar="REQUEST",
        help="for a tool_response: the id of the tool_request it answers (the history capability)",
    )
    record.add_argument(
        "--summarizes",
        nargs=2,
        default=None,
        metavar=("FIRST", "LAST"),
        help="for a summary (a message): the ids of the first and last acta of the range it stands "
        "for (the history capability)",
    )
    acta = commands.add_parser("acta", parents=[owned], help="print a context window, oldest first")
    acta.add_argument("--kinds", default=None, help="comma-separated kinds to keep (default: all)")
    acta.add_argument(
        "--actor-kinds", default=None, help="comma-separated actor kinds to keep (default: all)"
    )
    acta.add_argument(
        "--last",
        type=_newest_count,
        default=0,
        metavar="N",
        help="keep only the newest N of those, 0 or more (default 0: all)",
    )
    acta.add_argument(
        "--before",
        default=None,
        metavar="ACTUM",
        help="an actum id: only what stands before it (a page back)",
    )
    acta.add_argument(
        "--as-written",
        action="store_true",
        help="every actum at its own place, summaries and the acta they stand for (default: summarized)",
    )
    follow = commands.add_parser(
        "follow",
        parents=[owned],
        help="print the acta as they are recorded, like tail -f (Ctrl-C ends it)",
        description="Print each new actum of the chronicum as it is recorded, until Ctrl-C (exit "
        "code 130). With --after, first every actum recorded after that one; with --last N, first "
        "the newest N. --json prints one JSON object a line. On a terminal a note on standard "
        "error says what is followed.",
    )
    follow.add_argument("--kinds", default=None, help="comma-separated kinds to print (default: all)")
    follow.add_argument(
        "--actor-kinds", default=None, help="comma-separated actor kinds to print (default: all)"
    )
    follow.add_argument(
        "--after", default=None, help="an actum id: start just after it (default: from now on)"
    )
    follow.add_argument(
        "--last",
        type=_newest_count,
        default=0,
        metavar="N",
        help="first print the newest N acta of those kinds, like tail (default 0: none)",
    )
    commands.add_parser("show", parents=[owned], help="print a chronicum")
    fork = commands.add_parser("fork", parents=[owned], help="fork a chronicum and print the fork's id")
    fork.add_argument(
        "--at",
        default=None,
        metavar="ACTUM",
        help="the last actum the fork shares, by id (default: the chronicum's newest)",
    )
    listing = commands.add_parser(
        "list", parents=[store], help="print one page of an owner's chronica, newest first"
    )
    listing.add_argument("--owner", required=True, help="the owner whose chronica to list")
    listing.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIST_LIMIT,
        help=f"chronica per page, 1 to 1000 (default {DEFAULT_LIST_LIMIT})",
    )
    listing.add_argument("--cursor", default=None, help="the next cursor a previous page printed")
    listing.add_argument(
        "--json",
        action="store_true",
        help="print JSON: chronica and next_cursor (errors too, on standard error)",
    )
    erase = commands.add_parser(
        "erase",
        parents=[store],
        help="erase a chronicum, every chronicum of an owner, or the idle ones (data protection, retention)",
        description="Erase a chronicum, with --all every chronicum of the owner, or with --idle-for "
        "every chronicum idle that long (a retention rule): their acta, idempotency keys and "
        "fields leave the store; only the id and a digest of the owner stay, so the id never "
        "passes to another owner. This cannot be undone. On a terminal it asks you to confirm "
        "(type the chronicum id, 'erase all' or 'erase idle'); elsewhere it needs --yes.",
    )
    erase.add_argument("chronicum_id", nargs="?", default=None, help="the chronicum to erase")
    erase.add_argument(
        "--owner",
        default=None,
        help="the owner id (the person the chronica belong to); with --idle-for, only this owner's",
    )
    erase.add_argument("--all", action="store_true", help="erase every chronicum of the owner")
    erase.add_argument(
        "--idle-for",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="erase every chronicum without a new actum for this long (e.g. 90d, 12h, 30m, 2w), "
        "of every owner unless --owner is given",
    )
    erase.add_argument(
        "--dry-run", action="store_true", help="with --idle-for: count what is idle, erase nothing"
    )
    erase.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    erase.add_argument(
        "--json", action="store_true", help="print what was erased as JSON (errors too, on standard error)"
    )
    points = plugin_commands()
    for name in sorted({*_OWN_PLUGIN_COMMANDS, *points}):
        if name in commands.choices:  # a core command is never replaced
            continue
        point = points.get(name)
        provider, text = _OWN_PLUGIN_COMMANDS.get(name) or (
            point.dist.name if point is not None and point.dist is not None else name,
            f"a command of its own (chronica {name} --help)",
        )
        plugin = commands.add_parser(
            name, add_help=False, help=text, description=f"Provided by {provider}: chronica {name} --help."
        )
        plugin.add_argument("argv", nargs=argparse.REMAINDER, help=f"the arguments of chronica {name}")
    for name, command in commands.choices.items():
        command.description = command.description or _DESCRIPTIONS.get(name)
        command.json_errors = json_errors
    return parser


_WITH_CHRONICARIUS: dict[str, Callable[[argparse.Namespace, Chronicarius, _Output], int]] = {
    "demo": _demo,
    "record": _record,
    "acta": _acta,
    "follow": _follow,
    "show": _show,
    "list": _list,
    "fork": _fork,
    "erase": _erase,
}
_WITHOUT_CHRONICARIUS: dict[str, Callable[[argparse.Namespace, _Output], int]] = {
    "backends": _backends,
    "migrate": _migrate,
}


_FLAGS = {
    "kind": "--kind",
    "actor_kind": "--actor-kind",
    "actor": "--actor",
    "content": "--content",
    "idempotency_key": "--key",
    "chronicum_id": "CHRONICUM_ID",
    "actum_kinds": "--kinds",
    "actor_kinds": "--actor-kinds",
    "last_n": "--last",
    "limit": "--limit",
    "cursor": "--cursor",
    "after": "--after",
    "before": "--before",
    "at": "--at",
    "answers": "--answers",
    "summarizes": "--summarizes",
    "summarizes.first": "--summarizes",
    "summarizes.last": "--summarizes",
}
"""The command-line flag that gave each field an error may name (``InvalidActum.field``, ...)."""

_READS = frozenset({"acta", "follow", "show", "list", "erase", "fork"})
"""Commands that never create a store that is not there (they find nothing in it)."""

_SQLITE_FILE = re.compile(
    r"sqlite(?:\+[A-Za-z0-9_]+)?:///(?P<path>[^?#]+)(?:[?#].*)?", re.IGNORECASE | re.DOTALL
)


def missing_database_file(url: str) -> Path | None:
    """The file a SQLite URL names when it does not exist (``None``: it exists, or ``url`` is no such URL).

    A read of such a store would create an empty database file where it runs; there is nothing in
    it to find, so the commands that only look (``acta``, ``follow``, ``show``, ``list``, ``erase``)
    look at an empty store instead and say so. In-memory and ``file:`` URI databases are left to
    the store.
    """
    match = _SQLITE_FILE.fullmatch(url)
    if match is None:
        return None
    path = unquote(match["path"])
    if path == ":memory:" or path.startswith("file:"):
        return None
    file = Path(path)
    return None if file.exists() else file.absolute()


def _check_without_connecting(arguments: argparse.Namespace) -> None:
    """Let the backend check the store URL and options, without touching the database.

    Its asyncio store is opened and closed unused: opening one checks the URL (driver, port,
    query) and the options, and connects only on first use. A backend without an asyncio store is
    only looked up.

    Raises:
        ChronicaError: what opening the store would raise for the URL or an option.
    """
    if registry().backend_for(arguments.store).open_async is None:
        return
    store = open_async_store(arguments.store, **dict(arguments.option))
    asyncio.run(store.close())


_POSITION_FLAGS: Final = {"acta": "--before", "follow": "--after", "fork": "--at"}
"""The flag naming the actum each command's ``ActumNotFound`` is about."""


def _message(error: ChronicaError, arguments: argparse.Namespace) -> str:
    """The error's message, naming the flag the user typed for the field it names."""
    if isinstance(error, InvalidActum | InvalidQuery) and error.field in _FLAGS:
        what = "actum" if isinstance(error, InvalidActum) else "query"
        return f"invalid {what}: {_FLAGS[error.field]}: {error.reason}"
    if isinstance(error, ActumNotFound) and arguments.command in _POSITION_FLAGS:
        return f"{_POSITION_FLAGS[arguments.command]}: {error}"
    if isinstance(error, InvalidOwnerID):
        return f"invalid --owner: {error.reason.replace('owner_id must', 'must')}"
    if isinstance(error, InvalidOption) and error.option in dict(getattr(arguments, "option", [])):
        return f"{error.backend}: --option {error.option}: {error.reason}"
    return str(error)


def _report(error: ChronicaError, arguments: argparse.Namespace, url: str, missing: Path | None) -> int:
    """Print ``error`` on standard error (JSON with ``--json``) and return its exit code."""
    code = next((code for kinds, code in _EXIT_CODES if isinstance(error, kinds)), EXIT_OTHER)
    message = redact(_message(error, arguments), url)
    fields: dict[str, str] = {}
    if isinstance(error, ChronicumNotFound):
        fields["store"] = masked_url(url)
        message += f" in {fields['store']}"
        if missing is not None:
            message += f" (there is no file {missing}; nothing was created)"
    if isinstance(error, CapabilityUnsupported):
        message += " (`chronica backends` lists each backend's capabilities)"
    if getattr(arguments, "json", False):
        _print_json_error(type(error).__name__, message, code, **fields)
    else:
        print(f"chronica: {type(error).__name__}: {message}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the ``chronica`` command with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    Chronica errors are printed to standard error as ``chronica: <ErrorName>: <message>`` (with
    ``--json``, as one JSON object: ``error``, ``message``, ``exit_code``, and ``store`` for a
    chronicum not found) and mapped to the exit codes in the module docstring; nothing else is
    caught. Messages name the flags that were typed (``--owner``, ``--last``, ``--after``), and
    "not found" names the store it looked in. The store URL's secrets never reach the output: the URL is
    shown with :func:`~chronica_core.redaction.masked_url`, and they are redacted from an error's
    message, and from any other exception (and the exceptions chained to it) before it
    propagates. ``acta``, ``follow``, ``show``, ``list`` and ``erase`` on a SQLite file that does
    not exist create none (see :func:`missing_database_file`).

    Ctrl-C (``KeyboardInterrupt``) ends any command with exit code 130 and no traceback, once
    the store is closed. Run as the program (``argv`` not given), a Ctrl-C pressed again while it
    closes the store and exits changes nothing.
    """
    if argv is None:
        _interrupt_once()
    try:
        return _main(list(sys.argv[1:] if argv is None else argv), out)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _interrupt_once() -> None:
    """Make the first Ctrl-C raise ``KeyboardInterrupt`` and ignore the later ones.

    From then on, records of level WARNING and below are not logged (the process is ending).

    Only where Python's own handler is in place (a process that ignores SIGINT keeps ignoring it),
    in the main thread: the command then closes its store in peace and says nothing more.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return

    def interrupted(number: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # The interrupted call may leave a connection mid-statement; the warnings a driver's pool
        # logs while the store closes it are not news to someone who pressed Ctrl-C.
        logging.disable(logging.WARNING)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)


_COMMAND_OPTIONS = ("--store", "--option", "--owner", "--json")
"""Options of the commands that a person may put before the command's name by mistake."""


def _misplaced_option(words: list[str]) -> str | None:
    """Say where a command's option goes when it comes before the command's name, else ``None``.

    argparse would take the option's value, a store URL with its password, for the command's
    name and print it.
    """
    option = words[0].partition("=")[0] if words else ""
    if option not in _COMMAND_OPTIONS:
        return None
    named = [word for word in words if word in _WITH_CHRONICARIUS or word in _WITHOUT_CHRONICARIUS]
    command = named[0] if named else "COMMAND"
    return f"{option} goes after the command: chronica {command} {option} ... (see chronica {command} --help)"


def _main(words: list[str], out: TextIO | None) -> int:
    """:func:`main`, given the words after ``chronica``."""
    misplaced = _misplaced_option(words)
    if misplaced is not None:
        print(f"chronica: {misplaced}", file=sys.stderr)
        return EXIT_USAGE
    if words and words[0] not in _WITH_CHRONICARIUS and words[0] not in _WITHOUT_CHRONICARIUS:
        points = plugin_commands()
        if words[0] in points or words[0] in _OWN_PLUGIN_COMMANDS:
            return _run_plugin_command(words[0], points.get(words[0]), words[1:])
    arguments = _parser(json_errors="--json" in words).parse_args(_joined_durations(words))
    refusal = _usage_refusal(arguments)  # refused before the store is opened: nothing is done
    if refusal is not None:
        if getattr(arguments, "json", False):
            _print_json_error("UsageError", f"chronica {arguments.command}: {refusal}", EXIT_USAGE)
        else:
            print(f"chronica {arguments.command}: {refusal}", file=sys.stderr)
        return EXIT_USAGE
    output = _Output(out if out is not None else sys.stdout)
    if getattr(arguments, "store", "unset") is None:
        arguments.store = default_store_url()
    url = str(getattr(arguments, "store", None) or getattr(arguments, "url", ""))
    missing = missing_database_file(url) if arguments.command in _READS else None
    try:
        if arguments.command in _WITHOUT_CHRONICARIUS:
            return _WITHOUT_CHRONICARIUS[arguments.command](arguments, output)
        store: Store
        if missing is not None:
            _check_without_connecting(arguments)  # a bad URL is said as it would be with a file
        with MemoryStore() if missing is not None else _opened_store(arguments) as store:
            if missing is not None and arguments.command == "list" and not arguments.json:
                print(f"chronica: note: there is no file {missing}; nothing was created", file=sys.stderr)
            return _WITH_CHRONICARIUS[arguments.command](arguments, Chronicarius(store), output)
    except ChronicaError as error:
        return _report(error, arguments, url, missing)
    except BrokenPipeError:  # `chronica demo | head`: the reader left; stop quietly
        sys.stderr.close()
        return 0
    except BaseException as error:  # not ours to handle, but its traceback must not show a password
        redact_error(error, url)
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
