"""The `dvc commit` that ends a Snakemake run records the digests of the bytes as they are, not those DVC's
cache keeps for a file's inode, time and size; when DVC cannot commit, its reason and the fix that fits
reach the user. `mnist-pipeline show` calls a damaged metrics file damaged (unit cases: test_views.py)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from workspace import copy_workspace, env, sh, small_snakemake_run

pytestmark = [pytest.mark.slow, pytest.mark.real_data]
EVALUATE = "src/mnist_jax_pipeline/stages/evaluate.py"
TEMPLATE = "src/mnist_jax_pipeline/stages/report/templates/report.html.j2"


@pytest.fixture
def ws(tmp_path_factory, tmp_path) -> Path:
    return copy_workspace(small_snakemake_run(tmp_path_factory), tmp_path, "ws")


def rewrite_in_place(path: Path) -> None:
    """One letter of the module docstring's first word changed in place: size, inode and times kept."""
    before = path.stat()
    data = bytearray(path.read_bytes())
    at = data.index(b'"""') + 3
    data[at] ^= 0x20  # the letter's case
    with path.open("r+b") as file:
        file.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def test_dvc_lock_records_the_bytes_of_a_file_rewritten_with_its_size_and_time_kept(ws):
    sh(ws, "dvc", "status")  # DVC's cache now holds evaluate.py's digest, keyed by inode, time and size
    rewrite_in_place(ws / EVALUATE)
    assert "up to date" in sh(ws, "dvc", "status"), "DVC re-hashed on its own: this test no longer tests the commit"
    sh(ws, "snakemake", "--cores", "all")
    lock = yaml.safe_load((ws / "dvc.lock").read_text())
    recorded = {dep["md5"] for dep in lock["stages"]["evaluate@jit"]["deps"] if dep["path"] == EVALUATE}
    assert recorded == {hashlib.md5((ws / EVALUATE).read_bytes()).hexdigest()}
    assert "up to date" in sh(ws, "dvc", "status")  # DVC's cache holds the new digest too


def test_a_merge_conflict_in_dvc_lock_is_named_with_dvcs_reason_and_its_fix(ws):
    lock = ws / "dvc.lock"
    text = lock.read_text()
    lock.write_text(f"<<<<<<< HEAD\n{text}=======\n{text}>>>>>>> theirs\n")
    template = ws / TEMPLATE
    template.write_text(template.read_text().replace("</body>", "<!-- edited --></body>"))  # the report re-runs
    done = subprocess.run(["snakemake", "--cores", "all"], cwd=ws, env=env(ws), capture_output=True, text=True)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "edited" in (ws / "reports/report.html").read_text()
    assert last.startswith("error: the jobs succeeded, but dvc.lock was not updated")
    assert "possible merge conflicts" in last  # DVC's own reason
    assert "resolve the merge conflict in dvc.lock first" in last and "then run snakemake --cores all again" in last
    lock.write_text(text)  # the conflict resolved: the next run records the report
    assert "brought up to date" in sh(ws, "snakemake", "--cores", "all")
    assert "up to date" in sh(ws, "dvc", "status")


def test_a_project_without_git_is_told_to_make_one(ws):
    """A copy of the files alone (a downloaded archive): the jobs run, and the last line says how DVC gets its git."""
    subprocess.run(["rm", "-rf", str(ws / ".git")], check=True)
    template = ws / TEMPLATE
    template.write_text(template.read_text().replace("</body>", "<!-- edited --></body>"))  # the report re-runs
    done = subprocess.run(["snakemake", "--cores", "all"], cwd=ws, env=env(ws), capture_output=True, text=True)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "edited" in (ws / "reports/report.html").read_text()
    assert last.startswith("error: the jobs succeeded, but dvc.lock was not updated"), last
    assert "make the project a git repository first (git init" in last, last
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    assert "brought up to date" in sh(ws, "snakemake", "--cores", "all")
    assert "up to date" in sh(ws, "dvc", "status")


def test_show_calls_a_damaged_metrics_file_damaged(ws):
    (ws / "metrics/evaluate/jit.json").write_text("{")
    said = sh(ws, "mnist-pipeline", "show")
    left_out = next(line for line in said.splitlines() if line.startswith("left out:"))
    assert "workspace · jit (metrics/evaluate/jit.json: damaged" in left_out and "not run" not in left_out
    assert "re-run the 'evaluate@jit' stage" in left_out
