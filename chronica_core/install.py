"""What to ``pip install`` for a missing piece, in the form that works where the user stands.

Chronica's distributions live in one repository. Installed from a clone of it (``pip install .``
or ``pip install -e .``), a sibling such as ``chronica-postgres`` is installed from its folder:
``pip install '/path/to/chronica/backends/postgres[binary]'``; its name alone is looked up on an
index. Installed from an index, the name is what works: ``pip install 'chronica-postgres[binary]'``.
Which one the user has is read from the core's PEP 610 record (``direct_url.json``, written by pip
for an install from a folder, an archive or a version-control URL; an install from an index has
none). When it is not known, the hint gives both forms.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from importlib.metadata import distributions
from pathlib import Path
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

__all__ = [
    "FIRST_PARTY_FOLDERS",
    "InstallOrigin",
    "core_origin",
    "install_command",
    "origin_from_direct_url",
]

FIRST_PARTY_FOLDERS: dict[str, str] = {
    "chronica": ".",
    "chronica-postgres": "backends/postgres",
    "chronica-sqlalchemy": "backends/sqlalchemy",
    "chronica-mongodb": "backends/mongodb",
    "chronica-redis": "backends/redis",
    "chronica-conformance": "conformance",
    "chronica-openai-agents": "integrations/openai_agents",
    "chronica-adk": "integrations/adk",
    "chronica-pydantic-ai": "integrations/pydantic_ai",
    "chronica-agent-framework": "integrations/agent_framework",
    "chronica-strands": "integrations/strands",
}
"""Each distribution of the repository, and its folder relative to the repository's root."""

_REQUIREMENT = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<extras>\[[A-Za-z0-9._,\s-]*\])?")


@dataclass(frozen=True, slots=True)
class InstallOrigin:
    """Where the installed ``chronica`` came from.

    Attributes:
        kind: ``"clone"`` (a local folder holding the repository), ``"index"`` (a package index:
            no PEP 610 record), or ``"unknown"`` (an archive, a version-control URL, a folder that
            is not the repository, or no installed ``chronica`` at all).
        clone: the repository's root folder when ``kind`` is ``"clone"``, else ``None``.
    """

    kind: str
    clone: Path | None = None


def origin_from_direct_url(record: str | None) -> InstallOrigin:
    """Read an installed distribution's PEP 610 ``direct_url.json`` text.

    Args:
        record: the file's text; ``None`` when the distribution has none (installed from an index).

    Returns:
        ``InstallOrigin("clone", root)`` for a local folder whose ``backends`` folder is there
        (the repository), ``InstallOrigin("index")`` for ``None``, else ``InstallOrigin("unknown")``
        (never raises: a malformed record is ``unknown``).
    """
    if record is None:
        return InstallOrigin("index")
    try:
        parsed = json.loads(record)
    except ValueError:
        return InstallOrigin("unknown")
    if not isinstance(parsed, dict) or "dir_info" not in parsed or not isinstance(parsed.get("url"), str):
        return InstallOrigin("unknown")
    parts = urlsplit(parsed["url"])
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return InstallOrigin("unknown")
    root = Path(url2pathname(unquote(parts.path)))
    if not (root / FIRST_PARTY_FOLDERS["chronica-postgres"] / "pyproject.toml").is_file():
        return InstallOrigin("unknown")
    return InstallOrigin("clone", root)


def core_origin() -> InstallOrigin:
    """Where this process's ``chronica`` distribution was installed from (see :class:`InstallOrigin`).

    Only an installed distribution counts (one an installer recorded itself in, ``INSTALLER``): a
    ``chronica.egg-info`` folder a build left in the current directory is not one.
    """
    for installed in distributions(name="chronica"):
        if installed.read_text("INSTALLER") is not None:
            return origin_from_direct_url(installed.read_text("direct_url.json"))
    return InstallOrigin("unknown")  # run from a source folder on sys.path


def install_command(requirement: str, origin: InstallOrigin | None = None) -> str:
    """The ``pip install`` command that gets ``requirement`` where the user stands.

    Args:
        requirement: a distribution name with optional extras, e.g. ``"chronica-sqlalchemy[mysql]"``
            (the smallest extra that provides what is missing).
        origin: where the core came from; default :func:`core_origin`.

    Returns:
        For a distribution of this repository: from a clone, ``pip install`` of its folder in that
        clone (an absolute path, so it works from any directory); from an index, ``pip install`` of
        its name; when unknown, both, as ``"pip install NAME (from a clone of Chronica: pip install
        ./FOLDER)"``. For any other distribution, ``pip install`` of the requirement. Arguments are
        quoted for a POSIX shell where needed (extras always are).
    """
    match = _REQUIREMENT.fullmatch(requirement.strip())
    folder = FIRST_PARTY_FOLDERS.get(match["name"].lower()) if match else None
    if match is None or folder is None:
        return f"pip install {shlex.quote(requirement)}"
    extras = re.sub(r"\s", "", match["extras"] or "")
    current = origin if origin is not None else core_origin()
    if current.kind == "clone" and current.clone is not None:
        return f"pip install {shlex.quote(str(current.clone / folder) + extras)}"
    by_name = f"pip install {shlex.quote(match['name'] + extras)}"
    if current.kind == "index":
        return by_name
    local = "." if folder == "." else f"./{folder}"
    return f"{by_name} (from a clone of Chronica: pip install {shlex.quote(local + extras)})"
