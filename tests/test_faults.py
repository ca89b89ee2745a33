"""Faults leave nothing half-done: a killed stage, two runs at once, a read-only or full disk."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path

import psutil
import pytest

from conftest import ROOT, mirror_dir, without_root_powers, write_params
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.stages import train
from workspace import downloaded, dvc_ran, env, make_workspace, set_params, sh, snakemake_planned

TRAINING_DONE_BY_KILL = {"train", "evaluate", "profile", "report"}


def train_in(root: Path, params, processed: Path) -> None:
    """The train stage's command (jit), writing under `root`."""
    params_path = write_params(root / "params.yaml", params.to_dict())
    train.main(Namespace(params=params_path, variant="jit", processed=processed, root=root))


def _mount_tmpfs(target: Path, options: str) -> bool:
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True)
    return done.returncode == 0


def _umount(target: Path) -> None:
    subprocess.run(["umount", str(target)], capture_output=True)


@pytest.mark.parametrize(
    ("options", "reason"), [("size=64k", "No space left on device"), ("ro,size=1m", "Read-only file system")]
)
def test_full_or_read_only_disk_gives_a_clear_error_and_no_partial_file(
    tmp_path, make_params, tiny_processed, options, reason
):
    models = tmp_path / "models"
    if not _mount_tmpfs(models, options):
        pytest.skip("cannot mount a tmpfs here (needs root): the full/read-only disk case is not exercised")
    try:
        params = make_params(model__layer_sizes=[784, 64, 10], train__epochs=1)
        with pytest.raises(PipelineError) as err:
            train_in(tmp_path, params, tiny_processed)
        message = str(err.value)
        assert "models/jit.safetensors: cannot write" in message and reason in message and "\n" not in message
        assert list(models.iterdir()) == []
        assert not paths.TRAIN_METRICS.at("jit", tmp_path).exists()
    finally:
        _umount(models)


