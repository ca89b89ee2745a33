"""The run of record on a machine with a GPU: every stage by its own command, jit trained twice, the benchmarks.

Each step's command, exit code and seconds go to OUT/manifest.json as it ends (USAGE says what runs). This
file needs only the standard library; the steps run in a venv over the machine's Python.
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
import signal
import site
import subprocess
import sys
import tarfile
import tempfile
import time
import venv
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("nojit", "jit", "jit_scan")
BUNDLE_RESERVE_S = 15  # of a time budget: kept for writing results.tar.gz
PARAMS = {"variants": f"[{', '.join(VARIANTS)}]"}  # params.yaml's lines changed for the run
SMOKE_PARAMS = {  # --smoke: a tiny MLP for one short epoch, so the run takes minutes on a CPU
    "layer_sizes": "[784, 32, 10]",
    "epochs": "1",
    "batch_size": "64",
    "top_allocations": "5",
    "trace_steps": "2",
}
VERSIONS = re.compile(r"jax.*|libtpu.*|nvidia-cuda-runtime.*|numpy|scipy|ml-dtypes|optax|safetensors")
BENCHMARKS = {"bench_command_buffers.py": [], "bench_train.py": ["--rounds", "3"], "bench_time_to_accuracy.py": []}
SMOKE_BENCHMARKS = {  # --smoke: a few hundred examples, one round, one seed
    "bench_command_buffers.py": ["--epochs", "2"],
    "bench_train.py": ["--examples", "512", "--rounds", "1", "--repeats", "3"],
    "bench_time_to_accuracy.py": ["--examples", "512", "--seeds", "0", "--set", "train.epochs=1", "--target", "0"],
}
USAGE = """For a machine with no network, a bundle, made where the download stage ran (FREEZE: that machine's
`pip freeze`; the bundle's wheels are what it lacks of the packages the run imports):
  tools/device-prepare.sh BUNDLE --python-version X.Y --platform TAG --installed FREEZE
On the machine with the GPU, in a copy of the checkout, with its python3 or $PYTHON (whose pip installs the wheels):
  tools/device-run.sh OUT [--bundle BUNDLE] [--budget SECONDS] [--accelerator]
Without a bundle, that Python needs the project's packages and `download` the network or MNIST_MIRROR.
The steps, in order: the bundle's wheels into a venv; download (without a bundle),
preprocess, train, evaluate and profile of nojit, jit and jit_scan, report; train --variant jit again;
bench_command_buffers, bench_train --rounds 3, bench_time_to_accuracy; with --accelerator, pytest -m
accelerator. On an NVIDIA H200 the set-up took 4 s, the stages 186 s (train nojit 130 s), jit again 9 s,
the benchmarks 116 s, the accelerator tier 146 s.
Then, here: python tools/device-import.py OUT  (its JSON into benchmarks/results/)"""


class UserError(Exception):
    """A one-line error the user can act on."""


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (--help says more)\n")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def link_checkout(folder: Path) -> None:
    """The checkout's code and lock export in `folder`: the stages' records name them as in the checkout."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("src", "requirements"):
        (folder / name).symlink_to(ROOT / name)


def write_params(target: Path, smoke: bool) -> None:
    """The checkout's params.yaml with every variant (and --smoke's tiny settings): each key's line changed."""
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    for key, value in (PARAMS | (SMOKE_PARAMS if smoke else {})).items():
        text, found = re.subn(rf"^([ \t]*{key}:) [^#\n]*?( *#|$)", rf"\1 {value}\2", text, flags=re.MULTILINE)
        if found != 1:
            raise UserError(f"params.yaml: {found} lines set {key}, not 1; change device_run.py's PARAMS with it")
    target.write_text(text, encoding="utf-8")


def versions() -> dict[str, str]:
    """Python's version and those of the machine's packages the numerics depend on (the bundle's: bundle.json)."""
    found = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version for d in metadata.distributions()}
    return {"python": platform.python_version(), **{n: v for n, v in sorted(found.items()) if VERSIONS.fullmatch(n)}}


