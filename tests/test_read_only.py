"""A read-only checkout (a read-only bind mount) of an up-to-date workspace: `explain` reads it; a dry
run, a run and `show`, which need to write, each refuse in one line naming the path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import write_raw
from mnist_jax_pipeline.foundation import paths
from workspace import env, make_workspace, sh

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def read_only(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny workspace where `snakemake --cores all` ran, and the folder it is mounted at read-only."""
    parent = tmp_path_factory.mktemp("read_only")
    ws = make_workspace(
        parent, "ws", fast=False, **{"model.layer_sizes": [784, 32, 10], "variants": ["jit"], "train.epochs": 1}
    )
    write_raw(ws / paths.RAW.path)
    sh(ws, "snakemake", "--cores", "all")
    mount = parent / "mount"
    mount.mkdir()
    if run_in(ws, mount, "true").returncode != 0:
        pytest.skip("needs `unshare -rm` and `mount --bind` (user and mount namespaces) for a read-only checkout")
    return ws, mount


def run_in(ws: Path, mount: Path, command: str) -> subprocess.CompletedProcess:
    """`command` in `ws` mounted read-only at `mount`, in a mount namespace of its own."""
    script = f'mount --bind "{ws}" "{mount}" && mount -o remount,bind,ro "{mount}" && cd "{mount}" && {command}'
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], env=env(mount), capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize("command", ["snakemake -n", "snakemake --cores 1", "mnist-pipeline show"])
def test_what_must_write_refuses_in_one_line(read_only, command):
    done = run_in(*read_only, command)
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in output, output[-3000:]
    last = output.strip().splitlines()[-1]
    assert last.startswith("error: ") and "Read-only file system" in last, output[-3000:]


def test_explain_reads_a_read_only_checkout(read_only):
    done = run_in(*read_only, "mnist-pipeline explain models/jit.safetensors")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "current   yes" in done.stdout
