"""dvc.lock kept in step by a Snakemake run with nothing to run: the fingerprint that says whether a
`dvc commit` is needed, and the commit itself on a one-stage DVC project: digests of the bytes as they
are, or DVC's reason with the fix (the orchestrators' side: test_sequences.py, test_dvc_commit.py)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mnist_jax_pipeline.orchestration import dvc_lock, stage_table
from mnist_jax_pipeline.orchestration.jobs import Job, all_jobs


@pytest.fixture
def project(tmp_path, monkeypatch) -> list[Job]:
    monkeypatch.chdir(tmp_path)
    Path("dvc.lock").write_text("schema: '2.0'\n")
    jobs = all_jobs(["jit"])
    for job in jobs:
        job.record_path.parent.mkdir(parents=True, exist_ok=True)
        job.record_path.write_text(f'{{"stage": "{job.name}"}}')
    return jobs


@pytest.fixture
def commits(monkeypatch) -> list[list[str]]:
    made: list[list[str]] = []

    def commit(names: list[str]) -> None:
        made.append(names)
        Path("dvc.lock").write_text("schema: '2.0'\nstages: {}\n")

    monkeypatch.setattr(dvc_lock, "commit", commit)
    return made


def test_git_moving_dvc_lock_or_a_new_record_needs_a_commit_and_nothing_else_does(project, commits):
    assert not dvc_lock.in_step(project)  # never recorded
    assert dvc_lock.bring_up_to_date(project) == dvc_lock.UP_TO_DATE
    assert commits == [[job.name for job in project]]
    assert dvc_lock.in_step(project)
    assert dvc_lock.bring_up_to_date(project) is None and len(commits) == 1  # in step: no dvc commit
    Path("dvc.lock").write_text("schema: '2.0'\n")  # git checkout dvc.lock
    assert not dvc_lock.in_step(project)
    dvc_lock.remember(project)
    project[0].record_path.write_text('{"stage": "check", "again": 1}')  # a job ran
    assert not dvc_lock.in_step(project)


def test_a_failed_commit_is_one_warning_line_and_is_tried_again(project, monkeypatch):
    monkeypatch.setattr(dvc_lock, "commit", lambda names: "dvc.lock was not updated, DVC says: lock; wait")
    line = dvc_lock.bring_up_to_date(project)
    assert line is not None and line.startswith("warning: dvc.lock was not updated") and "\n" not in line
    assert not dvc_lock.in_step(project)


def test_the_fingerprint_covers_each_record_and_dvc_lock():
    jobs = [Job(stage_table.get("check"))]
    assert len(dvc_lock.fingerprint(jobs)) == 64


@pytest.fixture
def dvc_project(tmp_path, monkeypatch) -> Path:
    """A DVC project of one stage, `hello`, whose dependency is hello.txt, committed."""
    monkeypatch.chdir(tmp_path)
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], check=True)
    Path("dvc.yaml").write_text(
        "stages:\n  hello:\n    cmd: cp hello.txt out.txt\n    deps: [hello.txt]\n    outs: [out.txt]\n"
    )
    Path("hello.txt").write_text("hello\n")
    Path("out.txt").write_text("hello\n")
    assert dvc_lock.commit(["hello"]) is None
    return tmp_path / "hello.txt"


@pytest.mark.slow
def test_the_commit_records_the_bytes_of_a_file_rewritten_with_its_size_and_time_kept(dvc_project):
    before = dvc_project.stat()
    dvc_project.write_text("HELLO\n")
    os.utime(dvc_project, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert dvc_project.stat().st_ino == before.st_ino
    assert dvc_lock.commit(["hello"]) is None
    deps = yaml.safe_load(Path("dvc.lock").read_text())["stages"]["hello"]["deps"]
    assert deps[0]["md5"] == hashlib.md5(b"HELLO\n").hexdigest()


@pytest.mark.slow
def test_a_failed_commit_gives_dvcs_reason_and_for_a_merge_conflict_says_to_resolve_it(dvc_project):
    text = Path("dvc.lock").read_text()
    Path("dvc.lock").write_text(f"<<<<<<< HEAD\n{text}=======\n{text}>>>>>>> theirs\n")
    line = dvc_lock.commit(["hello"])
    assert line is not None and "\n" not in line
    assert "dvc.lock' is invalid (possible merge conflicts)" in line and dvc_lock.CONFLICT in line
    Path("dvc.lock").write_text(text)
    Path("dvc.yaml").write_text("stages: [")
    line = dvc_lock.commit(["hello"])
    assert line is not None and "dvc.yaml" in line and dvc_lock.CONFLICT not in line
