"""A GPU run of record in one command: prepare here (`prepare`), run there (`run OUT_DIR`).

`prepare` (tools/device-prepare.sh) fills .device/: the wheels of the packages the GPU image lacks, at the
lock's versions (cp312, manylinux), and the download stage's data/raw with its provenance record,
xz-compressed; it checks that the checkout and .device/ fit the 64 MiB a device call carries.

`run OUT_DIR` (tools/device-run.sh) runs on the device machine with the image's python3: a virtual
environment over the image's packages (--system-site-packages: its JAX and CUDA plugin) with the
carried wheels, the checkout's code on PYTHONPATH; then every stage by its own command, the benchmarks,
the accelerator tier and the determinism check (jit trained twice), each a step with its command, exit
code and seconds in OUT_DIR/manifest.json (rewritten after every step). A failed step does not stop the
rest; the exit status is 1 when any failed. The helper commands `params`, `raw-record` and `environment`
run inside that environment. The orchestration itself needs only the standard library.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

# the docstring's first line, kept where python -OO drops docstrings
DESCRIPTION = "A GPU run of record in one command: prepare here (`prepare`), run there (`run OUT_DIR`)."
ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("nojit", "jit", "jit_scan")
# what the stages import that the GPU image does not hold; carried with what they need (uv.lock's closure)
IMAGE_LACKS = ("pydantic", "ruamel.yaml", "protobuf", "platformdirs")
WHEEL_TARGET = (
    "--only-binary=:all:",
    "--platform",
    "manylinux2014_x86_64",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    "--abi",
    "cp312",
)
CARRY_LIMIT = 64 * 2**20  # what one device call carries: the checkout and the named ignored paths
OUT_FILE_LIMIT = 16 * 2**20  # per file under $OUT
BUDGET_S = float(os.environ.get("DEVICE_RUN_BUDGET_S", "inf"))  # seconds the whole run may take
BUNDLE_RESERVE_S = 30
# --smoke: a tiny MLP for a short epoch, so a CPU run of the whole script takes a minute or two
SMOKE_PARAMS = {
    "model": {"layer_sizes": [784, 32, 10]},
    "train": {"epochs": 1, "batch_size": 64},
    "profile": {"top_allocations": 5, "trace_steps": 2},
}
SMOKE_BENCH_TRAIN = ("--examples", "512", "--rounds", "1", "--repeats", "1")
SMOKE_BENCH_TTA = ("--examples", "512", "--seeds", "0", "--set", "train.epochs=1", "--target", "0")
OUT_FILES = (
    "manifest.json",
    "bench-train.json",
    "bench-time-to-accuracy.json",
    "bench-command-buffers.json",
    "results.tar.xz",
    "models.tar.xz",
    "profile.tar.xz",
)


class UserError(Exception):
    """A one-line error the user can act on."""


def carry_dir() -> Path:
    return ROOT / ".device"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


# --- prepare (here, with the project's environment) ---


def normal(name: str) -> str:
    """A package name as the lock writes it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_closure(roots: list[str] | tuple[str, ...]) -> set[str]:
    """`roots` and the packages they need, transitively, by uv.lock's dependency lists (markers not applied)."""
    import tomllib

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


def locked_pins(roots: tuple[str, ...]) -> list[str]:
    """`name==version` from requirements/runtime.txt (the lock's export) for `roots` and what they need."""
    text = (ROOT / "requirements" / "runtime.txt").read_text(encoding="utf-8")
    pinned = {
        normal(m.group(1)): m.group(2) for m in re.finditer(r"^([A-Za-z0-9][\w.-]*)==([^\s;\\]+)", text, re.MULTILINE)
    }
    missing = sorted(name for name in lock_closure(roots) if name not in pinned)
    if missing:
        raise UserError(
            f"requirements/runtime.txt: no pin for {', '.join(missing)}; re-export the lock (tools/update-lock.sh)"
        )
    return [f"{name}=={pinned[name]}" for name in sorted(lock_closure(roots))]


def download_record_problems(project: Path) -> list[str]:
    """Why `project`'s data/raw is not the download stage's current output ([] when it is)."""
    from mnist_jax_pipeline.config.params import load
    from mnist_jax_pipeline.orchestration import freshness, stage_table

    here = Path.cwd()
    os.chdir(project)
    try:
        params = "params.yaml" if Path("params.yaml").is_file() else str(ROOT / "params.yaml")
        return freshness.Checker(load(params)).problems(freshness.Job(stage_table.get("download")))
    finally:
        os.chdir(here)


