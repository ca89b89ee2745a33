"""Pipeline-level figures: what orchestration and the checks cost beside the stages' own work.

    MNIST_MIRROR=../shared/data/mnist python benchmarks/bench_pipeline.py [--json] [--output FILE]
    # CI smoke run: a tiny data/raw instead of the download, tiny params, one no-op run each
    python benchmarks/bench_pipeline.py --raw RAW_DIR --params tiny.yaml --repeats 1 --json

In fresh copies of the repository (default params: the full tutorial run, nojit included) it
1. runs the whole pipeline from scratch under each tool (`snakemake --cores all`, `dvc repro`), then
   again after one parameter change (`train.step_size`), and reports for each run its wall time,
   the sum of the stages' own work (each provenance record's run: its end less its start less its
   checks), the difference (orchestration, process start-up and checks), the checks' sum and the
   largest `checks_s` against its stage's wall time;
2. times no-op runs side by side, wall and CPU (user + system of the tool and its children):
   `snakemake --cores all` and `dvc repro` on the finished pipeline against a one-rule Snakefile
   and a one-stage dvc.yaml (median of --repeats runs each);
3. with --each-stage, also runs every stage command alone in DAG order, with its peak RSS (wait4).
With --raw, each copy starts from that folder (the download stage's output) as data/raw, recorded
as the download stage's work, and the download stage is neither run nor timed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
from mnist_jax_pipeline.foundation.runtime import cpu_model

# the docstring's first line, kept where python -OO drops docstrings
DESCRIPTION = "Pipeline-level figures: what orchestration and the checks cost beside the stages' own work."
ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def environment(ws: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ws / "src"),
        "MNIST_PIPELINE_LOCK": str(ws / ".bench.lock"),
    }


def run(ws: Path, *args: str) -> float:
    return timed(ws, *args)[0]


def timed(ws: Path, *args: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system of the command and everything it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ws, env=environment(ws), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed in {ws}:\n{(done.stdout + done.stderr)[-2000:]}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def accounted(ws: Path, wall: float, since: float) -> dict[str, Any]:
    """A run's wall time against the work of the jobs it ran (the records written after `since`)."""
    jobs = {}
    for path in sorted((ws / "provenance").glob("*.json")):
        record = json.loads(path.read_text())
        run_info = record.get("run")
        if not run_info or _seconds(run_info["started"]) < since or run_info["tool"] == "mnist-pipeline":
            continue
        span = _seconds(run_info["ended"]) - _seconds(run_info["started"])
        jobs[record["stage"]] = {
            "span_s": round(span, 3),
            "checks_s": run_info["checks_s"],
            "work_s": round(span - run_info["checks_s"], 3),
            "tool": run_info["tool"],
        }
    work = sum(job["work_s"] for job in jobs.values())
    checks = sum(job["checks_s"] for job in jobs.values())
    worst = max(jobs, key=lambda name: jobs[name]["checks_s"] / max(jobs[name]["span_s"], 1e-9), default=None)
    return {
        "wall_s": round(wall, 2),
        "jobs": len(jobs),
        "stages_work_s": round(work, 2),
        "orchestration_startup_and_checks_s": round(wall - work, 2),
        "checks_s": round(checks, 3),
        "max_checks_s": max((job["checks_s"] for job in jobs.values()), default=0.0),
        "largest_checks_share": {"job": worst, **jobs[worst]} if worst else None,
        "per_job": jobs,
    }


