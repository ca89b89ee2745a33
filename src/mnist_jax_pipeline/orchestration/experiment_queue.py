"""`mnist-pipeline sweep-queue`: a sweep's points queued as DVC experiments, once the shared stages are
recorded in dvc.lock."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from ..comparison.experiments import dvc
from ..config.sweeps import Sweep, load, with_variant
from ..foundation.errors import PipelineError


def dvc_commands(sweep: Sweep) -> dict[str, list[str]]:
    """{experiment name: its `dvc exp run --queue` command}: one per point, each named after it."""
    commands = {}
    for point in sweep.points:
        sets = [f"{key}={json.dumps(value)}" for key, value in with_variant(point.changes, sweep.variant).items()]
        name = f"{sweep.name}-{point.name}"
        commands[name] = ["dvc", "exp", "run", "--queue", "--name", name, *(arg for s in sets for arg in ("-S", s))]
    return commands


def _in_queue() -> dict[str, str]:
    """{experiment name: 'queued' or 'running'} for DVC's queue's waiting and running tasks."""
    from dvc.repo import Repo

    with Repo(".") as repo:
        return {
            task["name"]: task["status"].lower()
            for task in repo.experiments.celery_queue.status()
            if task.get("name") and task.get("status") in ("Queued", "Running")
        }


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True)


def queue(args: argparse.Namespace) -> None:
    """`mnist-pipeline sweep-queue --file sweeps/NAME.yaml`: queue the points as DVC experiments, once the
    shared stages are recorded in dvc.lock, so every experiment takes them from DVC's cache."""
    sweep = load(args.file, args.params)
    if _run("git", "rev-parse", "--is-inside-work-tree").stdout.strip() != "true":  # DVC keeps experiments in git
        raise PipelineError(
            f"{Path.cwd()}: not in a git repository, and DVC experiments live in one; run sweep-queue"
            " in a clone of the project, or run the sweep with `snakemake --cores N sweeps`"
        )
    if dvc("status", "--json", "download", "preprocess").strip() not in ("{}", ""):
        raise PipelineError(
            "download and preprocess are not up to date in dvc.lock; run `dvc repro preprocess`"
            " first, so every experiment shares them instead of running them again"
        )
    taken = {name: f"already {state}" for name, state in _in_queue().items()}
    # without the list, every point would be queued again
    taken |= {name: "already an experiment of this commit" for name in dvc("exp", "list", "--name-only").split()}
    commands = dvc_commands(sweep)
    made = sum(name in taken for name in commands)
    if made and _run("git", "diff", "--quiet", "HEAD", "--", str(args.params)).returncode == 1:
        raise PipelineError(
            f"{args.params}: changed since the last commit, and {made} point(s) were made or queued before;"
            f" commit it first (git commit {args.params}), then run sweep-queue again"
        )
    queued = 0
    for name, command in commands.items():
        if name in taken:
            print(f"{name}: {taken[name]}; not queued again (to queue it anew: dvc exp remove {name})", file=sys.stderr)
            continue
        print(" ".join(command), file=sys.stderr)
        if subprocess.run(command).returncode != 0:
            raise PipelineError(
                f"{name}: `dvc exp run --queue` failed (its message is above); {queued} queued before it"
            )
        queued += 1
    print(
        f"queued {queued} experiment(s); run them with `dvc queue start -j N` (or `dvc exp run --run-all -j N`),"
        " then `dvc exp show` or `mnist-pipeline compare --dvc`",
        file=sys.stderr,
    )
