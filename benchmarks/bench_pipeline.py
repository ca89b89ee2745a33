"""Pipeline-level figures: each stage's wall time and peak RSS, the whole run, and no-op overhead.

    MNIST_MIRROR=../shared/data/mnist python benchmarks/bench_pipeline.py [--json] [--output FILE]
    # CI smoke run: a tiny data/raw instead of the download, tiny params, one no-op run each
    python benchmarks/bench_pipeline.py --raw RAW_DIR --params tiny.yaml --repeats 1 --json

In a fresh copy of the repository (default params: the full tutorial run, nojit included) it
1. runs every stage command in DAG order, alone, recording wall seconds and peak RSS (wait4);
2. times `snakemake --cores all` from scratch in a second fresh copy (the whole pipeline);
3. times no-op runs side by side: `snakemake --cores all` and `dvc repro` on the finished
   pipeline against the same tools on a bare 5-rule workflow (median of --repeats runs each).
With --raw, each copy starts from that folder (the download stage's output) as data/raw, recorded
as the download stage's work, and the download stage is neither run nor timed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from mnist_jax_pipeline.artefacts.storage import write_json

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def environment(ws: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ws / "src"),
            "MNIST_PIPELINE_LOCK": str(ws / ".bench.lock")}


def run(ws: Path, *args: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ws, env=environment(ws), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed in {ws}:\n{(done.stdout + done.stderr)[-2000:]}")
    return seconds


def measured(ws: Path, command: str) -> tuple[float, int]:
    """Wall seconds and peak RSS bytes of one command (Linux: ru_maxrss in KiB)."""
    with tempfile.TemporaryFile() as errors:  # a file, not a pipe: a full pipe would stop the command
        start = time.perf_counter()
        proc = subprocess.Popen(command, shell=True, cwd=ws, env=environment(ws),
                                stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        if proc.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{command} failed: {errors.read().decode(errors='replace')[-2000:]}")
    return seconds, usage.ru_maxrss * 1024


def fresh_copy(parent: Path, name: str, params: Path | None = None, raw: Path | None = None) -> Path:
    """The repository's tracked and unignored files as a repository of their own, with `params` as its
    params.yaml and `raw` as its data/raw (recorded as the download stage's work), when given."""
    from checkout_copy import copy_checkout  # beside this script, shared with tests/workspace.py

    ws = copy_checkout(parent / name, ROOT)
    if params is not None:
        shutil.copyfile(params, ws / "params.yaml")
    commit = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "bench"]
    for args in (["git", "init", "-q"], ["git", "add", "-A"], commit):
        subprocess.run(args, cwd=ws, check=True, capture_output=True)
    if raw is not None:
        shutil.copytree(raw, ws / "data" / "raw")
        run(ws, sys.executable, "-c", RECORD_DOWNLOAD)
    return ws


# The download stage's provenance record for the data/raw that lies there, as the stage itself writes
# it, so that the stages after it accept that folder as its work (run in the copy, with its code).
RECORD_DOWNLOAD = """
from mnist_jax_pipeline import freshness, stages
from mnist_jax_pipeline.config import load
checker = freshness.Checker(load("params.yaml"))
job = freshness.Job(stages.get("download"))
checker.record(job, checker.inputs(job))
"""


