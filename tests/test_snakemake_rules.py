"""The Python behind the Snakemake rule files, without a Snakemake run: Ctrl-C handling (stopping.py),
the markers (markers.py), DVC's lock and dvc.lock's record (dvc_lock.py) and what the rules declare
(snakemake_rules.py), against a stand-in for Snakemake's workflow object."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from mnist_jax_pipeline.orchestration.snakemake_rules import Rules
from snakemake.io import is_flagged

from conftest import ROOT
from mnist_jax_pipeline.orchestration import dvc_lock, freshness, markers, snakemake_rules, stage_table, stopping

# --- stopping.py ---


def test_a_signal_while_snakemake_parses_stops_at_once(monkeypatch):
    monkeypatch.setattr(signal, "getsignal", lambda signum: signal.SIG_DFL)  # no scheduler yet
    with pytest.raises(SystemExit, match="error: stopped by SIGINT before any job started"):
        stopping.Stopper()(signal.SIGINT, None)


def test_a_signal_while_the_dag_is_built_stops_before_the_first_job(monkeypatch):
    monkeypatch.setattr(signal, "getsignal", lambda signum: signal.SIG_DFL)
    stopper = stopping.Stopper()

    async def in_the_event_loop():
        stopper(signal.SIGINT, None)

    asyncio.run(in_the_event_loop())
    assert stopper.signals == [signal.SIGINT]
    with pytest.raises(SystemExit, match="error: stopped by SIGINT before any job started"):
        stopper.stopped_before_start()


def test_a_signal_while_jobs_run_asks_the_scheduler_to_stop_once(monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(signal, "getsignal", lambda signum: lambda *args: asked.append(args))
    stopper = stopping.Stopper()
    stopper(signal.SIGINT, None)
    stopper(signal.SIGINT, None)
    deadline = time.monotonic() + 5
    while len(asked) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert asked == [(signal.SIGTERM, None)] * 2
    assert capsys.readouterr().err.count("SIGINT: stopping; the running jobs stop and clean up") == 1
    stopping.Stopper().stopped_before_start()  # none received: no stop


def test_install_handles_sigint():
    before = signal.getsignal(signal.SIGINT)
    try:
        stopper = stopping.install()
        assert signal.getsignal(signal.SIGINT) is stopper
    finally:
        signal.signal(signal.SIGINT, before)


# --- markers.py ---


def test_a_stale_marker_gets_new_content_and_a_time_after_the_outputs(tmp_path):
    output = tmp_path / "out.bin"
    output.write_bytes(b"x")
    future = time.time() + 1000
    os.utime(output, (future, future))
    marker = tmp_path / "m" / "train_jit.json"
    markers.mark_one(marker, ["params.yaml: train.step_size changed"], [output])
    first = marker.read_text()
    assert first.startswith("params.yaml: train.step_size changed\n")
    assert marker.stat().st_mtime >= future + 1
    markers.mark_one(marker, ["params.yaml: train.step_size changed"], [output])
    assert marker.read_text() != first  # new content each time


def test_a_marker_without_outputs_is_the_same_in_every_checkout(tmp_path):
    marker = tmp_path / "m"
    markers.mark_one(marker, ["no record"], [tmp_path / "absent"])
    assert marker.read_text() == "missing\n"


def test_a_current_marker_gets_the_oldest_time(tmp_path):
    marker = tmp_path / "m"
    markers.mark_one(marker, None, [])
    assert marker.read_text() == "current\n" and marker.stat().st_mtime == 0
    marker.write_text("stale before\n")
    markers.mark_one(marker, [], [])
    assert marker.read_text() == "stale before\n" and marker.stat().st_mtime == 0


def test_mark_and_settle(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    jobs = freshness.jobs(("jit",))
    train = next(job for job in jobs if job.name == "train@jit")
    train.stamp_path.parent.mkdir(parents=True, exist_ok=True)
    train.stamp_path.write_text("{}")
    markers.mark(jobs, {train: ["no model"]})
    assert markers.marker(train).read_text().startswith("no model\n")  # its record is there
    others = [job for job in jobs if job is not train]
    assert all(markers.marker(job).stat().st_mtime == 0 for job in others)
    markers.settle(jobs)  # absent records are no error
    assert train.stamp_path.stat().st_mtime == 1


# --- dvc_lock.py: DVC's repository lock and the record of a run ---


def test_the_repository_lock_is_one_run_at_a_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dvc_lock.RepositoryLock().hold()  # not a DVC project: nothing to hold
    assert not Path(".dvc").exists()
    Path(".dvc").mkdir()
    first = dvc_lock.RepositoryLock()
    first.hold()
    assert first.held
    with pytest.raises(SystemExit, match=r"a DVC command is running in this checkout \(.dvc/tmp/lock is held\)"):
        dvc_lock.RepositoryLock().hold()
    first.release()
    assert not first.held
    second = dvc_lock.RepositoryLock()
    second.hold()
    second.release()


def test_a_stage_that_dvc_runs_keeps_snakemake_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path(".dvc/tmp").mkdir(parents=True)
    other = os.getppid()  # alive, and not this process
    Path(".dvc/tmp/rwlock").write_text(f'{{"write": {{"data/raw": {{"pid": {other}, "cmd": "dvc repro"}}}}}}')
    lock = dvc_lock.RepositoryLock()
    with pytest.raises(SystemExit, match=f"pid {other} runs a stage"):
        lock.hold()
    assert not lock.held  # let go again
    Path(".dvc/tmp/rwlock").write_text(f'{{"read": {{"data/raw": [{{"pid": {os.getpid()}}}]}}}}')
    assert lock.stage_runs() == []  # this process's own locks
    Path(".dvc/tmp/rwlock").write_text("not json")
    assert lock.stage_runs() == []


class FakeChecker:
    def __init__(self, problems: dict[str, list[str]]) -> None:
        self.found = problems

    def problems(self, job):
        return self.found.get(job.name, [])


def test_record_run_commits_the_current_jobs_and_names_the_others(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    jobs = freshness.jobs(("jit",))
    committed, remembered = [], []
    monkeypatch.setattr(dvc_lock, "commit", lambda names: committed.append(names))
    monkeypatch.setattr(dvc_lock, "remember", lambda jobs: remembered.append(jobs))
    ran = {"check", "download", "train@jit", "evaluate@jit"}
    checker = FakeChecker({"train@jit": ["params.yaml: train.epochs changed"], "evaluate@jit": ["no record"]})
    assert dvc_lock.record_run(checker, jobs, ran) is None
    assert committed == [["check", "download"]]
    line = capsys.readouterr().err
    assert line == (
        "dvc.lock: not current, so not recorded: train@jit: params.yaml: train.epochs changed (and evaluate@jit)\n"
    )
    assert remembered == []  # not every job is current
    everything = {job.name for job in jobs}
    assert dvc_lock.record_run(FakeChecker({}), jobs, everything) is None
    assert remembered == [jobs]
    monkeypatch.setattr(dvc_lock, "commit", lambda names: "dvc commit failed (ERROR: x); run `dvc commit --force`")
    assert dvc_lock.record_run(FakeChecker({}), jobs, everything).startswith("dvc commit failed")


def test_committing_needs_a_dvc_project_and_no_opt_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(dvc_lock.COMMIT_ENV, raising=False)
    assert not dvc_lock.committing()
    Path(".dvc").mkdir()
    assert dvc_lock.committing()
    monkeypatch.setenv(dvc_lock.COMMIT_ENV, "0")
    assert not dvc_lock.committing()


# --- snakemake_rules.py ---


def fake_workflow(**settings) -> SimpleNamespace:
    """What Rules reads of Snakemake's workflow object."""
    values = {
        "workflow_settings": SimpleNamespace(cache=None),
        "output_settings": SimpleNamespace(verbose=False),
        "cores": 2,
        "dryrun": False,
        "touch": False,
        "executor_plugin": object(),
        "is_main_process": True,
        "dag": SimpleNamespace(jobs=[], needrun_jobs=list),
    }
    return SimpleNamespace(**(values | settings))


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(snakemake_rules.SWEEP_LOCK_ENV, raising=False)
    return tmp_path


