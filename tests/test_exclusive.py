"""The machine's exclusive lock: a wait over a second names the lock, its holder and how to skip it; the
wait has a limit, and its end is one `error:` line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT
from mnist_jax_pipeline.foundation import runtime

WAITER = """
import sys
from mnist_jax_pipeline.foundation import console
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.foundation.runtime import exclusive
console.configure("train@jit")
try:
    with exclusive("train@jit"):
        print("acquired", file=sys.stderr)
except PipelineError as err:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(1)
"""


def wait(lock: Path, timeout: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        runtime.LOCK_ENV: str(lock),
        runtime.LOCK_TIMEOUT_ENV: timeout,
    }
    return subprocess.run([sys.executable, "-c", WAITER], env=env, capture_output=True, text=True, timeout=120)


def test_a_wait_names_the_holder_and_its_limit_ends_in_one_error_line(tmp_path, monkeypatch):
    lock = tmp_path / "exclusive.lock"
    monkeypatch.setenv(runtime.LOCK_ENV, str(lock))
    with runtime.exclusive("profile@jit"):
        assert runtime.holder(lock) == f"pid {os.getpid()} in {os.getcwd()} (profile@jit)"
        started = time.monotonic()
        done = wait(lock, "2.5")
        assert time.monotonic() - started >= 2.5
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, lines
    said, error = lines
    assert "INFO train@jit waiting for the machine's lock" in said and str(lock) in said
    assert f"held by pid {os.getpid()} in {os.getcwd()} (profile@jit)" in said
    assert "MNIST_PIPELINE_LOCK=off" in said and "MNIST_PIPELINE_LOCK_TIMEOUT" in said
    assert error.startswith(f"error: {lock}: 'train@jit' waited 2.5 s (MNIST_PIPELINE_LOCK_TIMEOUT)")
    assert f"held by pid {os.getpid()}" in error and "MNIST_PIPELINE_LOCK=off" in error
    assert not runtime.holder_file(lock).exists()  # the holder's sidecar goes with the lock


def test_a_free_lock_is_taken_without_a_word(tmp_path):
    done = wait(tmp_path / "exclusive.lock", "2.5")
    assert done.returncode == 0 and done.stderr.strip() == "acquired", done.stderr


def test_a_bad_limit_is_one_line(tmp_path):
    done = wait(tmp_path / "exclusive.lock", "soon")
    assert done.returncode == 1 and done.stderr.strip() == (
        "error: MNIST_PIPELINE_LOCK_TIMEOUT=soon: not a number of seconds; set it to e.g. 600, or unset it for an hour"
    )
