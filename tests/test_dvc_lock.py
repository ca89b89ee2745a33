"""dvc.lock kept in step by a Snakemake run with nothing to run: the fingerprint that says whether a
`dvc commit` is needed (the orchestrators' side: test_sequences.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnist_jax_pipeline.orchestration import dvc_lock, stage_table
from mnist_jax_pipeline.orchestration.jobs import Job, all_jobs


@pytest.fixture
def project(tmp_path, monkeypatch) -> list[Job]:
    monkeypatch.chdir(tmp_path)
    Path("dvc.lock").write_text("schema: '2.0'\n")
    jobs = all_jobs(["jit"])
    for job in jobs:
        job.stamp_path.parent.mkdir(parents=True, exist_ok=True)
        job.stamp_path.write_text(f'{{"stage": "{job.name}"}}')
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
    project[0].stamp_path.write_text('{"stage": "check", "again": 1}')  # a job ran
    assert not dvc_lock.in_step(project)


def test_a_failed_commit_is_one_warning_line_and_is_tried_again(project, monkeypatch):
    monkeypatch.setattr(dvc_lock, "commit", lambda names: "dvc commit failed (ERROR: lock); run it once DVC can")
    line = dvc_lock.bring_up_to_date(project)
    assert line is not None and line.startswith("warning: dvc.lock: dvc commit failed") and "\n" not in line
    assert not dvc_lock.in_step(project)


def test_the_fingerprint_covers_each_record_and_dvc_lock():
    jobs = [Job(stage_table.get("check"))]
    assert len(dvc_lock.fingerprint(jobs)) == 64
