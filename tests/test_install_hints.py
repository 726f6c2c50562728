"""What Chronica tells a user to ``pip install``: a command that works where the user stands.

The tox environments install the core from this clone (``pip install -e .``), so the live hints
must name this clone's folders; the other origins are read from PEP 610 records written here.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path

import pytest

from chronica_core import Backend, BackendUnavailable, MemoryStore, UnknownBackend, hookimpl, open_store
from chronica_core.install import (
    FIRST_PARTY_FOLDERS,
    InstallOrigin,
    core_origin,
    install_command,
    origin_from_direct_url,
)
from chronica_core.registry import Registry, known_distribution

ROOT = Path(__file__).resolve().parent.parent


def _record(url: str, **info: object) -> str:
    return json.dumps({"url": url, "dir_info": info})


def test_an_install_from_this_clone_is_recognised_as_a_clone() -> None:
    assert core_origin() == InstallOrigin("clone", ROOT)
    assert origin_from_direct_url(_record(ROOT.as_uri(), editable=True)) == InstallOrigin("clone", ROOT)
    assert origin_from_direct_url(_record(ROOT.as_uri())) == InstallOrigin("clone", ROOT)


@pytest.mark.parametrize(
    ("record", "kind"),
    [
        (None, "index"),
        (json.dumps({"url": "https://host/chronica-0.2.0.tar.gz", "archive_info": {}}), "unknown"),
        (json.dumps({"url": "https://host/chronica.git", "vcs_info": {"vcs": "git"}}), "unknown"),
        (_record("file:///nonexistent/chronica"), "unknown"),  # a folder that is not the repository
        (_record("https://host/folder"), "unknown"),
        ("{not json", "unknown"),
        ("[]", "unknown"),
    ],
)
def test_other_origins_are_an_index_or_unknown(record: str | None, kind: str) -> None:
    assert origin_from_direct_url(record) == InstallOrigin(kind)


def test_from_a_clone_the_command_installs_the_folder_with_its_extra() -> None:
    clone = InstallOrigin("clone", Path("/home/ana/src/chronica"))
    assert install_command("chronica-postgres[binary]", clone) == (
        "pip install '/home/ana/src/chronica/backends/postgres[binary]'"
    )
    assert install_command("chronica-mongodb", clone) == "pip install /home/ana/src/chronica/backends/mongodb"
    assert install_command("chronica-conformance", clone) == "pip install /home/ana/src/chronica/conformance"
    spaced = InstallOrigin("clone", Path("/home/ana/my src/chronica"))
    assert install_command("chronica-sqlalchemy[mysql]", spaced) == (
        "pip install '/home/ana/my src/chronica/backends/sqlalchemy[mysql]'"
    )


def test_from_an_index_the_command_installs_the_name_with_its_extra_quoted() -> None:
    index = InstallOrigin("index")
    assert install_command("chronica-sqlalchemy[mysql]", index) == "pip install 'chronica-sqlalchemy[mysql]'"
    assert install_command("chronica-mongodb", index) == "pip install chronica-mongodb"


def test_when_the_origin_is_unknown_the_command_gives_both_forms() -> None:
    assert install_command("chronica-postgres[binary]", InstallOrigin("unknown")) == (
        "pip install 'chronica-postgres[binary]' "
        "(from a clone of Chronica: pip install './backends/postgres[binary]')"
    )
    assert install_command("chronica", InstallOrigin("unknown")) == (
        "pip install chronica (from a clone of Chronica: pip install .)"
    )


def test_a_third_party_distribution_is_named_as_given() -> None:
    assert (
        install_command("chronica-notebook", InstallOrigin("clone", ROOT)) == "pip install chronica-notebook"
    )
    assert install_command("my-store[fast]", InstallOrigin("index")) == "pip install 'my-store[fast]'"


def _installs(command: str) -> tuple[Path, set[str]]:
    """The folder a clone command installs and the extras it asks for."""
    argument = shlex.split(command)[2]
    folder, _, extras = argument.partition("[")
    return Path(folder), {extra for extra in extras.rstrip("]").split(",") if extra}


@pytest.mark.parametrize(
    ("scheme", "folder", "extras"),
    [
        ("postgresql", "backends/postgres", {"binary"}),
        ("postgres", "backends/postgres", {"binary"}),
        ("postgresql+psycopg", "backends/sqlalchemy", {"postgresql"}),
        ("postgresql+asyncpg", "backends/sqlalchemy", {"postgresql"}),
        ("mysql", "backends/sqlalchemy", {"mysql"}),
        ("mysql+pymysql", "backends/sqlalchemy", {"mysql"}),
        ("mariadb+asyncmy", "backends/sqlalchemy", {"mysql"}),
        ("sqlite", "backends/sqlalchemy", set()),
        ("sqlite+aiosqlite", "backends/sqlalchemy", {"aiosqlite"}),
        ("mongodb", "backends/mongodb", set()),
        ("mongodb+srv", "backends/mongodb", set()),
        ("redis", "backends/redis", set()),
        ("redis+cluster", "backends/redis", set()),
    ],
)
def test_an_unknown_first_party_scheme_names_a_folder_and_extra_that_exist(
    scheme: str, folder: str, extras: set[str]
) -> None:
    requirement = known_distribution(scheme)
    assert requirement is not None
    installed_folder, asked = _installs(install_command(requirement, InstallOrigin("clone", ROOT)))
    assert installed_folder == ROOT / folder
    assert asked == extras
    declared = tomllib.loads((installed_folder / "pyproject.toml").read_text())["project"]
    assert asked <= set(declared.get("optional-dependencies", {}))


def test_every_first_party_folder_holds_its_distribution() -> None:
    for name, folder in FIRST_PARTY_FOLDERS.items():
        project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
        assert project["name"] == name


def test_an_unknown_scheme_says_what_to_install_from_this_clone() -> None:
    with pytest.raises(UnknownBackend) as raised:
        open_store("mysql+pymysql://root@127.0.0.1/test")
    assert f"pip install '{ROOT}/backends/sqlalchemy[mysql]' to add it" in str(raised.value)
    with pytest.raises(UnknownBackend) as raised:
        open_store("mongodb://127.0.0.1/chronica")
    assert f"pip install {ROOT}/backends/mongodb to add it" in str(raised.value)


class _NeedsPostgresDriver:
    @hookimpl
    def chronica_backends(self) -> list[Backend]:
        return [Backend("needy", ("needy",), True, open=_needs_driver, install="chronica-postgres[binary]")]


def _needs_driver(url: str) -> MemoryStore:
    import chronica_no_such_driver  # type: ignore[import-not-found]  # noqa: F401

    raise AssertionError("unreachable")


def test_a_missing_driver_says_what_to_install_from_this_clone() -> None:
    registry = Registry(load_entry_points=False)
    registry.register(_NeedsPostgresDriver(), "needy")
    with pytest.raises(BackendUnavailable) as raised:
        registry.open_store("needy://x")
    assert str(raised.value) == (
        "backend 'needy' needs 'chronica_no_such_driver', which is not installed: "
        f"pip install '{ROOT}/backends/postgres[binary]'"
    )


def test_a_build_s_egg_info_in_the_current_directory_does_not_hide_the_installed_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    left_by_a_build = tmp_path / "chronica.egg-info"
    left_by_a_build.mkdir()
    (left_by_a_build / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: chronica\nVersion: 0.2.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -c` puts the current directory first
    assert core_origin() == InstallOrigin("clone", ROOT)