@pytest.mark.slow
def test_read_only_folder_by_its_permissions(tmp_path, make_params, tiny_processed):
    """Permission bits, not a mount: as root too (the command runs without root's DAC capabilities)."""
    models = tmp_path / "models"
    models.mkdir()
    models.chmod(0o555)
    write_params(tmp_path / "params.yaml", make_params(train__epochs=1).to_dict())
    other = shutil.copytree(tiny_processed, tmp_path / "other")  # inputs no record lists: no upstream check
    done = subprocess.run(
        [
            *without_root_powers(),
            str(Path(sys.executable).parent / "mnist-pipeline"),
            "train",
            "--variant",
            "jit",
            "--processed",
            str(other),
        ],
        cwd=tmp_path,
        env={**env(), "PYTHONPATH": str(ROOT / "src"), "MNIST_PIPELINE_LOCK": str(tmp_path / "lock")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "error: models/jit.safetensors: cannot write (Permission denied); check the folder's permissions and free space"
    )
    assert list(models.iterdir()) == []


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A workspace where download and preprocess are done (real MNIST, 2,000 examples)."""
    mirror_dir()
    ws = make_workspace(tmp_path_factory.mktemp("faults"), "ws", start=downloaded(tmp_path_factory), variants=["jit"])
    sh(ws, "snakemake", "--cores", "all", "--until", "preprocess")
    return ws


def _training_process(proc: subprocess.Popen) -> psutil.Process | None:
    """The Python process running `mnist-pipeline train` under an orchestrator (not its shell or tee)."""
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if child.name() in {"bash", "sh", "dash", "tee"}:
                continue
            cmdline = child.cmdline()
        except psutil.Error:
            continue
        if any(part.endswith("mnist-pipeline") for part in cmdline) and "train" in cmdline:
            return child
    return None


def _kill_training_when_it_runs(proc: subprocess.Popen, ws: Path, timeout: float = 240) -> None:
    """SIGKILL the `mnist-pipeline train` process once its first epoch is logged."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before training could be killed"
        stage = _training_process(proc)
        if stage is not None and "epoch 1/" in _logs(ws):
            stage.send_signal(signal.SIGKILL)
            return
        time.sleep(0.2)
    raise AssertionError("training never started")


def nothing_new(ws: Path, folder: str) -> bool:
    """`folder` holds no new or changed file: only the committed (the baseline's), or fewer (Snakemake
    deletes a failed job's outputs)."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--", folder],
        cwd=ws,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return not [line for line in status.splitlines() if line[:2].strip() != "D" and not line.endswith(".gitignore")]


def _logs(ws: Path) -> str:
    return (
        "".join(p.read_text(errors="replace") for p in (ws / "logs").glob("train_*.log"))
        if (ws / "logs").exists()
        else ""
    )


@pytest.mark.slow
@pytest.mark.real_data
def test_kill_during_training_snakemake(prepared):
    ws = prepared
    set_params(ws, **{"train.epochs": 400})
    proc = subprocess.Popen(
        ["snakemake", "--cores", "all"],
        cwd=ws,
        env=env(ws),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    _kill_training_when_it_runs(proc, ws)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, output
    assert not (ws / "models").exists() or not any((ws / "models").iterdir()), "a killed stage left a model"
    assert nothing_new(ws, "metrics/train"), "a killed stage left metrics"
    assert snakemake_planned(ws) - {"check"} == TRAINING_DONE_BY_KILL  # check may have run before the kill


@pytest.mark.slow
@pytest.mark.real_data
def test_kill_during_training_dvc(prepared):
    ws = prepared
    set_params(ws, **{"train.epochs": 400})
    proc = subprocess.Popen(
        ["dvc", "repro"], cwd=ws, env=env(ws), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 240
    killed = False
    while time.monotonic() < deadline and not killed:
        assert proc.poll() is None
        stage = _training_process(proc)
        if stage is not None and stage.cpu_times().user > 4:
            stage.send_signal(signal.SIGKILL)
            killed = True
        time.sleep(0.2)
    assert killed
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, output
    assert not (ws / "models").exists() or not any((ws / "models").iterdir())
    set_params(ws, **{"train.epochs": 1})
    stale = json.loads(sh(ws, "dvc", "status", "--json").strip().splitlines()[-1])
    # `check` re-runs when it last checked another params.yaml (400 epochs, if it ran before the kill)
    assert {name.split("@")[0] for name in stale} - {"check"} == TRAINING_DONE_BY_KILL
    assert dvc_ran(sh(ws, "dvc", "repro")) - {"check"} == TRAINING_DONE_BY_KILL


@pytest.mark.slow
@pytest.mark.real_data
@pytest.mark.parametrize("tool", ["snakemake", "dvc"])
def test_two_runs_at_once_one_is_refused_by_the_lock(prepared, tool):
    ws = prepared
    command = ["snakemake", "--cores", "all"] if tool == "snakemake" else ["dvc", "repro"]
    if tool == "dvc":
        set_params(ws, **{"train.epochs": 1})
        sh(ws, "snakemake", "--cores", "all")  # everything up to date, and recorded in dvc.lock
    set_params(ws, **{"train.epochs": 20 if tool == "snakemake" else 21})  # a run long enough to overlap
    first = subprocess.Popen(command, cwd=ws, env=env(ws), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while _training_process(first) is None:  # the first run holds its lock once a stage runs
        assert first.poll() is None and time.monotonic() < deadline, "the first run never started training"
        time.sleep(0.2)
    second = subprocess.run(command, cwd=ws, env=env(ws), capture_output=True, text=True, timeout=300)
    output, _ = first.communicate(timeout=600)
    assert first.returncode == 0, output
    assert second.returncode != 0, second.stdout + second.stderr
    # DVC refuses through its repository lock or through the read/write lock on the outputs.
    expected = ("cannot be locked",) if tool == "snakemake" else ("Unable to acquire lock", "is being blocked by")
    refused = second.stdout + second.stderr
    assert any(text in refused for text in expected), refused
    assert (ws / "reports/report.html").is_file()
