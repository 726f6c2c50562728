"""The distributions' packaging: one version, bounded siblings, metadata an index shows, licences.

Every ``pyproject.toml`` of the repository is checked (the core's, and each one under
``backends``, ``conformance`` and ``integrations``), so a distribution added later is held to
the same rules. Building and installing them is ``tox -e dists`` (``.ci/check-dists``).
"""

from __future__ import annotations

import configparser
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import chronica_core
from chronica_core.cli import main, version_text
from chronica_core.install import FIRST_PARTY_FOLDERS

ROOT = Path(__file__).resolve().parent.parent
VERSION_FILE = ROOT / "chronica_core" / "VERSION"
VERSION = Version(VERSION_FILE.read_text().strip())
FOLDERS = sorted(
    [ROOT, ROOT / "conformance"]
    + [
        path.parent
        for pattern in ("backends/*/pyproject.toml", "integrations/*/pyproject.toml")
        for path in ROOT.glob(pattern)
    ]
)
SIBLINGS = {name for name in FIRST_PARTY_FOLDERS}
PYTHONS = ("3.11", "3.12", "3.13")


def _project(folder: Path) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    return project


def _tool(folder: Path) -> dict[str, Any]:
    tool: dict[str, Any] = tomllib.loads((folder / "pyproject.toml").read_text())["tool"]
    return tool


def _id(folder: Path) -> str:
    return str(folder.relative_to(ROOT)) if folder != ROOT else "."