def test_an_override_or_a_bad_parameter_stops_before_any_job(project):
    with pytest.raises(SystemExit, match="overrides are not used by the stages"):
        Rules(fake_workflow(), {"train": {"epochs": 1}})
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["train"]["epochs"] = "many"
    (project / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SystemExit) as stopped:
        Rules(fake_workflow(), {})
    assert str(stopped.value).startswith("error: params.yaml") and "train.epochs" in str(stopped.value)


def test_the_rules_declare_the_stage_table(project):
    config: dict = {}
    rules = Rules(fake_workflow(), config)
    assert config["train"] == rules.params.to_dict()["train"]
    assert rules.variants == tuple(rules.params.variants)
    assert rules.cache is False
    assert Rules(fake_workflow(workflow_settings=SimpleNamespace(cache=[])), {}).cache == "omit-software"

    inputs = rules.stage_inputs("evaluate")
    assert inputs[0] == ".snakemake/provenance/evaluate_{variant}.json"
    assert stage_table.get("train").stamp.path in inputs  # the record of the job it reads, not ancient
    assert not is_flagged(inputs[0], "ancient")
    files = [value for value in inputs if is_flagged(value, "ancient")]
    assert files and all(str(value) not in inputs[:2] for value in files)

    outputs = rules.stage_outputs("train")
    assert outputs and all(is_flagged(value, "update") for value in outputs.values())
    assert all(key.isidentifier() for key in outputs)
    folders = rules.stage_outputs("download")
    assert any(is_flagged(value, "directory") for value in folders.values())

    params = rules.stage_params("train")
    assert params["values"] == {section: config[section] for section in stage_table.get("train").params}
    assert params["code"] == rules.checker.code(stage_table.get("train"))

    command = rules.stage_command("train")
    assert command.startswith(f"{freshness.TOOL_ENV}=snakemake MNIST_PIPELINE_LOG={{log:q}} ")
    assert "--variant {wildcards.variant}" in command and command.endswith("exec tee -a {log:q})")


