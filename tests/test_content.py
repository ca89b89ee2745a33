"""Content, not file times, decides what is stale: the sequences where the two tools used to disagree,
ship a stale model, or lose a tracked file (real MNIST, 1,000 examples, one epoch, one variant)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import mirror_dir
from workspace import copy_workspace, downstream, dvc_stale, env, set_params, sh, small_snakemake_run, snakemake_jobs

pytestmark = [pytest.mark.slow, pytest.mark.real_data]
EVERYTHING_AFTER_TRAIN = {"train@jit", "evaluate@jit", "profile@jit", "report"}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A workspace where `snakemake --cores all` ran and everything was committed (the session's one,
    shared with test_sequences.py: each test changes a copy)."""
    mirror_dir()
    return small_snakemake_run(tmp_path_factory)


@pytest.fixture
def ws(base, tmp_path) -> Path:
    return copy_workspace(base, tmp_path, "ws")


def training(proc: subprocess.Popen) -> bool:
    """Whether a `mnist-pipeline train` runs under `proc`."""
    import psutil

    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    for child in children:
        try:  # a child may end, or be a zombie, between the listing and this read
            if "train" in " ".join(child.cmdline()):
                return True
        except psutil.Error:
            continue
    return False


def run(ws: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ws, env=env(ws), capture_output=True, text=True, timeout=900)


def agree(ws: Path) -> set[str]:
    """What Snakemake would run; it must be what re-running what `dvc status` lists would run."""
    planned = snakemake_jobs(ws)
    assert planned == downstream(ws, dvc_stale(ws)), f"snakemake -n: {planned}, dvc status: {dvc_stale(ws)}"
    return planned


def recorded_params(ws: Path, stage: str, section: str) -> dict:
    lock = yaml.safe_load((ws / "dvc.lock").read_text())
    return lock["stages"][stage]["params"]["params.yaml"][section]


def test_a_model_dvc_made_from_other_parameters_is_retrained_not_shipped(ws):
    set_params(ws, **{"train.epochs": 2})
    sh(ws, "dvc", "repro", "train@jit")
    sh(ws, "git", "checkout", "params.yaml")  # back to one epoch: the model on disk is the 2-epoch one
    assert agree(ws) == EVERYTHING_AFTER_TRAIN
    out = sh(ws, "snakemake", "--cores", "all")
    assert "models/jit.safetensors: made with train.epochs: 2 in the record, 1 in params.yaml" in out
    assert json.loads((ws / "metrics/train/jit.full.json").read_text())["epochs"] == 1
    assert recorded_params(ws, "train@jit", "train")["epochs"] == 1
    assert agree(ws) == set()
    assert dvc_stale(ws) == set()


def test_a_swapped_model_with_an_old_time_is_refused_then_retrained(ws):
    model = ws / "models/jit.safetensors"
    before = model.stat()
    blob = bytearray(model.read_bytes())
    blob[-4:] = b"\0\0\0\0"  # another model: one weight differs
    model.write_bytes(bytes(blob))
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    done = run(ws, "mnist-pipeline", "evaluate", "--variant", "jit")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "error: models/jit.safetensors: changed since 'train@jit' wrote it; re-run 'train@jit':"
        " snakemake --cores all, or dvc repro -f -s train@jit"
    )
    assert agree(ws) == EVERYTHING_AFTER_TRAIN


def test_a_truncated_array_reruns_preprocess_and_keeps_the_other_outputs(ws):
    array = ws / "data/processed/train_images.npy"
    array.write_bytes(array.read_bytes()[:1000])
    assert agree(ws) == {"preprocess"} | EVERYTHING_AFTER_TRAIN
    sh(ws, "snakemake", "--cores", "all")
    assert agree(ws) == set()