def gpus() -> list[str] | None:
    """nvidia-smi's line per GPU (name, driver, memory), None where there is no nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    query = [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
    return subprocess.run(query, capture_output=True, text=True).stdout.splitlines()


@dataclass
class Step:
    name: str
    command: str
    cwd: str
    log: str
    exit_code: int | None = None
    seconds: float | None = None
    note: str | None = None


class RunOfRecord:
    """The run's steps in a work folder, each recorded in OUT/manifest.json as it ends."""

    def __init__(self, out: Path, bundle: Path | None = None, smoke: bool = False, budget: float | None = None):
        self.out, self.bundle, self.smoke, self.budget = out, bundle, smoke, budget
        self.clock, started = time.monotonic(), now()
        self.steps: list[Step] = []
        self.work = Path(tempfile.mkdtemp(prefix="device-run-"))
        (self.work / "logs").mkdir()
        self.project, self.python = self.work / "project", str(self.work / "venv" / "bin" / "python")
        self.cli = [self.python, "-m", "mnist_jax_pipeline.cli"]  # the checkout's code (PYTHONPATH)
        settings = {"XLA_PYTHON_CLIENT_PREALLOCATE": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "false")}
        self.env = {
            **os.environ,
            **settings,  # no process holds most of the GPU's memory (the accelerator tier starts several)
            "PYTHONUNBUFFERED": "1",  # a step stopped at the budget still leaves its log
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
        }
        self.about: dict[str, Any] = {"what": "run of record (tools/device-run.sh)", "smoke": smoke}
        self.about |= {"date": started[:10], "started": started, "budget_seconds": budget, "settings": settings}
        self.about["bundle"] = read_json(bundle / "bundle.json") if bundle else None
        self.about["versions"], self.gpus = versions(), gpus()

    def step(self, name: str, argv: list[str], cwd: Path, env: dict[str, str] | None = None, needs: str = "") -> Step:
        """Run one command, its output to logs/NN-name.log; a failure is recorded, never raised. A command still
        running when the budget is spent is stopped, with its children; one that `needs` a failed step is not run."""
        step = Step(name, shlex.join(argv), str(cwd), f"logs/{len(self.steps) + 1:02d}-{name}.log")
        self.steps.append(step)
        left = None if self.budget is None else self.budget - BUNDLE_RESERVE_S - (time.monotonic() - self.clock)
        if needs in self.failed():
            step.note = f"not run: {needs} failed"
        elif left is not None and left < 1:
            step.note = "not run: the time budget was spent"
        else:
            print(f"[{time.monotonic() - self.clock:6.1f} s] {name}: {step.command}", flush=True)
            started = time.monotonic()
            with open(self.work / step.log, "w", encoding="utf-8") as log:
                process: subprocess.Popen[bytes] | None = None
                try:
                    process = subprocess.Popen(
                        argv, cwd=cwd, env={**self.env, **(env or {})}, stdout=log, stderr=log, start_new_session=True
                    )
                    step.exit_code = process.wait(timeout=left)
                except OSError as err:
                    step.note = f"could not start: {err}"
                except subprocess.TimeoutExpired:
                    assert process is not None  # only a started process times out
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    step.note = f"stopped after {left:.0f} s: the time budget was spent"
                except KeyboardInterrupt:  # its own session: the stop did not reach it
                    if process is not None:
                        os.killpg(process.pid, signal.SIGKILL)
                        process.wait()
                    step.note = "stopped: the run was stopped"
                    raise
            step.seconds = round(time.monotonic() - started, 3)
            if step.exit_code != 0:
                print(f"  failed ({step.exit_code}): {step.note or step.log + ' in results.tar.gz'}", flush=True)
        self.save()
        return step

    def failed(self) -> list[str]:
        found = [step.name for step in self.steps if step.exit_code != 0]
        return found + (["determinism"] if self.about.get("determinism", {}).get("same") is False else [])

    def save(self) -> None:
        """Write the manifest as it stands (a run cut short still leaves one)."""
        recorded = read_json(self.project / "metrics" / "train" / "jit.run.json") or {}  # by the train stage
        manifest = {**self.about, "device": {"nvidia_smi": self.gpus, **recorded}, "ended": now()}
        manifest |= {"seconds": round(time.monotonic() - self.clock, 1), "steps": [asdict(s) for s in self.steps]}
        manifest |= {"failed": self.failed(), "ok": not self.failed()}
        (self.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")

    def setup(self) -> None:
        """A venv over this Python's packages (the bundle's wheels added), params.yaml, the bundle's data."""
        venv.create(self.work / "venv", system_site_packages=True, symlinks=True)
        site_dir = next((self.work / "venv" / "lib").glob("python3*/site-packages"))
        if sys.prefix != sys.base_prefix:  # this Python is a venv itself: its packages count too
            (site_dir / "_device_run_parent.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
        link_checkout(self.project)
        write_params(self.project / "params.yaml", self.smoke)
        if self.bundle is not None:
            self.install(self.bundle / "wheels")
            shutil.copytree(self.bundle / "data", self.project / "data")
            shutil.copytree(self.bundle / "provenance", self.project / "provenance")

    def install(self, wheels: Path) -> None:
        """The bundle's wheels into the venv, with the pip of the machine's Python."""
        if not (wheels / "requirements.txt").read_text(encoding="utf-8").strip():
            return
        pip = [self.python, "-m", "pip", "install", "--no-input", "--no-index", "--find-links", str(wheels)]
        self.step("wheels", [*pip, "-r", str(wheels / "requirements.txt")], self.work)

    def stages(self) -> None:
        """Every stage by its own command, in the project folder."""
        if self.bundle is None:
            self.step("download", [*self.cli, "download"], self.project)
        self.step("preprocess", [*self.cli, "preprocess"], self.project, needs="download")
        for stage in ("train", "evaluate", "profile"):
            for variant in VARIANTS:
                needs = "preprocess" if stage == "train" else f"train-{variant}"
                self.step(f"{stage}-{variant}", [*self.cli, stage, "--variant", variant], self.project, needs=needs)
        self.step("report", [*self.cli, "report"], self.project, needs="preprocess")

    def determinism(self) -> None:
        """`jit` trained again in a second folder, in its own process: the same model bytes?"""
        again = self.work / "again"
        link_checkout(again)
        for name in ("params.yaml", "data", "provenance"):
            if (self.project / name).is_dir():
                shutil.copytree(self.project / name, again / name)
            elif (self.project / name).is_file():
                shutil.copy2(self.project / name, again)
        self.step("determinism-train-jit", [*self.cli, "train", "--variant", "jit"], again, needs="preprocess")
        first, second = (sha256(folder / "models" / "jit.safetensors") for folder in (self.project, again))
        same = None if None in (first, second) else first == second
        self.about["determinism"] = {"variant": "jit", "first_sha256": first, "second_sha256": second, "same": same}
        self.save()

    def benchmarks(self) -> None:
        """Each benchmark on the project's data (bench_train on MNIST's IDX files where they are there)."""
        raw = self.project / "data" / "raw"
        real = len(list((raw / "idx").glob("*-ubyte.gz"))) == 4
        data = {"bench_train.py": [] if real else ["--synthetic"], "bench_time_to_accuracy.py": ["--raw", str(raw)]}
        for script, record in BENCHMARKS.items():
            name = "bench-" + script.removeprefix("bench_").removesuffix(".py").replace("_", "-")
            args = [*data.get(script, []), *(SMOKE_BENCHMARKS[script] if self.smoke else record), "--json", "--output"]
            argv = [self.python, str(ROOT / "benchmarks" / script), *args, str(self.out / f"{name}.json")]
            needs = "download" if "--raw" in data.get(script, []) else ""  # bench_train falls back to synthetic data
            self.step(name, argv, self.project, {"MNIST_MIRROR": str(raw / "idx")} if real else None, needs)

    def accelerator(self) -> None:
        """The accelerator test tier (its log lists every test's outcome)."""
        pytest = [self.python, "-m", "pytest", "-m", "accelerator", "-n", "0", "-p", "no:cacheprovider", "-rA"]
        self.step("accelerator-tier", [*pytest, "tests/test_accelerator.py"], ROOT)

    def bundle_results(self) -> None:
        """The steps' logs, the stages' outputs and the second jit model into OUT/results.tar.gz."""
        names = ("params.yaml", "metrics", "plots", "provenance", "reports", "models")
        members = [(self.work / "logs", "logs"), *((self.project / name, name) for name in names)]
        members += [(self.work / "again" / "models" / "jit.safetensors", "determinism/jit-again.safetensors")]
        with tarfile.open(self.out / "results.tar.gz", "w:gz") as tar:
            for path, name in members:
                if path.exists():
                    tar.add(path, name)


def run(out: Path, bundle: Path | None, smoke: bool, budget: float | None, accelerator: bool) -> int:
    """Every part in order, then the results bundled; 1 where a step failed."""
    if bundle is not None and not (bundle / "bundle.json").is_file():
        raise UserError(f"{bundle}: not a bundle (no bundle.json); make one with tools/device-prepare.sh")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out}: not an empty folder; give an empty or new folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"{out}: cannot make it ({err.strerror}); give an empty or new folder") from err
    stops = (signal.SIGTERM, signal.SIGHUP)  # a stop unwinds as Ctrl-C does: the running step goes too
    previous = {stop: signal.signal(stop, signal.default_int_handler) for stop in stops}
    record = RunOfRecord(out, bundle, smoke, budget)
    try:
        for part in (record.setup, record.stages, record.determinism, record.benchmarks):
            part()
        if accelerator:
            record.accelerator()
        record.bundle_results()
    finally:
        record.save()
        shutil.rmtree(record.work, ignore_errors=True)
        for stop, handler in previous.items():
            signal.signal(stop, handler)
    failed = record.failed()
    print(f"{out / 'manifest.json'}: {len(record.steps)} steps; failed: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="tools/device-run.sh", description=USAGE, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("out", type=Path, metavar="OUT", help="an empty or new folder for the manifest and the results")
    parser.add_argument("--bundle", type=Path, help="an offline bundle (tools/device-prepare.sh): its wheels and data")
    parser.add_argument("--budget", type=float, metavar="SECONDS", help="the most the run may take (default: no limit)")
    parser.add_argument("--accelerator", action="store_true", help="run the accelerator test tier, last")
    parser.add_argument("--smoke", action="store_true", help="tiny settings: checks the run anywhere, measures nothing")
    args = parser.parse_args(argv)
    if args.budget is not None and not 0 < args.budget < float("inf"):
        parser.error(f"--budget {args.budget}: give the seconds the run may take, above 0")
    try:
        bundle = args.bundle.resolve() if args.bundle else None
        return run(args.out.resolve(), bundle, args.smoke, args.budget, args.accelerator)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"error: stopped; {args.out / 'manifest.json'} says how far the run got", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
