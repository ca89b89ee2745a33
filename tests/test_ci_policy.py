"""CI cannot pass with its core checks skipped: under CI=true a test that cannot run fails, a mirror
setting that points nowhere stops CI, and the heavy checks skip only where the machine lacks a
capability (their own set-up failing is a failure)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib

import pytest

from conftest import ROOT

REAL_DATA_TEST = "tests/test_download.py::test_real_download_through_tfds"


def pytest_run(env_changes: dict[str, str | None]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in env_changes}
    env.update({k: v for k, v in env_changes.items() if v is not None})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", REAL_DATA_TEST],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_without_the_mirror_a_real_data_test_skips_outside_ci():
    done = pytest_run({"CI": None, "MNIST_MIRROR": None})
    assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout


@pytest.mark.slow
def test_under_ci_a_real_data_test_that_cannot_run_fails():
    done = pytest_run({"CI": "true", "MNIST_MIRROR": None})
    assert done.returncode == 1 and ("1 failed" in done.stdout or "1 error" in done.stdout), done.stdout
    assert "CI=true and this test cannot run: needs the real MNIST files" in done.stdout


def test_a_mirror_that_is_set_but_missing_is_an_error_in_tests():
    done = pytest_run({"CI": None, "MNIST_MIRROR": "/nonexistent/mnist"})
    assert done.returncode == 1 and "MNIST_MIRROR=/nonexistent/mnist: not a folder" in done.stdout, done.stdout


def venv_state() -> tuple[bool, int | None]:
    """Whether .venv exists, and its pyvenv.cfg's time (which `python3 -m venv .venv` rewrites)."""
    config = ROOT / ".venv" / "pyvenv.cfg"
    return (ROOT / ".venv").exists(), config.stat().st_mtime_ns if config.exists() else None


def test_a_mirror_that_is_set_but_missing_stops_ci_at_once():
    before = venv_state()
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "MNIST_MIRROR": "/nonexistent/mnist"},
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr == "error: MNIST_MIRROR=/nonexistent/mnist: not a folder; point it at the four MNIST .gz files\n"
    # stopped before its first step: nothing printed (the MNIST_MIRROR= line comes first), no venv made or touched
    assert done.stdout == "", done.stdout
    assert venv_state() == before


@pytest.mark.parametrize(
    ("script", "name"),
    [("tests/container/run_podman.sh", "container check"), ("tests/cluster/run_slurm.sh", "slurm check")],
)
def test_heavy_checks_fail_when_their_setup_fails_and_skip_only_without_root(script, name):
    done = subprocess.run(
        ["bash", str(ROOT / script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MNIST_MIRROR": "/nonexistent/mnist"},
    )
    output = done.stdout + done.stderr
    if os.geteuid() != 0:  # a capability this machine lacks: the one case that skips
        assert done.returncode == 0 and f"SKIP {name}: needs root" in output
        return
    assert done.returncode == 1 and f"FAIL {name}:" in output and "SKIP" not in output, output


def test_the_readme_gives_two_commands_and_ci_runs_the_second():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [
        [line.split("#")[0].strip() for line in block.splitlines()]
        for block in re.findall(r"```bash\n(.*?)```", readme, re.S)
    ]
    test_command = "uv run --group dev pytest"
    assert blocks[0] == ["uv run snakemake --cores all", test_command]  # the quick start: two commands
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert lines.count(test_command) == 1
    assert not [line for line in lines if re.match(r"^(python3? -m )?pytest\b", line)]


def test_uv_run_installs_the_runtime_alone_and_compiles_nothing():
    """`uv run` syncs the runtime without the test tools and compiles no byte code (which it would redo at
    every call); the install that wants byte code compiles it once (.ci/run: uv sync --compile-bytecode)."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]
    assert tool["default-groups"] == [] and "compile-bytecode" not in tool
    assert "uv sync --locked --quiet --group dev --compile-bytecode" in (ROOT / ".ci" / "run").read_text()
    if os.environ.get("CI") == "true":  # the environment .ci/run made holds byte code beside the sources
        source = importlib.util.find_spec("snakemake.dag").origin
        assert os.path.exists(importlib.util.cache_from_source(source)), f"no byte code beside {source}"
