"""A stage never outlives the process that started it: killing a job's shell (as an orchestrator that
went away leaves it), killing Snakemake alone or a closed terminal (SIGHUP) stops the stage, which writes
nothing after; the recovery docs/errors.md gives lets go of a killed Snakemake's lock."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import ROOT, adopt, run_stages, tiny_params_dict, write_params, write_raw
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.orchestration import run
from workspace import copy_workspace, env, make_workspace, sh


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_raw(tmp_path / "data" / "raw", 600, 100)
    write_params(tmp_path / "params.yaml", tiny_params_dict(variants=["nojit"], train={"epochs": 200}))
    adopt(tmp_path)
    run_stages(tmp_path, ["preprocess"])
    return tmp_path


@pytest.mark.slow
def test_killing_a_jobs_shell_stops_its_stage_before_it_writes(project: Path):
    command = f"{sys.executable} -m mnist_jax_pipeline.cli train --variant nojit 2>&1 | cat"
    shell = subprocess.Popen(
        ["bash", "-c", command], cwd=project, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert shell.stdout is not None
        for line in shell.stdout:  # the stage is training: its first epoch is done
            if "epoch 1/" in line:
                break
        stage = next(
            p for p in psutil.Process(shell.pid).children() if "mnist_jax_pipeline.cli" in " ".join(p.cmdline())
        )
        os.kill(shell.pid, signal.SIGKILL)  # the job's shell, as when its orchestrator is gone
        started = time.monotonic()
        stage.wait(timeout=30)
        assert time.monotonic() - started < 10
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
    time.sleep(1)  # anything it would still write would land by now
    assert not (project / "models" / "nojit.safetensors").exists()
    assert not (project / "provenance" / "train_nojit.json").exists()
    assert not list(project.glob("models/.tmp-*")), "a temporary file left behind"


# --- Snakemake gone: its jobs stop, and write nothing after ---

ERRORS_PAGE = ROOT / "docs" / "errors.md"

STAGE = """
import time
from mnist_jax_pipeline.orchestration.run import Outcome
with Outcome("stage", verbose=False):
    print("running", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("pid_taken", [False, True])
def test_a_stage_stops_once_the_snakemake_named_to_it_is_gone(pid_taken):
    """The process named in ORCHESTRATOR is gone, or its pid is another process's (another start time)."""
    orchestrator = subprocess.Popen(["sleep", "60"])
    named = f"{orchestrator.pid} 1.0" if pid_taken else run.identity(orchestrator.pid)
    stage = subprocess.Popen(
        [sys.executable, "-c", STAGE],
        env={**os.environ, run.ORCHESTRATOR: named},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if not pid_taken:
            assert stage.stdout is not None and stage.stdout.readline() == "running\n"
            time.sleep(0.5)
            assert stage.poll() is None  # its orchestrator is there
            orchestrator.kill()
            orchestrator.wait()
        _, errors = stage.communicate(timeout=10)
        assert "error: stage stopped by SIGTERM" in errors
    finally:
        for process in (stage, orchestrator):
            process.kill()
            process.wait()


@pytest.mark.skipif(sys.platform != "linux", reason="on Linux psutil derives start times from the boot time")
def test_a_snakemake_is_still_there_after_the_clock_is_set(monkeypatch):
    """Setting the clock moves psutil's boot time, and every start time with it: Snakemake's identity holds."""
    named = run.identity(os.getpid())
    create_time, boot_time = psutil.Process.create_time, psutil.boot_time
    monkeypatch.setattr(psutil.Process, "create_time", lambda process: create_time(process) + 3600.0)
    monkeypatch.setattr(psutil, "boot_time", lambda: boot_time() + 3600.0)
    assert run._alive(named)


SETTING_UP = """
import os, signal, sys, threading
from mnist_jax_pipeline.cli import entry
start, sent = threading.Thread.start, []
def stop_then_start(thread):  # the watch's thread starts inside Outcome.__enter__: a stop comes just then
    if not sent:
        sent.append(signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
    start(thread)
threading.Thread.start = stop_then_start
sys.argv = ["mnist-pipeline", "check"]
entry()
"""


def test_a_stop_while_the_command_sets_up_is_its_one_stop_line(tmp_path):
    """A stop that comes while `Outcome` installs its handlers and its watch ends the command with its stop line."""
    done = subprocess.run([sys.executable, "-c", SETTING_UP], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr[-3000:]
    assert (
        done.stderr.strip() == "error: check stopped by SIGTERM; its temporary files were removed, nothing half-written"
    )


STOP_WHILE_THE_PACKAGE_IMPORTS = """
import os, signal, sys


class StopWhileThePackageImports:
    def find_spec(self, name, path=None, target=None):
        if name == "mnist_jax_pipeline.orchestration.snakefile":  # Ctrl-C as common.smk imports the package
            os.kill(os.getpid(), signal.SIGINT)
        return None


sys.meta_path.insert(0, StopWhileThePackageImports())
"""


def test_a_signal_while_the_snakefile_imports_the_package_is_one_line(tmp_path):
    ws = make_workspace(tmp_path, "ws", fast=False)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(STOP_WHILE_THE_PACKAGE_IMPORTS)
    environ = env(ws)
    environ["PYTHONPATH"] = f"{tmp_path / 'site'}{os.pathsep}{environ['PYTHONPATH']}"
    done = subprocess.run(["snakemake", "-n"], cwd=ws, env=environ, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr and done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr.strip().splitlines()[-1] == "error: stopped by SIGINT before any job started", done.stderr


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A tiny workspace (synthetic data) where Snakemake ran preprocess."""
    ws = make_workspace(
        tmp_path_factory.mktemp("orphan"),
        "ws",
        fast=False,
        **{"model.layer_sizes": [784, 32, 10], "variants": ["nojit"], "train.epochs": 20000},
    )
    write_raw(ws / paths.RAW.path)
    sh(ws, "snakemake", "--cores", "all", "--until", "preprocess")
    return ws


def training(ws: Path, environ: dict[str, str]) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """`snakemake --cores all` training nojit in its own process group, and the processes of its job once the
    first epoch is done."""
    proc = subprocess.Popen(
        ["snakemake", "--cores", "all", "models/nojit.safetensors"],
        cwd=ws,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    log, deadline = ws / "logs/train_nojit.log", time.monotonic() + 300
    while not (log.is_file() and "epoch 1/" in log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, "training never started"
        time.sleep(0.2)
    return proc, psutil.Process(proc.pid).children(recursive=True)


def written_since(ws: Path, moment: float) -> list[str]:
    """Files outside the logs and git written at or after `moment`."""
    found = [p for p in ws.rglob("*") if p.is_file() and not {".git", "logs"} & set(p.relative_to(ws).parts[:1])]
    return sorted(str(p.relative_to(ws)) for p in found if p.stat().st_mtime >= moment)


def nothing_locked(ws: Path) -> bool:
    """A real run may start: a Snakemake run with nothing to do is not refused by a lock."""
    return subprocess.run(["snakemake", "--cores", "1", "--until", "preprocess"], cwd=ws, env=env(ws)).returncode == 0


@pytest.mark.slow
def test_killing_snakemake_alone_stops_its_job_which_writes_nothing_after(prepared, tmp_path):
    """SIGKILL to Snakemake only: a wrapper on PATH (as an environment's activation script puts one) keeps a
    shell between Snakemake and the stage that lives on; the docs' recovery line lets go of the lock left."""
    ws = copy_workspace(prepared, tmp_path, "ws")
    real = Path(sys.executable).parent / "mnist-pipeline"
    wrapper = tmp_path / "bin" / "mnist-pipeline"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\n"{real}" "$@"\n')  # no exec: this shell stays the stage's parent
    wrapper.chmod(0o755)
    proc, job = training(ws, {**env(ws), "PATH": f"{wrapper.parent}{os.pathsep}{env(ws)['PATH']}"})
    try:
        killed = time.time()
        proc.kill()
        proc.wait()
        _, alive = psutil.wait_procs(job, timeout=10)
        assert alive == [], f"still running 10 s after Snakemake was killed: {[p.cmdline() for p in alive]}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(1)  # anything it would still write would land by now
    assert written_since(ws, killed) == []
    assert not (ws / "models/nojit.safetensors").exists() and not (ws / "provenance/train_nojit.json").exists()
    assert not nothing_locked(ws)  # Snakemake had no chance to let go of its lock
    recover(ws)
    assert nothing_locked(ws)


def recover(ws: Path) -> None:
    """Run the line docs/errors.md gives for a lock left by a crash, as it is written there."""
    recovery = re.search(r"after a crash, `([^`]+)`", ERRORS_PAGE.read_text()).group(1)
    done = subprocess.run(shlex.split(recovery), cwd=ws, env=env(ws), capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_docs_recovery_line_works_as_written(prepared, tmp_path):
    recover(copy_workspace(prepared, tmp_path, "ws"))


@pytest.mark.slow
def test_sighup_to_snakemakes_group_stops_it_cleanly(prepared, tmp_path):
    """A closed terminal: Snakemake prints its stop line and lets go of its lock; the stage stops."""
    ws = copy_workspace(prepared, tmp_path, "ws")
    proc, job = training(ws, env(ws))
    try:
        os.killpg(proc.pid, signal.SIGHUP)
        output, _ = proc.communicate(timeout=120)
        _, alive = psutil.wait_procs(job, timeout=10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0 and alive == []
    assert "SIGHUP: stopping" in output and "Traceback" not in output, output[-3000:]
    assert not (ws / "models/nojit.safetensors").exists()
    assert nothing_locked(ws)
