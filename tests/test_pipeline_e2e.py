"""Both orchestrators on the real MNIST, with a fast setting (2,000 training examples, 1 epoch).

Each runs in its own fresh copy of the repository: they must produce the same files (the
same model bytes), a second run must do nothing, and a preprocess change must re-run
preprocess and what follows it, never download.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import MIRROR, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.real_data]
ARTEFACT_DIRS = ("data/raw", "data/processed", "models", "metrics", "plots", "reports")
DOWNSTREAM_OF_PREPROCESS = {"preprocess", "train", "evaluate", "profile", "report"}


def env() -> dict[str, str]:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "MNIST_MIRROR": MIRROR or "", "GIT_AUTHOR_NAME": "ci",
            "GIT_AUTHOR_EMAIL": "ci@localhost", "GIT_COMMITTER_NAME": "ci", "GIT_COMMITTER_EMAIL": "ci@localhost"}


def sh(cwd: Path, *args: str) -> str:
    done = subprocess.run(args, cwd=cwd, env=env(), capture_output=True, text=True, timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{output[-4000:]}"
    return output


def set_params(ws: Path, **changes: object) -> None:
    params = yaml.safe_load((ws / "params.yaml").read_text())
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        params[section][key] = value
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def make_workspace(parent: Path, name: str) -> Path:
    """A fresh clone-like copy of the repository (tracked and unignored files) as its own git repo."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    ws = parent / name
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file() or src.is_symlink():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, ws / rel, follow_symlinks=False)
    set_params(ws, **{"preprocess.max_train_examples": 2000, "train.epochs": 1})
    sh(ws, "git", "init", "-q")
    sh(ws, "git", "add", "-A")
    sh(ws, "git", "commit", "-qm", "workspace")
    return ws


def artefacts(ws: Path) -> dict[str, Path]:
    found = {}
    for folder in ARTEFACT_DIRS:
        for path in (ws / folder).rglob("*"):
            if path.is_file() and path.name != ".gitignore":
                found[str(path.relative_to(ws))] = path
    return found


def snakemake_planned(ws: Path) -> set[str]:
    """Rule names of the jobs a dry run would execute."""
    out = sh(ws, "snakemake", "--cores", "all", "-n")
    if "Nothing to be done" in out:
        return set()
    table = out.split("Job stats:", 1)[1]
    return {m.group(1) for m in re.finditer(r"^(\w+)\s+\d+$", table, re.M)} - {"total", "all"}


def dvc_ran(output: str) -> set[str]:
    return {m.group(1).split("@")[0] for m in re.finditer(r"Running stage '([^']+)'", output)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if not MIRROR:
        pytest.skip("needs the real MNIST files: set MNIST_MIRROR to a folder with the four .gz files")
    parent = tmp_path_factory.mktemp("e2e")
    snake, dvc = make_workspace(parent, "snakemake"), make_workspace(parent, "dvc")
    sh(snake, "snakemake", "--cores", "all")
    sh(dvc, "dvc", "repro")
    return snake, dvc


def test_both_orchestrators_produce_the_same_files(runs):
    snake, dvc = runs
    a, b = artefacts(snake), artefacts(dvc)
    assert set(a) == set(b)
    for required in ("reports/report.html", "reports/summary.md", "models/jit.safetensors",
                     "models/nojit.safetensors", "data/processed/train_images.npy", "reports/profile/summary.json"):
        assert required in a
    for rel in ("models/jit.safetensors", "models/nojit.safetensors", "data/processed/train_images.npy",
                "data/raw/arrays/train_images.npy", "plots/confusion/jit.csv"):
        assert a[rel].read_bytes() == b[rel].read_bytes(), f"{rel} differs between the orchestrators"


def test_second_runs_do_nothing(runs):
    snake, dvc = runs
    assert snakemake_planned(snake) == set()
    assert "Data and pipelines are up to date" in sh(dvc, "dvc", "status")
    assert dvc_ran(sh(dvc, "dvc", "repro")) == set()


def test_dvc_metrics_list_both_variants(runs):
    _, dvc = runs
    shown = sh(dvc, "dvc", "metrics", "show")
    for variant in ("nojit", "jit"):
        assert f"metrics/evaluate/{variant}.json" in shown
    assert "test_accuracy" in shown


def test_dvc_experiment_reruns_train_and_what_follows(runs):
    _, dvc = runs
    ran = dvc_ran(sh(dvc, "dvc", "exp", "run", "--set-param", "train.epochs=2"))
    assert ran == {"train", "evaluate", "profile", "report"}
    assert "epochs: 2" in (dvc / "params.yaml").read_text()


def test_preprocess_change_reruns_preprocess_and_what_follows(runs):
    snake, dvc = runs
    for ws in runs:
        set_params(ws, **{"preprocess.seed": 1})
    assert snakemake_planned(snake) == DOWNSTREAM_OF_PREPROCESS
    ran = dvc_ran(sh(dvc, "dvc", "repro"))
    assert ran == DOWNSTREAM_OF_PREPROCESS