def set_step_size(ws: Path, value: float) -> None:
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["train"]["step_size"] = value
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def whole_runs(parent: Path, tool: str, args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """The pipeline from scratch under one tool, then after a change of train.step_size."""
    command = ["snakemake", "--cores", "all"] if tool == "snakemake" else ["dvc", "repro"]
    ws = fresh_copy(parent, tool, args.params, args.raw)
    found = {}
    for label in ("from_scratch", "after_train_step_size_change"):
        if label != "from_scratch":
            step = yaml.safe_load((ws / "params.yaml").read_text())["train"]["step_size"]
            set_step_size(ws, round(step * 2, 6))
        since = time.time()
        wall = run(ws, *command)
        found[label] = accounted(ws, wall, since - 1)
        print(
            f"{tool} {label}: {wall:.1f} s wall, stages' own work {found[label]['stages_work_s']:.1f} s,"
            f" the rest {found[label]['orchestration_startup_and_checks_s']:.1f} s (checks"
            f" {found[label]['checks_s']:.2f} s over {found[label]['jobs']} jobs)",
            file=sys.stderr,
        )
    return ws, found


def measured(ws: Path, command: str) -> tuple[float, int]:
    """Wall seconds and peak RSS bytes of one command (Linux: ru_maxrss in KiB)."""
    with tempfile.TemporaryFile() as errors:  # a file, not a pipe: a full pipe would stop the command
        start = time.perf_counter()
        proc = subprocess.Popen(
            command, shell=True, cwd=ws, env=environment(ws), stdout=subprocess.DEVNULL, stderr=errors
        )
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
        run(ws, "dvc", "commit", "--force", "--quiet", "download")  # for DVC too: the download stage's work
    return ws


# The download stage's provenance record for the data/raw that lies there, as the stage itself writes
# it, so that the stages after it accept that folder as its work (run in the copy, with its code).
RECORD_DOWNLOAD = """
from mnist_jax_pipeline.artefacts.provenance import Execution
from mnist_jax_pipeline.orchestration import freshness, run, stage_table
from mnist_jax_pipeline.orchestration.jobs import Job
from mnist_jax_pipeline.config.params import load

checker = freshness.Checker(load("params.yaml"))
job = Job(stage_table.get("download"))
made = Execution(tool="mnist-pipeline", started=run.now(), ended=run.now(), checks_s=0)
checker.write(job, checker.inputs(job), made)
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
    """A one-rule Snakefile and a one-stage dvc.yaml, already run: what either tool costs by itself, with the
    project's Snakemake profile (its settings and console), as the pipeline runs."""
    ws = parent / "bare"
    ws.mkdir()
    shutil.copytree(ROOT / "profiles", ws / "profiles")
    (ws / "input.txt").write_text("x\n")
    (ws / "Snakefile").write_text(
        'rule copy:\n    input: "input.txt"\n    output: "copy.txt"\n    shell: "cat {input} > {output}"\n'
    )
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    run(ws, "dvc", "init", "-q")
    stages = {"copy": {"cmd": "cat input.txt > copy.txt", "deps": ["input.txt"], "outs": ["copy.txt"]}}
    (ws / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    run(ws, "dvc", "repro")
    run(ws, "snakemake", "--cores", "all")
    return ws


def median_time(ws: Path, repeats: int, *args: str) -> dict[str, float]:
    """Median wall and CPU seconds of `repeats` runs, after one that warms the file cache."""
    run(ws, *args)
    runs = [timed(ws, *args) for _ in range(repeats)]
    return {
        "wall_s": round(statistics.median(r[0] for r in runs), 3),
        "cpu_s": round(statistics.median(r[1] for r in runs), 3),
    }


def extra_cpu(noop: dict[str, dict[str, float]], pipeline: str, bare: str) -> float:
    return round(noop[pipeline]["cpu_s"] - noop[bare]["cpu_s"], 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--repeats", type=int, default=5, help="no-op runs per median (default: 5)")
    parser.add_argument("--params", type=Path, help="the copies' params.yaml (default: the repository's)")
    parser.add_argument("--each-stage", action="store_true", help="also run every stage alone, with its peak RSS")
    parser.add_argument(
        "--raw",
        type=Path,
        help="a data/raw folder (the download stage's output) to start from:"
        " the download stage is then not run (default: download it)",
    )
    args = parser.parse_args()
    from options import refuse_foreign  # beside this script

    refuse_foreign(args.output, '"noop_ratio_snakemake"')
    if args.raw is None and not os.environ.get("MNIST_MIRROR"):
        raise SystemExit("set MNIST_MIRROR to the folder with the four MNIST .gz files, or give --raw")
    for given in filter(None, (args.params, args.raw)):
        if not given.exists():
            raise SystemExit(f"{given}: not found")
    parent = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))

    stages = {}
    if args.each_stage:
        staged = fresh_copy(parent, "stages", args.params, args.raw)
        for name, command in stage_commands(staged, skip=("download",) if args.raw else ()):
            seconds, rss = measured(staged, command)
            stages[name] = {"seconds": round(seconds, 3), "peak_rss_bytes": rss}
            print(f"{name:<16} {seconds:8.2f} s  peak RSS {rss / 2**20:7.1f} MiB", file=sys.stderr)

    snake, snakemake_runs = whole_runs(parent, "snakemake", args)
    run(snake, "dvc", "status")  # dvc.lock was written by the workflow's dvc commit
    dvc, dvc_runs = whole_runs(parent, "dvc", args)

    bare = bare_workflows(parent)
    noop = {
        "snakemake_pipeline": median_time(snake, args.repeats, "snakemake", "--cores", "all"),
        "snakemake_one_rule": median_time(bare, args.repeats, "snakemake", "--cores", "all"),
        "dvc_pipeline": median_time(dvc, args.repeats, "dvc", "repro"),
        "dvc_one_stage": median_time(bare, args.repeats, "dvc", "repro"),
    }
    result: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu_model": cpu_model(),
        "host_cpu_count": os.cpu_count(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "data": f"{args.raw} as data/raw (download not run)" if args.raw else "downloaded from MNIST_MIRROR",
        "params_file": str(args.params or "params.yaml"),
        "runs": {"snakemake": snakemake_runs, "dvc": dvc_runs},
        "noop": noop,
        "noop_extra_cpu_s_snakemake": extra_cpu(noop, "snakemake_pipeline", "snakemake_one_rule"),
        "noop_extra_cpu_s_dvc": extra_cpu(noop, "dvc_pipeline", "dvc_one_stage"),
    }
    if stages:
        result["stages_alone"] = stages
        result["max_stage_peak_rss_bytes"] = max(s["peak_rss_bytes"] for s in stages.values())
    if args.output:
        write_json(args.output, result)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key in ("noop", "noop_extra_cpu_s_snakemake", "noop_extra_cpu_s_dvc"):
            print(f"{key}: {result[key]}")
    shutil.rmtree(parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