@pytest.fixture(params=FOLDERS, ids=_id)
def folder(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    return path


def test_every_distribution_is_checked_here_and_known_to_the_install_hints() -> None:
    # A new distribution's folder goes into chronica_core.install.FIRST_PARTY_FOLDERS too, so
    # that a message naming it shows its folder in a clone.
    assert {_id(folder) for folder in FOLDERS} == set(FIRST_PARTY_FOLDERS.values())
    assert {_project(folder)["name"] for folder in FOLDERS} == set(FIRST_PARTY_FOLDERS)


def test_the_version_is_written_once_and_every_distribution_reads_it(folder: Path) -> None:
    project, tool = _project(folder), _tool(folder)
    assert "version" not in project
    assert project["dynamic"] == ["version"]
    source = folder / tool["setuptools"]["dynamic"]["version"]["file"]
    assert source.resolve() == VERSION_FILE
    if folder != ROOT:  # a link, so that the sdist built from the folder carries the file
        assert source.is_symlink()


def test_the_core_reports_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert chronica_core.__version__ == str(VERSION)
    assert importlib.metadata.version("chronica") == str(VERSION)  # the env installed this tree
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == version_text() + "\n"
    assert version_text().startswith(f"chronica {VERSION} (plugins: ")
    assert "chronica-notebook 0.1.0" in version_text()  # the tox env's third-party backend


def test_python_dash_m_runs_the_command() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "chronica_core", "--version"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == version_text() + "\n"
    run = subprocess.run([sys.executable, "-m", "chronica_core"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "the following arguments are required: COMMAND" in run.stderr


def test_siblings_are_bounded_to_the_minor_series(folder: Path) -> None:
    project = _project(folder)
    requirements = [Requirement(text) for text in project.get("dependencies", [])]
    for extra in project.get("optional-dependencies", {}).values():
        requirements += [Requirement(text) for text in extra]
    siblings = [
        requirement
        for requirement in requirements
        if requirement.name in SIBLINGS and requirement.name != project["name"]  # self-extras: "all"
    ]
    expected = {f">={VERSION.major}.{VERSION.minor}", f"<{VERSION.major}.{VERSION.minor + 1}"}
    for requirement in siblings:
        assert {str(specifier) for specifier in requirement.specifier} == expected, str(requirement)
    if folder != ROOT:
        assert "chronica" in {requirement.name for requirement in siblings}


def test_metadata_an_index_shows(folder: Path) -> None:
    project = _project(folder)
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert (folder / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    assert project["requires-python"] == ">=3.11"
    classifiers = set(project["classifiers"])
    assert {f"Programming Language :: Python :: {version}" for version in PYTHONS} <= classifiers
    assert {"Typing :: Typed", "Operating System :: OS Independent"} <= classifiers
    assert any(classifier.startswith("Topic :: ") for classifier in classifiers)
    assert not any(
        classifier.startswith("License :: ") for classifier in classifiers
    )  # the SPDX field says it
    assert ("Framework :: Pytest" in classifiers) == (project["name"] == "chronica-conformance")
    assert len(project["keywords"]) >= 3
    assert {"Homepage", "Documentation", "Source"} <= set(project["urls"])
    assert all(url.startswith("https://") for url in project["urls"].values())


def test_every_package_is_typed(folder: Path) -> None:
    tool = _tool(folder)
    for package in tool["setuptools"]["packages"]:
        if "." in package:
            continue  # a subpackage: its top-level package's py.typed covers it (PEP 561)
        assert (folder / package / "py.typed").is_file()
        assert "py.typed" in tool["setuptools"]["package-data"][package]


def test_every_subpackage_is_listed(folder: Path) -> None:
    listed = set(_tool(folder)["setuptools"]["packages"])
    found = {
        init.parent.relative_to(folder).as_posix().replace("/", ".")
        for package in listed
        if "." not in package
        for init in (folder / package).rglob("__init__.py")
    }
    assert found == listed  # a subpackage left out is missing from the wheel


_LINK = re.compile(r"\]\((?P<target>[^)\s]+)")


def test_a_long_description_has_no_relative_links(folder: Path) -> None:
    readme = (folder / _project(folder)["readme"]).read_text()
    relative = [
        match["target"]
        for match in _LINK.finditer(readme)
        if not match["target"].startswith(("https://", "http://", "#", "mailto:"))
    ]
    assert relative == []


def test_an_sdist_carries_no_tests(folder: Path) -> None:
    assert "prune tests" in (folder / "MANIFEST.in").read_text().splitlines()


def test_libraries_choose_their_own_libpq_and_aiosqlite_is_an_extra() -> None:
    postgres = _project(ROOT / "backends" / "postgres")
    assert {Requirement(text).name for text in postgres["dependencies"]} == {
        "chronica",
        "psycopg",
        "psycopg-pool",
    }
    assert all(not Requirement(text).extras for text in postgres["dependencies"])
    assert [str(Requirement(text)) for text in postgres["optional-dependencies"]["binary"]] == [
        "psycopg[binary]>=3.2"
    ]
    sqlalchemy = _project(ROOT / "backends" / "sqlalchemy")
    assert "aiosqlite" not in {Requirement(text).name for text in sqlalchemy["dependencies"]}
    assert [Requirement(text).name for text in sqlalchemy["optional-dependencies"]["aiosqlite"]] == [
        "aiosqlite"
    ]
    core = _project(ROOT)
    assert [Requirement(text).extras for text in core["optional-dependencies"]["postgres"]] == [{"binary"}]


def test_tox_fails_instead_of_skipping_an_interpreter_it_lists() -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    skip = tox["tox"]["skip_missing_interpreters"]
    assert re.fullmatch(r"\{env:TOX_SKIP_MISSING_INTERPRETERS:false\}|false", skip), skip
    listed = [name.strip() for name in tox["tox"]["env_list"].split(",")]
    assert {"py311-memory", "py313-memory", "dists"} <= set(listed)
    assert "TOX_SKIP_MISSING_INTERPRETERS=false" in (ROOT / ".ci" / "run").read_text()


_CITED = re.compile(r"\b([RSE])(\d{1,2})\b")
_TEXT_FILES = ("*.py", "*.md", "*.toml", "*.ini", "*.yml")


def _repository_texts() -> list[Path]:
    skipped = {".tox", ".git", "build", ".venv", "site", "node_modules", ".mypy_cache", ".ruff_cache"}
    return [
        path
        for pattern in _TEXT_FILES
        for path in ROOT.rglob(pattern)
        if not skipped & set(path.relative_to(ROOT).parts) and not path.name.endswith(".egg-info")
    ]


def test_every_rule_and_contract_number_cited_is_one_docs_contract_md_defines() -> None:
    contract = (ROOT / "docs" / "contract.md").read_text()
    defined = set(re.findall(r"\*\*([RSE]\d{1,2})\b", contract))
    assert {f"R{n}" for n in range(1, 11)} | {f"S{n}" for n in range(1, 11)} | {"E1", "E2"} == defined
    undefined = {
        f"{path.relative_to(ROOT)}: {letter}{number}"
        for path in _repository_texts()
        for letter, number in _CITED.findall(path.read_text(errors="replace"))
        if f"{letter}{number}" not in defined
    }
    assert undefined == set()


def test_nothing_cites_a_document_outside_the_repository() -> None:
    design = "DESIGN"  # spelled apart, so that this file does not cite it either
    outside = re.compile(rf"{design}\.md|{design}\s*§|§\s?\d|\bissues? \d+\b", re.IGNORECASE)
    citing = {
        f"{path.relative_to(ROOT)}: {match.group()}"
        for path in _repository_texts()
        for match in outside.finditer(path.read_text(errors="replace"))
    }
    assert citing == set()


@pytest.mark.parametrize(
    "folder", sorted(ROOT.glob("backends/*")), ids=lambda folder: f"backends/{folder.name}"
)
def test_each_bundled_backend_declares_its_driver_faults_for_the_conformance_suite(folder: Path) -> None:
    # `chronica conformance URL` runs the driver-failure group with these (named as the backend)
    project = _project(folder)
    [package] = [name for name in _tool(folder)["setuptools"]["packages"] if "." not in name]
    plugin = (folder / package / "plugin.py").read_text()
    names = set(re.findall(r'\bname="([^"]+)"', plugin))
    faults = project["entry-points"]["chronica.driver_faults"]
    assert set(faults) == names
    for target in faults.values():
        module, _, attribute = target.partition(":")
        assert module == f"{package}.faults"
        assert f"class {attribute}:" in (folder / package / "faults.py").read_text()