def carried_size() -> int:
    """Bytes of the working tree a device call carries: tracked files and untracked ones git does not ignore."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    return sum((ROOT / name).stat().st_size for name in listed if name and (ROOT / name).is_file())


def git(*args: str) -> str | None:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def pip_command() -> list[str]:
    """A pip to download the wheels with: this Python's, else its base interpreter's (a venv made by `uv sync`
    holds no pip), else python3's on PATH."""
    candidates = (sys.executable, getattr(sys, "_base_executable", None), shutil.which("python3"))
    for python in dict.fromkeys(filter(None, candidates)):
        if subprocess.run([python, "-c", "import pip"], capture_output=True).returncode == 0:
            return [python, "-m", "pip"]
    raise UserError(f"no pip in {sys.executable} or python3; install it (`uv pip install pip`) and run this again")


def prepare(dest: Path, project: Path) -> None:
    """Fill `dest` with the wheels and the compressed data/raw of `project` (where the download stage ran).

    Everything is written to a folder beside `dest` first and moved into place when complete: a failed
    prepare leaves `dest` as it was."""
    raw, record = project / "data" / "raw", project / "provenance" / "download.json"
    if not raw.is_dir() or not record.is_file():
        raise UserError(
            f"{project}: no data/raw with its provenance/download.json; run `mnist-pipeline download`"
            " there first (MNIST_MIRROR=../shared/data/mnist offline)"
        )
    problems = download_record_problems(project)
    if problems:
        raise UserError(f"{project}: {problems[0]}; run `mnist-pipeline download` there again")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / "prepared.json").is_file():
        raise UserError(f"{dest}: holds files this script did not write; give an empty or new folder")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{dest.name}-", dir=dest.parent))
    try:
        fill(staging, raw, record, project)
        carried = sum(p.stat().st_size for p in staging.rglob("*") if p.is_file())
        tree = carried_size() if (ROOT / ".git").exists() else 0
        wheels = len(list((staging / "wheels").glob("*.whl")))
        print(
            f"{dest}: {carried / 2**20:.1f} MiB ({wheels} wheels, data/raw"
            f" {(staging / 'raw.tar.xz').stat().st_size / 2**20:.1f} MiB); with the checkout"
            f" {(carried + tree) / 2**20:.1f} MiB of {CARRY_LIMIT // 2**20} MiB"
        )
        if carried + tree > CARRY_LIMIT:
            raise UserError(
                f"{dest} and the checkout: {(carried + tree) / 2**20:.1f} MiB, over the {CARRY_LIMIT // 2**20}"
                " MiB a device call carries; remove large untracked files from the checkout"
            )
        shutil.rmtree(dest, ignore_errors=True)
        staging.replace(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def fill(folder: Path, raw: Path, record: Path, project: Path) -> None:
    """The wheels, raw.tar.xz and prepared.json, into the empty `folder`."""
    wheels = folder / "wheels"
    wheels.mkdir()
    pins = locked_pins(IMAGE_LACKS)
    (wheels / "requirements.txt").write_text("\n".join(pins) + "\n", encoding="utf-8")
    done = subprocess.run(
        [
            *pip_command(),
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            *WHEEL_TARGET,
            "-d",
            str(wheels),
            *pins,
        ]
    )
    if done.returncode != 0:
        raise UserError(f"pip download of {len(pins)} wheels failed (above); it needs pip and the package index")
    with tarfile.open(folder / "raw.tar.xz", "w:xz") as tar:
        tar.add(raw, "data/raw")
        tar.add(record, "provenance/download.json")
    status = git("status", "--porcelain")
    write_json(
        folder / "prepared.json",
        {
            "prepared": now(),
            "commit": git("rev-parse", "HEAD"),
            "dirty": bool(status) if status is not None else None,
            "raw_from": str(project.resolve()),
            "raw_sha256": sha256(folder / "raw.tar.xz"),
            "wheels": pins,
        },
    )


# --- run (on the device, any python3 with the standard library) ---


@dataclass
class Step:
    name: str
    command: str
    cwd: str
    log: str  # under the work folder; results.tar.xz holds it
    exit_code: int | None = None
    seconds: float | None = None
    note: str | None = None


class Runner:
    """Runs steps into one work folder, records each in the manifest, and bundles the results."""

    def __init__(self, out: Path, smoke: bool):
        self.out, self.smoke, self.started, self.clock = out, smoke, now(), time.monotonic()
        self.work = Path(tempfile.mkdtemp(prefix="device-run-"))
        self.project, self.logs, self.venv = self.work / "project", self.work / "logs", self.work / "venv"
        self.logs.mkdir()
        self.python = self.venv / "bin" / "python"
        self.steps: list[Step] = []
        self.extra: dict[str, Any] = {}
        # as the project's images run: no process holds 75% of the GPU (the accelerator tier's subprocesses)
        self.settings = {"XLA_PYTHON_CLIENT_PREALLOCATE": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "false")}
        self.env = {
            **os.environ,
            **self.settings,
            "PYTHONUNBUFFERED": "1",  # a step stopped at the budget still leaves its log
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
            "PATH": f"{self.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def left(self) -> float:
        return BUDGET_S - (time.monotonic() - self.clock)

    def step(self, name: str, argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> Step:
        """Run one command (its output to logs/NN-name.log); a failure is recorded, never raised."""
        cwd = cwd or self.project
        step = Step(name, shlex.join(argv), str(cwd), f"logs/{len(self.steps) + 1:02d}-{name}.log")
        self.steps.append(step)
        timeout = self.left() - BUNDLE_RESERVE_S
        if timeout <= 5:
            step.note = "not run: the time budget was spent"
        else:
            print(f"[{time.monotonic() - self.clock:6.1f} s] {name}: {step.command}", flush=True)
            started = time.monotonic()
            with open(self.work / step.log, "w", encoding="utf-8") as log:
                try:
                    step.exit_code = subprocess.run(
                        argv,
                        cwd=cwd,
                        env={**self.env, **(env or {})},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        timeout=timeout,
                    ).returncode
                except subprocess.TimeoutExpired:
                    step.note = f"stopped after {timeout:.0f} s: the time budget was spent"
                except OSError as err:
                    step.note = f"could not start: {err}"
            step.seconds = round(time.monotonic() - started, 3)
            if step.exit_code != 0:
                tail = (self.work / step.log).read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
                print(f"  FAILED ({step.exit_code}): {' | '.join(tail)}", flush=True)
        self.save()
        return step

    def here(self, name: str, argv: list[str], cwd: Path | None = None) -> Step:
        """A step run by this script's own helper commands in the run's environment."""
        return self.step(name, [str(self.python), str(Path(__file__).resolve()), *argv], cwd)

    def failed(self) -> list[str]:
        found = [s.name for s in self.steps if s.exit_code != 0]
        if self.extra.get("determinism", {}).get("same") is False:
            found.append("determinism")
        return found

    def save(self, files: dict[str, Any] | None = None) -> None:
        """Write the manifest as it stands (a run cut short still leaves one)."""
        read = lambda name: json.loads((self.work / name).read_text()) if (self.work / name).is_file() else None  # noqa: E731
        environment = read("environment.json") or {}
        failed = self.failed()
        write_json(
            self.out / "manifest.json",
            {
                "what": "GPU run of record (tools/device-run.sh)",
                "smoke": self.smoke,
                "date": self.started[:10],
                "started": self.started,
                "ended": now(),
                "seconds": round(time.monotonic() - self.clock, 1),
                "prepared": read_carried("prepared.json"),
                "settings": self.settings,
                "versions": environment.get("versions"),
                "device": environment.get("device"),
                "params": read("params.json"),
                "raw_record": read("raw-record.json"),
                **self.extra,
                "steps": [asdict(s) for s in self.steps],
                "files": files,
                "failed": failed,
                "ok": not failed and files is not None,
            },
        )

    def setup(self, carry: Path) -> None:
        """The environment: a venv over the image's packages, the carried wheels, the data, the params."""
        self.step(
            "venv",
            [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(self.venv)],
            cwd=self.work,
        )
        site_dir = next((self.venv / "lib").glob("python3*/site-packages"), None)
        if site_dir is not None and sys.prefix != sys.base_prefix:  # python3 is a venv: its packages are "system"
            import site

            (site_dir / "_device_run_parent.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
        if self.python.exists():  # `mnist-pipeline` runs the checkout's code (PYTHONPATH): no install needed
            wrapper = self.venv / "bin" / "mnist-pipeline"
            wrapper.write_text(f'#!/bin/sh\nexec "{self.python}" -m mnist_jax_pipeline.cli "$@"\n', encoding="utf-8")
            wrapper.chmod(0o755)
        pip = [str(self.python), "-c", "import pip"]
        if self.python.exists() and subprocess.run(pip, capture_output=True).returncode != 0:
            self.step("ensurepip", [str(self.python), "-m", "ensurepip", "--default-pip"], cwd=self.work)
        wheels = carry / "wheels"
        self.step(
            "wheels",
            [
                str(self.python),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--no-index",
                "--find-links",
                str(wheels),
                "-r",
                str(wheels / "requirements.txt"),
            ],
            cwd=self.work,
        )
        self.project.mkdir()
        link_checkout(self.project)
        self.step("unpack", ["tar", "-xJf", str(carry / "raw.tar.xz"), "-C", str(self.project)])
        self.here(
            "params",
            [
                "params",
                str(self.project / "params.yaml"),
                str(self.work / "params.json"),
                *(["--smoke"] if self.smoke else []),
            ],
        )
        self.here("raw-record", ["raw-record", str(self.work / "raw-record.json")])
        self.here("environment", ["environment", str(self.work / "environment.json")])

    def pipeline(self) -> None:
        """Every stage by its own command, in the project folder (params.yaml there: records written)."""
        self.step("preprocess", ["mnist-pipeline", "preprocess"])
        for stage in ("train", "evaluate", "profile"):
            for variant in VARIANTS:
                self.step(f"{stage}-{variant}", ["mnist-pipeline", stage, "--variant", variant])
        self.step("report", ["mnist-pipeline", "report"])

    def determinism(self) -> None:
        """`jit` trained again in a second folder, in its own process: the same model bytes?"""
        again = self.work / "again"
        (again / "provenance").mkdir(parents=True)
        link_checkout(again)
        shutil.copy2(self.project / "params.yaml", again)
        if (self.project / "data").is_dir():
            shutil.copytree(self.project / "data", again / "data")
        for name in ("download.json", "preprocess.json"):
            if (self.project / "provenance" / name).is_file():
                shutil.copy2(self.project / "provenance" / name, again / "provenance")
        self.step("determinism-train-jit", ["mnist-pipeline", "train", "--variant", "jit"], cwd=again)
        first, second = (root / "models" / "jit.safetensors" for root in (self.project, again))
        digests = [sha256(p) if p.is_file() else None for p in (first, second)]
        self.extra["determinism"] = {
            "variant": "jit",
            "first_sha256": digests[0],
            "second_sha256": digests[1],
            "same": None if None in digests else digests[0] == digests[1],
        }
        shutil.copy2(second, self.work / "jit-again.safetensors") if second.is_file() else None
        self.save()

    def benchmarks(self) -> None:
        raw = self.project / "data" / "raw"
        idx = raw / "idx"
        real = idx.is_dir() and len(list(idx.glob("*-ubyte.gz"))) == 4
        self.step(
            "bench-command-buffers",
            [
                str(self.python),
                str(ROOT / "benchmarks" / "bench_command_buffers.py"),
                "--json",
                "--output",
                str(self.out / "bench-command-buffers.json"),
                *(("--epochs", "2") if self.smoke else ()),
            ],
        )
        self.step(
            "bench-train",
            [
                str(self.python),
                str(ROOT / "benchmarks" / "bench_train.py"),
                "--json",
                "--output",
                str(self.out / "bench-train.json"),
                *([] if real else ["--synthetic"]),
                *(SMOKE_BENCH_TRAIN if self.smoke else ("--rounds", "3")),
            ],
            cwd=ROOT,
            env={"MNIST_MIRROR": str(idx)} if real else None,
        )
        self.step(
            "bench-time-to-accuracy",
            [
                str(self.python),
                str(ROOT / "benchmarks" / "bench_time_to_accuracy.py"),
                "--raw",
                str(raw),
                "--json",
                "--output",
                str(self.out / "bench-time-to-accuracy.json"),
                *(SMOKE_BENCH_TTA if self.smoke else ()),
            ],
            cwd=ROOT,
        )

    def accelerator(self) -> None:
        junit = self.work / "accelerator.xml"
        self.step(
            "accelerator-tier",
            [
                str(self.python),
                "-m",
                "pytest",
                "-m",
                "accelerator",
                "-n",
                "0",
                "-p",
                "no:cacheprovider",
                f"--junitxml={junit}",
                "tests/test_accelerator.py",
            ],
            cwd=ROOT,
        )
        if junit.is_file():
            root = ElementTree.parse(junit).getroot()
            suite = root if root.tag == "testsuite" else root.find("testsuite")
            if suite is not None:
                counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
                counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
                self.extra["accelerator"] = counts
                self.save()

    def bundle(self) -> dict[str, Any]:
        """The results into at most 8 files under OUT: the manifest, the benchmarks' JSON, three tar.xz."""
        project = self.project
        groups = {
            "results.tar.xz": [
                (self.logs, "logs"),
                (self.work / "accelerator.xml", "accelerator.xml"),
                (self.work / "environment.json", "environment.json"),
                (project / "params.yaml", "params.yaml"),
                (project / "metrics", "metrics"),
                (project / "plots", "plots"),
                (project / "provenance", "provenance"),
                *[(p, f"reports/{p.name}") for p in sorted((project / "reports").glob("*")) if p.name != "profile"],
            ],
            "models.tar.xz": [
                (project / "models", "models"),
                (self.work / "jit-again.safetensors", "determinism/jit-again.safetensors"),
            ],
            "profile.tar.xz": [(project / "reports" / "profile", "reports/profile")],
        }
        for name, members in groups.items():
            with tarfile.open(self.out / name, "w:xz") as tar:
                for path, arcname in members:
                    if path.exists():
                        tar.add(path, arcname)
        files = {}
        for name in OUT_FILES:
            path = self.out / name
            if path.is_file():
                size = path.stat().st_size
                files[name] = {
                    "bytes": size,
                    "sha256": sha256(path) if name != "manifest.json" else None,
                    **({"over_limit": True} if size > OUT_FILE_LIMIT else {}),
                }
        return files


def link_checkout(folder: Path) -> None:
    """The checkout's code and lock export under `folder`, as in a checkout: the stages' records name them
    as a run in the checkout does, so the carried download record stays current."""
    for name in ("src", "requirements"):
        (folder / name).symlink_to(ROOT / name)


def read_carried(name: str) -> Any:
    path = carry_dir() / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


PARTS = ("pipeline", "determinism", "benchmarks", "accelerator")  # in the order they run


def run(out: Path, smoke: bool, keep: bool, only: tuple[str, ...] = PARTS) -> int:
    carry = carry_dir()
    for needed in (carry / "wheels" / "requirements.txt", carry / "raw.tar.xz"):
        if not needed.is_file():
            raise UserError(f"{needed}: missing; run tools/device-prepare.sh here and carry .device")
    out.mkdir(parents=True, exist_ok=True)
    stray = [p.name for p in out.iterdir() if p.name not in OUT_FILES]
    if stray:
        raise UserError(f"{out}: holds other files ({', '.join(stray[:3])}); give an empty folder")
    runner = Runner(out, smoke)
    runner.extra["parts"] = list(only)
    runner.setup(carry)
    for part in PARTS:
        if part in only:
            getattr(runner, part)()
    files = runner.bundle()
    runner.save(files)
    failed = runner.failed()
    print(
        f"{out}/manifest.json: {len(runner.steps)} steps in {time.monotonic() - runner.clock:.0f} s;"
        f" {'failed: ' + ', '.join(failed) if failed else 'all passed'}; determinism:"
        f" {runner.extra.get('determinism', {}).get('same')}",
        flush=True,
    )
    if keep:
        print(f"work folder kept: {runner.work}")
    else:
        shutil.rmtree(runner.work, ignore_errors=True)
    return 1 if failed else 0


# --- helpers run inside the run's environment (they import the project and its dependencies) ---


def write_params(target: Path, summary: Path, smoke: bool) -> None:
    """The checkout's params.yaml with every variant (and --smoke's tiny settings), at the project root."""
    import yaml

    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw["variants"] = list(VARIANTS)
    for section, values in (SMOKE_PARAMS if smoke else {}).items():
        raw[section].update(values)
    text = yaml.safe_dump(raw, sort_keys=False)
    target.write_text(text, encoding="utf-8")
    from mnist_jax_pipeline.config.params import load

    load(str(target))  # checked as every stage checks it
    write_json(
        summary,
        {
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "variants": raw["variants"],
            "changed": {"variants": raw["variants"], **(SMOKE_PARAMS if smoke else {})},
        },
    )
    print(text)


def raw_record(out: Path) -> None:
    """Check the carried download record against this checkout's code; where it is not current (the code
    changed after tools/device-prepare.sh), record the carried data/raw again, and say so."""
    from mnist_jax_pipeline.config.params import load
    from mnist_jax_pipeline.orchestration import freshness, stage_table

    checker = freshness.Checker(load("params.yaml"))
    job = freshness.Job(stage_table.get("download"))
    problems = checker.problems(job)
    if problems:
        checker.record(job, checker.inputs(job))
    verdict = {"status": "re-recorded on the device" if problems else "current", "problems": problems}
    write_json(out, verdict)
    print(json.dumps(verdict))


def environment(out: Path) -> None:
    """Versions and device: python, jax, jaxlib, numpy, the CUDA plugin; jax.devices(), nvidia-smi, the CPU."""
    from importlib import metadata

    from mnist_jax_pipeline.foundation.numerics import numerics, set_numerics
    from mnist_jax_pipeline.foundation.runtime import cpu_model, package_version

    set_numerics()
    import jax

    plugins = {
        d.metadata["Name"]: d.version
        for d in metadata.distributions()
        if re.match(r"(jax[-_]cuda|jax[-_]rocm|libtpu|nvidia[-_]cuda[-_]runtime)", d.metadata["Name"] or "")
    }
    versions = {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": package_version("jaxlib"),
        "numpy": package_version("numpy"),
        "plugins": plugins,
        **{name: package_version(name) for name in ("optax", "safetensors", "pydantic", "ml-dtypes", "scipy")},
    }
    device: dict[str, Any] = {"cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "platform": platform.platform()}
    try:
        devices = jax.devices()
        device |= {
            "backend": jax.default_backend(),
            "jax_devices": [str(d) for d in devices],
            "device_kind": devices[0].device_kind,
            "device_count": len(devices),
        }
    except RuntimeError as err:
        device["jax_error"] = str(err)
    smi = shutil.which("nvidia-smi")
    if smi:
        done = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        device["nvidia_smi"] = done.stdout.strip().splitlines() if done.returncode == 0 else None
    write_json(out, {"versions": versions, "device": device | numerics()})
    print(json.dumps({"versions": versions, "device": device}, indent=2))


def parts(text: str) -> tuple[str, ...]:
    """--only's value: known parts, in the order they run (determinism needs the pipeline's outputs)."""
    named = {name.strip() for name in text.split(",") if name.strip()}
    unknown = sorted(named - set(PARTS))
    if unknown or not named:
        raise argparse.ArgumentTypeError(f"{','.join(unknown) or text!r}: not a part; give some of {','.join(PARTS)}")
    if "determinism" in named and "pipeline" not in named:
        raise argparse.ArgumentTypeError("determinism trains jit again beside the pipeline's run: add pipeline")
    return tuple(name for name in PARTS if name in named)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="fill .device/ here (tools/device-prepare.sh)")
    p.add_argument("--dest", type=Path, default=None, help="the folder to fill (default: .device)")
    p.add_argument(
        "--from",
        dest="project",
        type=Path,
        default=ROOT,
        help="a folder where the download stage ran: its data/raw and provenance/download.json",
    )
    p = sub.add_parser("run", help="the run on the device (tools/device-run.sh)")
    p.add_argument("out", type=Path)
    p.add_argument("--smoke", action="store_true", help="tiny settings: checks the script, measures nothing")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument(
        "--only",
        type=parts,
        default=PARTS,
        help=f"comma-separated parts to run after the set-up (default: all of {','.join(PARTS)})",
    )
    p = sub.add_parser("params")
    p.add_argument("target", type=Path)
    p.add_argument("summary", type=Path)
    p.add_argument("--smoke", action="store_true")
    for name in ("raw-record", "environment"):
        sub.add_parser(name).add_argument("out", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "prepare":
            prepare(args.dest or carry_dir(), args.project)
        elif args.command == "run":
            return run(args.out.resolve(), args.smoke, args.keep, args.only)
        elif args.command == "params":
            write_params(args.target, args.summary, args.smoke)
        elif args.command == "raw-record":
            raw_record(args.out)
        else:
            environment(args.out)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
