"""The trace viewer listens on 127.0.0.1 only, every port it opens, and leaves the profile's outputs as
they were; a missing trace, a port outside 1..65535 or one in use is one line saying what to do."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from conftest import tiny_params_dict, write_params
from mnist_jax_pipeline.artefacts.provenance import Hashes
from mnist_jax_pipeline.foundation import paths

LOOPBACK = {"127.0.0.1", "::1"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def project(tiny_tree: Path, tmp_path: Path) -> Path:
    """A copy of the tiny tree, where the profile stage wrote every variant's trace."""
    root = tmp_path / "project"
    shutil.copytree(tiny_tree, root)
    return root


@pytest.mark.slow
def test_the_viewer_listens_on_loopback_only_and_serves_the_trace(project: Path):
    trace = paths.PROFILE.at("jit", project)
    before = Hashes().tree([trace])
    port = free_port()
    viewer = subprocess.Popen(
        [sys.executable, "-m", "mnist_jax_pipeline.cli", "viewer", "--variant", "jit", "--port", str(port)],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert viewer.stdout is not None
        lines = []
        for line in viewer.stdout:  # XProf's own log lines come first
            lines.append(line)
            if line.startswith("XProf at ") or len(lines) > 50:
                break
        assert lines[-1].startswith(f"XProf at http://127.0.0.1:{port}/"), lines
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/data/plugin/profile/run_tools?run=jit", timeout=60
        ) as answer:
            assert answer.status == 200  # the trace's tools: XProf read the trace
        time.sleep(1)  # every thread and worker it starts is up by now
        listening = [
            c.laddr for c in psutil.Process(viewer.pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN
        ]
        assert listening, "the viewer listens nowhere"
        assert {address.ip for address in listening} <= LOOPBACK, listening
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(viewer.pid, signal.SIGINT)
        rest, _ = viewer.communicate(timeout=60)
    stopped = [line for line in rest.splitlines() if line.startswith("error: ")]  # XProf logs its own errors
    assert viewer.returncode == 0 and not stopped, rest  # Ctrl-C is how the viewer ends: no failure
    assert Hashes().tree([trace]) == before, "the viewer changed the profile stage's outputs"


def viewer(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`mnist-pipeline viewer --variant jit ARGS` in `root`, a tree of params.yaml alone, run to its end."""
    write_params(root / "params.yaml", tiny_params_dict(variants=["jit"]))
    command = [sys.executable, "-m", "mnist_jax_pipeline.cli", "viewer", "--variant", "jit", *args]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120)


def test_without_a_trace_the_viewer_says_which_stage_to_run(tmp_path: Path):
    done = viewer(tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: reports/profile/jit/trace: no trace; run the profile stage first, with 'jit' among params.yaml's"
        " variants: snakemake --cores all (or dvc repro profile@jit)"
    )


@pytest.mark.parametrize("port", ["99999", "65536", "0", "http"])
def test_a_port_outside_1_to_65535_is_one_line(tmp_path: Path, port: str):
    (paths.PROFILE.at("jit", tmp_path) / paths.TRACE_LOGDIR).mkdir(parents=True)
    done = viewer(tmp_path, "--port", port)
    assert done.returncode == 1
    assert done.stderr.strip() == f"error: --port {port}: not a port number; give one from 1 to 65535, such as 8791"


def test_a_port_in_use_says_so_and_how_to_choose_another(tmp_path: Path):
    (paths.PROFILE.at("jit", tmp_path) / paths.TRACE_LOGDIR).mkdir(parents=True)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = viewer(tmp_path, "--port", str(port))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"error: --port {port}: 127.0.0.1:{port} is in use; choose another port with --port N"
    )