def test_dvc_repro_and_dvc_exp_apply_leave_snakemake_nothing_to_do(ws):
    set_params(ws, **{"train.step_size": 0.02})
    sh(ws, "dvc", "repro")
    assert agree(ws) == set()
    sh(ws, "dvc", "exp", "run", "-S", "train.step_size=0.03")
    experiments = json.loads(sh(ws, "dvc", "exp", "show", "--json").strip().splitlines()[-1])
    names = [exp["name"] for rev in experiments for exp in (rev.get("experiments") or [])]
    sh(ws, "git", "checkout", "params.yaml")
    sh(ws, "dvc", "exp", "apply", names[0])
    assert agree(ws) == set()


def test_touching_code_or_outputs_reruns_nothing_editing_code_reruns_its_stages(ws):
    for path in ("src/mnist_jax_pipeline/mlp/model.py", "data/processed/train_images.npy", "models/jit.safetensors"):
        os.utime(ws / path)
    assert agree(ws) == set()
    template = ws / "src/mnist_jax_pipeline/stages/report/templates/report.html.j2"
    template.write_text(template.read_text() + "\n")
    assert agree(ws) == {"report"}


def test_stray_temporary_file_is_no_change_to_either_tool(ws):
    (ws / "data/processed/.tmp-train_images.npy.99999.x").write_bytes(b"half")
    assert agree(ws) == set()


def test_a_refused_dvc_repro_keeps_every_tracked_file(ws):
    set_params(ws, **{"train.batch_size": 0})
    done = run(ws, "dvc", "repro")
    assert done.returncode != 0
    assert "train.batch_size" in done.stdout + done.stderr
    deleted = sh(ws, "git", "ls-files", "--deleted").split()
    assert deleted == [], f"deleted: {deleted}"


def test_a_failed_snakemake_job_keeps_its_earlier_outputs(ws):
    set_params(ws, **{"train.epochs": 2})
    template = ws / "src/mnist_jax_pipeline/stages/report/templates/report.html.j2"
    template.write_text(template.read_text() + "{% if %}")  # the report stage fails on it
    before = {path: (ws / path).read_bytes() for path in ("plots/variants.csv", "reports/report.html")}
    done = run(ws, "snakemake", "--cores", "all")
    assert done.returncode != 0
    assert sh(ws, "git", "ls-files", "--deleted").split() == []
    assert {path: (ws / path).read_bytes() for path in before} == before  # the report's earlier outputs
    # the jobs that finished were recorded, the failed one was not
    assert recorded_params(ws, "train@jit", "train")["epochs"] == 2
    assert recorded_params(ws, "report", "train")["epochs"] == 1


@pytest.mark.parametrize("first", ["snakemake", "dvc"])
def test_one_run_at_a_time_across_the_two_tools(ws, first):
    set_params(ws, **{"train.epochs": 300})  # long enough to overlap
    commands = {"snakemake": ["snakemake", "--cores", "all"], "dvc": ["dvc", "repro"]}
    second = "dvc" if first == "snakemake" else "snakemake"
    proc = subprocess.Popen(
        commands[first],
        cwd=ws,
        env=env(ws),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not training(proc):
            assert proc.poll() is None and time.monotonic() < deadline, "the first run never started training"
            time.sleep(0.2)
        assert proc.poll() is None, "the first run ended before the second started"
        refused = run(ws, *commands[second])
        assert refused.returncode != 0
        text = refused.stdout + refused.stderr
        assert "Unable to acquire lock" in text or "a DVC command is running in this checkout" in text, text
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=120)


def test_a_new_runtime_version_makes_every_stage_stale_a_new_dev_tool_none(ws):
    dev = ws / "requirements/dev.txt"
    dev.write_text(dev.read_text().replace("pytest==", "pytest==0", 1))
    assert agree(ws) == set()
    runtime = ws / "requirements/runtime.txt"
    text = runtime.read_text()
    assert "\nnumpy==" in text
    runtime.write_text(text.replace("\nnumpy==", "\nnumpy==0", 1))  # as a lock update would change it
    assert agree(ws) == {"check", "download", "preprocess"} | EVERYTHING_AFTER_TRAIN
