"""A stage never outlives the process that started it: killing a job's shell (as an orchestrator that
went away leaves it) stops the stage, which writes nothing after."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import adopt, run_stages, tiny_params_dict, write_params, write_raw


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