def stage_commands(ws: Path, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(stage name, command) in DAG order, read from dvc.yaml with the params' variants; `skip`: stages left out."""
    variants = yaml.safe_load((ws / "params.yaml").read_text())["variants"]
    stages = yaml.safe_load((ws / "dvc.yaml").read_text())["stages"]
    ordered = []
    for name, stage in stages.items():
        if name in skip:
            continue
        if "foreach" in stage:
            ordered += [(f"{name}@{v}", stage["do"]["cmd"].replace("${item}", v)) for v in variants]
        else:
            ordered.append((name, stage["cmd"]))
    return ordered


def bare_workflows(parent: Path) -> Path:
    """A trivial 5-rule chain for Snakemake and the same 5 stages for DVC, already run."""
    ws = parent / "bare"
    ws.mkdir()
    names = [f"s{i}" for i in range(5)]
    rules, stages = [], {}
    for i, name in enumerate(names):
        dep = f"{names[i - 1]}.txt" if i else "input.txt"
        rules.append(f'rule {name}:\n    input: "{dep}"\n    output: "{name}.txt"\n'
                     f'    shell: "cat {{input}} > {{output}}"\n')
        stages[name] = {"cmd": f"cat {dep} > {name}.txt", "deps": [dep], "outs": [f"{name}.txt"]}
    (ws / "input.txt").write_text("x\n")
    (ws / "Snakefile").write_text(f'rule all:\n    input: "{names[-1]}.txt"\n\n' + "\n".join(rules))
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    run(ws, "dvc", "init", "-q")
    (ws / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    run(ws, "dvc", "repro")
    run(ws, "snakemake", "--cores", "all")
    return ws


def median_time(ws: Path, repeats: int, *args: str) -> float:
    run(ws, *args)  # warm the file cache and Python's bytecode
    return statistics.median(run(ws, *args) for _ in range(repeats))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--repeats", type=int, default=5, help="no-op runs per median (default: 5)")
    parser.add_argument("--params", type=Path, help="the copies' params.yaml (default: the repository's)")
    parser.add_argument("--raw", type=Path, help="a data/raw folder (the download stage's output) to start from:"
                                                 " the download stage is then not run (default: download it)")
    args = parser.parse_args()
    if args.raw is None and not os.environ.get("MNIST_MIRROR"):
        raise SystemExit("set MNIST_MIRROR to the folder with the four MNIST .gz files, or give --raw")
    for given in filter(None, (args.params, args.raw)):
        if not given.exists():
            raise SystemExit(f"{given}: not found")
    parent = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))

    staged = fresh_copy(parent, "stages", args.params, args.raw)
    stages = {}
    for name, command in stage_commands(staged, skip=("download",) if args.raw else ()):
        seconds, rss = measured(staged, command)
        stages[name] = {"seconds": round(seconds, 3), "peak_rss_bytes": rss}
        print(f"{name:<16} {seconds:8.2f} s  peak RSS {rss / 2**20:7.1f} MiB", file=sys.stderr)

    whole = fresh_copy(parent, "whole", args.params, args.raw)
    whole_seconds = run(whole, "snakemake", "--cores", "all")
    print(f"snakemake --cores all from scratch: {whole_seconds:.1f} s", file=sys.stderr)
    run(whole, "dvc", "status")  # dvc.lock was written by the workflow's dvc commit

    bare = bare_workflows(parent)
    noop = {
        "snakemake_pipeline": median_time(whole, args.repeats, "snakemake", "--cores", "all"),
        "snakemake_bare_5_rules": median_time(bare, args.repeats, "snakemake", "--cores", "all"),
        "dvc_pipeline": median_time(whole, args.repeats, "dvc", "repro"),
        "dvc_bare_5_stages": median_time(bare, args.repeats, "dvc", "repro"),
    }
    result: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host_cpu_count": os.cpu_count(),
        "data": f"{args.raw} as data/raw (download not run)" if args.raw else "downloaded from MNIST_MIRROR",
        "params_file": str(args.params or "params.yaml"),
        "stages": stages,
        "max_stage_peak_rss_bytes": max(s["peak_rss_bytes"] for s in stages.values()),
        "pipeline_seconds_snakemake_from_scratch": round(whole_seconds, 2),
        "noop_seconds": {k: round(v, 3) for k, v in noop.items()},
        "noop_ratio_snakemake": round(noop["snakemake_pipeline"] / noop["snakemake_bare_5_rules"], 3),
        "noop_ratio_dvc": round(noop["dvc_pipeline"] / noop["dvc_bare_5_stages"], 3),
    }
    if args.output:
        write_json(args.output, result)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key in ("pipeline_seconds_snakemake_from_scratch", "noop_seconds", "noop_ratio_snakemake",
                    "noop_ratio_dvc", "max_stage_peak_rss_bytes"):
            print(f"{key}: {result[key]}")
    shutil.rmtree(parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
