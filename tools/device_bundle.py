"""An offline bundle for the run of record (tools/device_run.py) on a machine with no network: the wheels
of what the target's Python lacks, at the lock's versions, and the download stage's data/raw with its
provenance record, checked current. Written beside the destination and moved into place whole.
"""

from __future__ import annotations

import contextlib
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from datetime import UTC, datetime
from pathlib import Path

from device_run import OneLineParser, UserError  # beside this file

ROOT = Path(__file__).resolve().parents[1]
DESCRIPTION = "An offline bundle for tools/device-run.sh (its --help says how to use it)."
FROM_HELP = "where the download stage ran: its data/raw and provenance/download.json (default: this checkout)"
VERSION_HELP = "the target's Python (default: this one's, %(default)s)"
# what the stages, the benchmarks and the accelerator tier import; these and what they need are the wheels
RUN_NEEDS = ["jax", "numpy", "optax", "safetensors", "pyyaml", "ruamel.yaml", "pydantic", "pydantic-core", "jinja2"]
BUNDLE = {"bundle.json", "data", "provenance", "wheels"}  # what a bundle holds at its top
RUN_NEEDS += ["matplotlib", "pandas", "protobuf", "psutil", "tqdm", "filelock", "platformdirs"]
RUN_NEEDS += ["pytest", "pytest-xdist", "hypothesis"]


def normal(name: str) -> str:
    """A package name as the lock writes it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_closure(roots: list[str] | tuple[str, ...]) -> set[str]:
    """`roots` and the packages they need, transitively, by uv.lock's dependency lists (markers not applied)."""
    needs: dict[str, set[str]] = {}
    for package in tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))["package"]:
        deps = needs.setdefault(normal(package["name"]), set())
        deps.update(normal(dep["name"]) for dep in package.get("dependencies", []))
    seen: set[str] = set()
    todo = [normal(name) for name in roots]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(needs.get(name, ()))
    return seen


def installed_names(listing: Path) -> set[str]:
    """The package names in the target's `pip freeze` or `pip list` output."""
    try:
        lines = listing.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(
            f"--installed {listing}: cannot read it ({err}); give the target's `pip freeze` output"
        ) from err
    return {normal(m.group()) for m in (re.match(r"[A-Za-z0-9][\w.-]*", line.strip()) for line in lines) if m}


def lacking_pins(installed: set[str]) -> list[str]:
    """`name==version` from requirements/dev.txt (the lock's export) of what the run needs and the target lacks."""
    text = (ROOT / "requirements" / "dev.txt").read_text(encoding="utf-8")
    pinned = {normal(m[1]): m[2] for m in re.finditer(r"^([A-Za-z0-9][\w.-]*)==([^\s;\\]+)", text, re.MULTILINE)}
    wanted = sorted(lock_closure(RUN_NEEDS) - installed)
    missing = [name for name in wanted if name not in pinned]
    if missing:
        raise UserError(f"requirements/dev.txt: no pin for {', '.join(missing)}; re-export the lock")
    return [f"{name}=={pinned[name]}" for name in wanted]


def download_problems(project: Path) -> list[str]:
    """Why `project`'s data/raw is not the download stage's current output ([] when it is)."""
    from mnist_jax_pipeline.config.params import load
    from mnist_jax_pipeline.orchestration import freshness, stage_table
    from mnist_jax_pipeline.orchestration.jobs import Job

    with contextlib.chdir(project):
        params = "params.yaml" if Path("params.yaml").is_file() else str(ROOT / "params.yaml")
        return freshness.Checker(load(params)).problems(Job(stage_table.get("download")))


def download_wheels(folder: Path, pins: list[str], python_version: str, platform_tag: str) -> None:
    """The pins' wheels for the target (each alone: the pins hold what they need), and their requirements.txt."""
    abi = "cp" + python_version.replace(".", "")
    target = ["--python-version", python_version, "--platform", platform_tag, "--implementation", "cp", "--abi", abi]
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", *target]
    if pins and subprocess.run([*pip, "-d", str(folder), *pins]).returncode != 0:
        raise UserError(f"pip download of {len(pins)} wheels failed (above); it needs this Python's pip and an index")
    (folder / "requirements.txt").write_text("".join(f"{pin}\n" for pin in pins), encoding="utf-8")


def prepare(dest: Path, project: Path, python_version: str, platform_tag: str, installed: Path | None) -> None:
    """Write the bundle to `dest`: wheels/, data/raw, provenance/download.json and bundle.json."""
    raw, record = project / "data" / "raw", project / "provenance" / "download.json"
    if not raw.is_dir() or not record.is_file():
        raise UserError(f"{project}: no data/raw and provenance/download.json; run `mnist-pipeline download` there")
    problems = download_problems(project)
    if problems:
        raise UserError(f"{project}: {problems[0]}; run `mnist-pipeline download` there again")
    names = {p.name for p in dest.iterdir()} if dest.is_dir() else set()
    if (dest.exists() and not dest.is_dir()) or (names and ("bundle.json" not in names or names - BUNDLE)):
        raise UserError(
            f"{dest}: a file, or a folder with files this script did not write; give an empty or new folder"
        )
    pins = lacking_pins(installed_names(installed) if installed else set())
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{dest.name}-", dir=dest.parent))
    try:
        (staging / "wheels").mkdir()
        download_wheels(staging / "wheels", pins, python_version, platform_tag)
        shutil.copytree(raw, staging / "data" / "raw")
        (staging / "provenance").mkdir()
        shutil.copy2(record, staging / "provenance")
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        prepared = datetime.now(UTC).isoformat(timespec="seconds")
        about: dict[str, object] = {
            "prepared": prepared,
            "commit": commit,
            "raw_from": str(project),
            "python_version": python_version,
        }
        about |= {"platform": platform_tag, "wheels": pins}
        (staging / "bundle.json").write_text(json.dumps(about, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(dest, ignore_errors=True)
        staging.replace(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"{dest}: {len(pins)} wheels, data/raw and its record")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="tools/device-prepare.sh", description=DESCRIPTION)
    parser.add_argument("dest", type=Path, metavar="BUNDLE", help="the folder to write: new, empty or a bundle")
    parser.add_argument("--from", dest="project", type=Path, default=ROOT, metavar="DIR", help=FROM_HELP)
    here, tag = f"{sys.version_info[0]}.{sys.version_info[1]}", f"manylinux2014_{platform.machine()}"
    parser.add_argument("--python-version", default=here, metavar="X.Y", help=VERSION_HELP)
    parser.add_argument("--platform", default=tag, metavar="TAG", help="its wheels' platform (default: %(default)s)")
    parser.add_argument("--installed", type=Path, metavar="FREEZE", help="its `pip freeze`: what it holds is left out")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"3\.\d+", args.python_version):
        parser.error(f"--python-version {args.python_version}: not a Python version such as 3.12")
    try:
        prepare(args.dest.resolve(), args.project.resolve(), args.python_version, args.platform, args.installed)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
