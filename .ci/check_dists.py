"""Build every distribution from its own folder, check what it carries, install it as from an index.

Usage: ``python .ci/check_dists.py WORK_FOLDER`` (``tox -e dists`` runs it). For each folder with a
``pyproject.toml`` (the core, ``conformance``, ``backends/*``, ``integrations/*``):

1. ``python -m build`` (its build environments installed by uv): the sdist, then the wheel built
   from the unpacked sdist (so the sdist alone must be enough, ``VERSION`` included);
2. the sdist holds ``LICENSE``, ``README.md``, ``pyproject.toml`` and ``VERSION`` as a plain file,
   and no tests; the wheel holds the licence, ``py.typed`` in each package, and the one version;
3. ``twine check --strict`` renders every long description as an index would.

Then ``uv pip install`` puts them in a fresh virtualenv by name from the built files
(``--find-links``, as from an index: the extras of ``chronica`` name the other distributions);
every package is imported, and ``chronica --version``, ``python -m chronica_core``,
``chronica backends``, ``chronica demo`` and a few conformance cases on ``sqlite://`` run. Exits
non-zero, naming the check, on the first failure.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION = (ROOT / "chronica_core" / "VERSION").read_text().strip()


def folders() -> list[Path]:
    """Every distribution's folder."""
    found = [ROOT, ROOT / "conformance"]
    found += sorted(path.parent for path in ROOT.glob("backends/*/pyproject.toml"))
    found += sorted(path.parent for path in ROOT.glob("integrations/*/pyproject.toml"))
    return found


def run(command: list[str], cwd: Path | None = None) -> str:
    """Run ``command``; return its standard output; exit naming it if it fails."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"FAILED ({done.returncode}): {' '.join(command)}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def check(condition: bool, message: str) -> None:
    """Exit with ``message`` unless ``condition`` holds."""
    if not condition:
        sys.exit(f"FAILED: {message}")


def check_sdist(path: Path) -> None:
    """The sdist has what a build from it needs, the version as a plain file, and no tests."""
    with tarfile.open(path) as archive:
        members = {
            member.name.split("/", 1)[1]: member for member in archive.getmembers() if "/" in member.name
        }
        version_name = "chronica_core/VERSION" if path.name.startswith(f"chronica-{VERSION}") else "VERSION"
        for required in ("LICENSE", "README.md", "pyproject.toml", "PKG-INFO", version_name):
            check(required in members, f"{path.name} lacks {required}")
        check(members[version_name].isfile(), f"{path.name}: {version_name} is not a plain file")
        version_file = archive.extractfile(members[version_name])
        check(
            version_file is not None and version_file.read().decode().strip() == VERSION,
            f"{path.name}: {version_name} is not {VERSION}",
        )
        tests = [name for name in members if name.startswith("tests/")]
        check(not tests, f"{path.name} carries tests without what they need: {tests[:3]}")


def check_wheel(path: Path, folder: Path, packages: list[str]) -> None:
    """The wheel has the licence, each package typed, every module of its source tree, and the one version."""
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        for package in packages:
            modules = (folder / package.replace(".", "/")).rglob("*.py")
            for module in modules:
                if "__pycache__" not in module.parts:
                    wanted = module.relative_to(folder).as_posix()
                    check(wanted in names, f"{path.name} lacks {wanted} (a subpackage not listed?)")
        info = next(name.split("/")[0] for name in names if name.endswith(".dist-info/METADATA"))
        check(f"{info}/licenses/LICENSE" in names, f"{path.name} lacks its LICENSE")
        for package in (package for package in packages if "." not in package):
            check(f"{package}/py.typed" in names, f"{path.name} lacks {package}/py.typed")
        metadata = archive.read(f"{info}/METADATA").decode()
        check(f"\nVersion: {VERSION}\n" in metadata, f"{path.name} is not version {VERSION}")
        check("\nLicense-Expression: Apache-2.0\n" in metadata, f"{path.name} has no licence expression")
        check(not any(name.startswith("tests/") for name in names), f"{path.name} installs a tests package")


def main(work: Path) -> None:
    """Build, check, install and use every distribution (see the module docstring)."""
    dist = work / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    for stale in dist.iterdir():
        stale.unlink()
    packages: list[str] = []
    for folder in folders():
        project = tomllib.loads((folder / "pyproject.toml").read_text())
        name = project["project"]["name"]
        print(f"building {name} from {folder.relative_to(ROOT) if folder != ROOT else '.'}", flush=True)
        before = set(dist.iterdir())
        run([sys.executable, "-m", "build", "--installer", "uv", "--outdir", str(dist), str(folder)])
        built = set(dist.iterdir()) - before
        sdists = [path for path in built if path.name.endswith(".tar.gz")]
        wheels = [path for path in built if path.suffix == ".whl"]
        check(len(sdists) == 1 and len(wheels) == 1, f"{name}: expected one sdist and one wheel, got {built}")
        check_sdist(sdists[0])
        own = project["tool"]["setuptools"]["packages"]
        check_wheel(wheels[0], folder, own)
        packages += own
    run([sys.executable, "-m", "twine", "check", "--strict", *map(str, sorted(dist.iterdir()))])

    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--clear", str(venv)])
    python = str(venv / "bin" / "python")
    chronica = str(venv / "bin" / "chronica")
    extras = (
        "postgres,sqlalchemy,mongodb,redis,conformance,openai-agents,adk,pydantic-ai,agent-framework,strands"
    )
    print(f"installing chronica[{extras}] by name from the built files", flush=True)
    installer = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", python]
    run([*installer, "--find-links", str(dist), f"chronica[{extras}]", "chronica-sqlalchemy[aiosqlite]"])
    run([python, "-c", "; ".join(f"import {package}" for package in packages)])
    run(
        [
            python,
            "-c",
            "import chronica_postgres.store, chronica_sqlalchemy.store, chronica_mongodb.store, "
            "chronica_redis.store",
        ]
    )
    version = run([chronica, "--version"]).strip()
    for name in ("chronica-postgres", "chronica-sqlalchemy", "chronica-mongodb", "chronica-redis"):
        check(f"{name} {VERSION}" in version, f"chronica --version does not name {name} {VERSION}: {version}")
    check(run([python, "-m", "chronica_core", "--version"]).strip() == version, "python -m chronica_core")
    origin = run([python, "-c", "from chronica_core.install import core_origin; print(core_origin().kind)"])
    check(origin.strip() == "index", f"installed by name, the core's origin reads {origin.strip()!r}")
    backends = run([chronica, "backends"])
    for scheme in ("memory://", "sqlite://", "postgresql://", "mongodb://", "redis://", "redis+cluster://"):
        check(scheme in backends, f"chronica backends does not list {scheme}")
    play = work / "demo"
    play.mkdir(exist_ok=True)
    (play / "chronica.db").unlink(missing_ok=True)
    check("The chronicum holds 8 acta." in run([chronica, "demo"], cwd=play), "chronica demo")
    cases = run([chronica, "conformance", "sqlite://", "-q", "-k", "test_s1_ or test_s2_"])
    check(" passed" in cases and " failed" not in cases, f"chronica conformance sqlite://:\n{cases}")
    print(f"every distribution builds, carries what it should, installs by name and works: {VERSION}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]).resolve())