def test_prepare_marks_every_job_and_chooses_the_sweep_lock(project, monkeypatch):
    monkeypatch.setenv("MNIST_PIPELINE_LOCK", "/tmp/a.lock")
    rules = Rules(fake_workflow(cores=1), {})
    rules.prepare()
    assert set(rules.stale) == set(rules.jobs)  # nothing ran here
    assert all(markers.marker(job).read_text() == "missing\n" for job in rules.jobs)
    assert os.environ[snakemake_rules.SWEEP_LOCK_ENV] == "/tmp/a.lock"
    Rules(fake_workflow(cores=4), {}).prepare()
    assert os.environ[snakemake_rules.SWEEP_LOCK_ENV] == "off"


def test_prepare_refuses_a_file_where_an_output_folder_belongs(project):
    Path("models").write_text("not a folder")
    with pytest.raises(SystemExit, match=r"^error: .*models"):
        Rules(fake_workflow(), {}).prepare()


def test_an_invalid_sweep_file_fails_the_sweeps_target_only(project, capsys):
    Path("sweeps").mkdir()
    Path("sweeps/bad.yaml").write_text("grid: [\n")
    rules = Rules(fake_workflow(), {})
    rules.prepare()
    assert rules.sweep_errors and "warning: " in capsys.readouterr().err
    command = rules.sweeps_command()
    assert command.endswith(">&2; exit 1") and "sweeps/bad.yaml" in command
    assert "{" not in command.replace("{{", "").replace("}}", "")  # no Snakemake placeholder left


def test_a_sweep_points_rules(project):
    rules = Rules(fake_workflow(), {})
    inputs = rules.point_inputs("evaluate")
    assert inputs["params"] == "sweeps/{sweep}/{point}/params.yaml"
    assert inputs["records"][-1] == f"sweeps/{{sweep}}/{{point}}/{stage_table.get('train').stamp.path}"
    assert all(is_flagged(path, "ancient") for path in inputs["upstream"])
    command = rules.point_command("train")
    assert command.split(" ")[2] == "MNIST_PIPELINE_LOCK=${{MNIST_PIPELINE_SWEEP_LOCK-off}}"  # {{ }}: not a placeholder
    assert "--root sweeps/{wildcards.sweep}/{wildcards.point:q}" in command


def test_a_run_with_nothing_to_run_brings_dvc_lock_up_to_date_once(project, monkeypatch):
    calls = []
    monkeypatch.setattr(dvc_lock, "bring_up_to_date", lambda jobs: calls.append(jobs))
    Path(".dvc").mkdir()
    for settings in ({"executor_plugin": None}, {"dryrun": True}, {"touch": True}, {"is_main_process": False}):
        Rules(fake_workflow(**settings), {}).all_targets(None)
    assert calls == []  # parsing, linting, a dry run or --touch records nothing
    rules = Rules(fake_workflow(), {})
    rules.prepare()
    rules.all_targets(None)
    assert calls == []  # a job to run: onsuccess records
    rules.stale = {}
    rules.recorded = False
    targets = rules.all_targets(None)
    rules.all_targets(None)
    assert calls == [rules.jobs] and targets


def test_record_in_dvc_lets_go_of_the_lock_and_records_the_dag(project, monkeypatch):
    recorded = []
    monkeypatch.setattr(dvc_lock, "record_run", lambda checker, jobs, ran: recorded.append(ran))
    Path(".dvc").mkdir()
    dag_jobs = [
        SimpleNamespace(rule=SimpleNamespace(name="train"), wildcards_dict={"variant": "jit"}),
        SimpleNamespace(rule=SimpleNamespace(name="download"), wildcards_dict={}),
    ]
    rules = Rules(fake_workflow(dag=SimpleNamespace(jobs=dag_jobs)), {})
    rules.lock.hold()
    rules.record_in_dvc()
    assert not rules.lock.held and recorded == [{"train@jit", "download"}]
    Rules(fake_workflow(dryrun=True), {}).record_in_dvc()
    assert len(recorded) == 1
    monkeypatch.setattr(dvc_lock, "record_run", lambda checker, jobs, ran: "dvc commit failed (x)")
    with pytest.raises(SystemExit, match=r"^error: dvc commit failed \(x\)$"):
        rules.record_in_dvc()
