"""The machine's timing lock: a wait names its holder in one short line, ends after a limit with the stage
running anyway, and the conditions a timing was taken under are observed and recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from mnist_jax_pipeline.foundation import runtime
from mnist_jax_pipeline.foundation.errors import PipelineError

WAITER = """
import json, sys
from mnist_jax_pipeline.foundation import console
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.foundation.runtime import timing_lock
console.configure("train@jit")
try:
    with timing_lock("train@jit") as conditions:
        pass
except PipelineError as err:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(1)
print(json.dumps(conditions.fields()))
"""


def wait(lock: Path | str, timeout: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        runtime.LOCK_ENV: str(lock),
        runtime.LOCK_TIMEOUT_ENV: timeout,
    }
    return subprocess.run([sys.executable, "-c", WAITER], env=env, capture_output=True, text=True, timeout=120)


def test_a_wait_names_the_holder_in_one_short_line_and_then_runs_without_the_lock(tmp_path, monkeypatch):
    lock = tmp_path / "a-rather-long-folder-name-for-the-lock" / "timing.lock"
    lock.parent.mkdir()
    monkeypatch.setenv(runtime.LOCK_ENV, str(lock))
    with runtime.timing_lock("profile@jit"):
        started = time.monotonic()
        done = wait(lock, "2.5")
        assert time.monotonic() - started >= 2.5
    assert done.returncode == 0, done.stderr
    said, went_on = done.stderr.strip().splitlines()
    assert f"INFO train@jit waiting up to 2.5 s for the timing lock (pid {os.getpid()}, " in said
    assert all(len(line) < 120 for line in (said, went_on)), (said, went_on)
    assert "WARNING train@jit ran without the timing lock" in went_on
    conditions = json.loads(done.stdout)
    assert conditions["timing_lock"] == "not held" and conditions["busy"] and conditions["lock_wait_seconds"] >= 2.5
    assert list(lock.parent.iterdir()) == [lock]  # nothing written beside the lock, whatever is there


def test_a_free_lock_is_taken_without_a_word(tmp_path):
    done = wait(tmp_path / "timing.lock", "2.5")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    conditions = json.loads(done.stdout)
    assert conditions["timing_lock"] == "held" and conditions["lock_wait_seconds"] < 1
    assert conditions["loadavg_1m_at_start"] is not None and conditions["loadavg_1m_at_end"] is not None


def test_off_shares_the_machine_on_purpose(tmp_path):
    done = wait("off", "2.5")
    assert json.loads(done.stdout)["timing_lock"] == "off" and json.loads(done.stdout)["busy"]


def test_another_process_using_the_cpu_makes_a_timing_busy(tmp_path, monkeypatch):
    monkeypatch.setenv(runtime.LOCK_ENV, str(tmp_path / "timing.lock"))
    burner = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 3\nwhile time.time() < end: pass"]
    )
    try:
        with runtime.timing_lock("train@jit") as conditions:
            time.sleep(2)
    finally:
        burner.wait()
    assert conditions.other_cpu_share is not None and conditions.other_cpu_share > runtime.BUSY_SHARE
    assert conditions.busy and conditions.timing_lock == "held"


@pytest.mark.parametrize("timeout", ["soon", "-1", "inf"])
def test_a_bad_limit_is_one_line(tmp_path, timeout):
    done = wait(tmp_path / "timing.lock", timeout)
    assert done.returncode == 1 and done.stderr.strip() == (
        f"error: MNIST_PIPELINE_LOCK_TIMEOUT={timeout}: not a number of seconds; set e.g. 60 or unset it"
    )


def test_a_lock_setting_that_is_no_regular_file_is_one_line_not_a_hang(tmp_path, monkeypatch):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for setting in (fifo, Path("/dev/zero"), tmp_path):
        monkeypatch.setenv(runtime.LOCK_ENV, str(setting))
        with pytest.raises(PipelineError, match="not a regular file"), runtime.timing_lock("train@jit"):
            pass
