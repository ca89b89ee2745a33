"""A fresh copy of the repository to run the orchestrators in, and readers of what they did."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import MIRROR, ROOT, mirror_dir, shared

sys.path.insert(0, str(ROOT / "benchmarks"))
from checkout_copy import copy_checkout  # noqa: E402  (the benchmarks' copy of the checkout, shared)

ARTEFACT_DIRS = ("data/raw", "data/processed", "models", "metrics", "plots", "reports")
# the small setting on top of the fast one: 1,000 training examples, one variant, one traced step
SMALL = {"variants": ["jit"], "preprocess.max_train_examples": 1000, "profile.trace_steps": 1}


def env(ws: Path | None = None) -> dict[str, str]:
    """The test's Python tools first on PATH; inside a workspace, its own copy of the package."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    extra = {"PYTHONPATH": str(ws / "src")} if ws else {}
    return {
        **os.environ,
        **extra,
        "PATH": path,
        "MNIST_MIRROR": MIRROR or "",
        "GIT_AUTHOR_NAME": "ci",
        "GIT_AUTHOR_EMAIL": "ci@localhost",
        "GIT_COMMITTER_NAME": "ci",
        "GIT_COMMITTER_EMAIL": "ci@localhost",
    }


def sh(cwd: Path, *args: str) -> str:
    done = subprocess.run(args, cwd=cwd, env=env(cwd), capture_output=True, text=True, timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{output[-4000:]}"
    return output


def set_params(ws: Path, **changes: object) -> None:
    params = yaml.safe_load((ws / "params.yaml").read_text())
    for dotted, value in changes.items():
        *parents, key = dotted.split(".")
        node = params
        for part in parents:
            node = node[part]
        node[key] = value
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def make_workspace(parent: Path, name: str, fast: bool = True, start: Path | None = None, **params: object) -> Path:
    """A fresh clone-like copy of the repository (tracked and unignored files) as its own git repo;
    `fast`: 2,000 training examples and one epoch. `start`: a copy of that workspace instead (downloaded())."""
    if start is not None:
        ws = copy_workspace(start, parent, name)
    else:
        ws = copy_checkout(parent / name, ROOT)
        sh(ws, "git", "init", "-q")
    set_params(ws, **({"preprocess.max_train_examples": 2000, "train.epochs": 1} if fast else {}) | params)
    sh(ws, "git", "add", "-A")
    sh(ws, "git", "commit", "-q", "--allow-empty", "-m", "workspace")
    return ws


def downloaded(tmp_path_factory) -> Path:
    """A workspace (the repository's settings) where `dvc repro download` ran on the real MNIST and was
    committed; made once per test session and shared by the workers. The start (make_workspace's
    `start`) of the workspaces whose tests do not check the download itself: the real download costs
    tens of seconds (TFDS's preparation), the same every time. Those that do (test_download.py,
    test_agreement.py's Snakemake-first run, the Snakemake half of test_pipeline_e2e.py, the Snakemake
    cache) download for themselves."""

    def build(ws: Path) -> None:
        mirror_dir()
        make_workspace(ws.parent, ws.name, fast=False)
        sh(ws, "dvc", "repro", "download")
        sh(ws, "git", "add", "-A")
        sh(ws, "git", "commit", "-q", "--allow-empty", "-m", "download")

    return shared(tmp_path_factory, "downloaded", build)


def small_snakemake_run(tmp_path_factory) -> Path:
    """A workspace (the small setting, SMALL) where `snakemake --cores all` ran and everything was
    committed; made once per test session and shared by the workers (test_content.py, test_sequences.py):
    read it only, copy it (copy_workspace) to change it."""

    def build(ws: Path) -> None:
        make_workspace(ws.parent, ws.name, start=downloaded(tmp_path_factory), **SMALL)
        sh(ws, "snakemake", "--cores", "all")
        sh(ws, "git", "add", "-A")
        sh(ws, "git", "commit", "-qm", "first run")

    return shared(tmp_path_factory, "small_snakemake_run", build)


def fast_dvc_run(tmp_path_factory) -> Path:
    """A workspace (the fast setting, params.yaml's variants) where `dvc repro` ran; made once per test
    session and shared by the workers (test_pipeline_e2e.py, test_s3_remote.py): read it only, copy it
    (copy_workspace) to change it."""

    def build(ws: Path) -> None:
        make_workspace(ws.parent, ws.name, start=downloaded(tmp_path_factory))
        sh(ws, "dvc", "repro")

    return shared(tmp_path_factory, "fast_dvc_run", build)


def artefacts(ws: Path) -> dict[str, Path]:
    found = {}
    for folder in ARTEFACT_DIRS:
        for path in (ws / folder).rglob("*"):
            if path.is_file() and path.name not in {".gitignore", ".snakemake_timestamp"}:
                found[str(path.relative_to(ws))] = path
    return found


PLAN = re.compile(r"^\d+ jobs? to run: (.+)$", re.M)  # the console's plan line (snakemake_logger_plugin_...)
WOULD_RUN = re.compile(r"^would run (\S+(?: \[[^\]]*\])?): ", re.M)  # a dry run's line for each job


def planned_rules(output: str) -> dict[str, int]:
    """{rule: jobs} of the plan line Snakemake's console printed (`all` and `sweeps` left out)."""
    found = PLAN.search(output)
    if found is None:
        return {}
    counts = {}
    for item in found.group(1).split(", "):
        rule, _, count = item.partition(" (")
        counts[rule] = int(count.rstrip(")")) if count else 1
    return counts


def snakemake_planned(ws: Path) -> set[str]:
    """Rule names of the jobs a dry run would execute."""
    out = sh(ws, "snakemake", "--cores", "all", "-n")
    if "Nothing to be done" in out:
        return set()
    return set(planned_rules(out))


def dvc_ran(output: str) -> set[str]:
    return {m.group(1).split("@")[0] for m in re.finditer(r"Running stage '([^']+)'", output)}


def copy_workspace(base: Path, parent: Path, name: str) -> Path:
    """A copy of a workspace (its git history, DVC cache and outputs), file times kept."""
    ws = parent / name
    shutil.copytree(base, ws, symlinks=True)
    return ws


def snakemake_jobs(ws: Path) -> set[str]:
    """The jobs a dry run would execute, named as DVC names its stages (`train@jit`), `all` left out."""
    return set(WOULD_RUN.findall(sh(ws, "snakemake", "--cores", "all", "-n")))


def dvc_stale(ws: Path) -> set[str]:
    """The stages `dvc status` lists as changed."""
    import json

    out = sh(ws, "dvc", "status", "--json")
    return set(json.loads(out.strip().splitlines()[-1] or "{}"))


def downstream(ws: Path, names: set[str]) -> set[str]:
    """The stages `names` and every stage after them in the pipeline (what re-running them re-runs)."""
    from mnist_jax_pipeline.config.params import load
    from mnist_jax_pipeline.orchestration.jobs import all_jobs

    params = load(ws / "params.yaml")
    found = set(names)
    for job in all_jobs(params.variants):  # upstream first
        if any(producer.name in found for producer, _ in job.producers(params.variants)):
            found.add(job.name)
    return found
