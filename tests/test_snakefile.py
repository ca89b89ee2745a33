"""What the Snakefile calls, without a Snakemake run: Ctrl-C handling, the markers, DVC's lock and dvc.lock
in step (snakefile.py, dvc_lock.py), and the rules written from the stage table, against a stand-in for
Snakemake's workflow object."""

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

from conftest import ROOT
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.orchestration import dvc_lock, generate, run, snakefile, stage_table
from mnist_jax_pipeline.orchestration.jobs import all_jobs
from mnist_jax_pipeline.orchestration.snakefile import Pipeline

# --- Ctrl-C ---


def test_a_signal_while_snakemake_parses_stops_at_once(monkeypatch, capsys):
    monkeypatch.setattr(signal, "getsignal", lambda signum: signal.SIG_DFL)  # no scheduler yet
    with pytest.raises(SystemExit) as stopped:
        snakefile.Stopper()(signal.SIGINT, None)
    assert stopped.value.code == 130, "a stop exits as SIGINT's 128 + 2"
    assert capsys.readouterr().err == "error: stopped by SIGINT before any job started\n"


def test_a_signal_while_the_dag_is_built_stops_before_the_first_job(monkeypatch, capsys):
    monkeypatch.setattr(signal, "getsignal", lambda signum: signal.SIG_DFL)
    stopper = snakefile.Stopper()

    async def in_the_event_loop():
        stopper(signal.SIGINT, None)

    asyncio.run(in_the_event_loop())
    assert stopper.signals == [signal.SIGINT]
    with pytest.raises(SystemExit) as stopped:
        stopper.stopped_before_start()
    assert stopped.value.code == 130 and "stopped by SIGINT before any job started" in capsys.readouterr().err


def test_a_signal_while_jobs_run_asks_the_scheduler_to_stop_once(monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(signal, "getsignal", lambda signum: lambda *args: asked.append(args))
    stopper = snakefile.Stopper()
    stopper(signal.SIGINT, None)
    stopper(signal.SIGINT, None)
    deadline = time.monotonic() + 5
    while len(asked) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert asked == [(signal.SIGTERM, None)] * 2
    assert capsys.readouterr().err.count("SIGINT: stopping; the running jobs stop and clean up") == 1
    snakefile.Stopper().stopped_before_start()  # none received: no stop


@pytest.mark.parametrize("nohup", [False, True])
def test_the_stopper_handles_ctrl_c_and_a_closed_terminal_unless_it_is_ignored(nohup):
    """`nohup snakemake ...` starts with SIGHUP ignored: a closed terminal must not stop the run."""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGHUP)}
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN if nohup else signal.SIG_DFL)
        stopper = snakefile.Stopper()
        assert signal.getsignal(signal.SIGINT) is stopper
        assert signal.getsignal(signal.SIGHUP) is (signal.SIG_IGN if nohup else stopper)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


# --- the markers ---


def test_a_stale_marker_gets_new_content_and_a_time_after_the_outputs(tmp_path):
    output = tmp_path / "out.bin"
    output.write_bytes(b"x")
    future = time.time() + 1000
    os.utime(output, (future, future))
    marker = tmp_path / "m" / "train_jit.json"
    snakefile.mark_one(marker, ["params.yaml: train.step_size changed"], [output])
    first = marker.read_text()
    assert first.startswith("params.yaml: train.step_size changed\n")
    assert marker.stat().st_mtime >= future + 1
    snakefile.mark_one(marker, ["params.yaml: train.step_size changed"], [output])
    assert marker.read_text() != first  # new content each time


def test_a_marker_without_outputs_is_the_same_in_every_checkout(tmp_path):
    marker = tmp_path / "m"
    snakefile.mark_one(marker, ["no record"], [tmp_path / "absent"])
    assert marker.read_text() == "missing\n"


def test_a_current_marker_gets_the_oldest_time(tmp_path):
    marker = tmp_path / "m"
    snakefile.mark_one(marker, None, [])
    assert marker.read_text() == "current\n" and marker.stat().st_mtime == 0
    marker.write_text("stale before\n")
    snakefile.mark_one(marker, [], [])
    assert marker.read_text() == "stale before\n" and marker.stat().st_mtime == 0


def test_mark_gives_records_an_old_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    jobs = all_jobs(("jit",))
    train = next(job for job in jobs if job.name == "train@jit")
    train.record_path.parent.mkdir(parents=True, exist_ok=True)
    train.record_path.write_text("{}")
    snakefile.mark(jobs, {train: ["no model"]})
    assert snakefile.marker(train).read_text().startswith("no model\n")  # its record is there
    others = [job for job in jobs if job is not train]
    assert all(snakefile.marker(job).stat().st_mtime == 0 for job in others)
    assert train.record_path.stat().st_mtime == 1  # records link the jobs; their time runs none (absent ones: no error)


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


def test_commit_current_commits_the_current_jobs_and_names_the_others(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    jobs = all_jobs(("jit",))
    committed, remembered = [], []
    monkeypatch.setattr(dvc_lock, "commit", lambda names: committed.append(names))
    monkeypatch.setattr(dvc_lock, "remember", lambda jobs: remembered.append(jobs))
    ran = {"check", "download", "train@jit", "evaluate@jit"}
    checker = FakeChecker({"train@jit": ["params.yaml: train.epochs changed"], "evaluate@jit": ["no record"]})
    assert dvc_lock.commit_current(checker, jobs, ran) is None
    assert committed == [["check", "download"]]
    line = capsys.readouterr().err
    assert line == (
        "dvc.lock: train@jit not recorded, not current: params.yaml: train.epochs changed (and evaluate@jit)\n"
    )
    assert remembered == []  # not every job is current
    everything = {job.name for job in jobs}
    assert dvc_lock.commit_current(FakeChecker({}), jobs, everything) is None
    assert remembered == [jobs]
    failed = "dvc.lock was not updated, DVC says: x; fix x"
    monkeypatch.setattr(dvc_lock, "commit", lambda names: failed)
    assert dvc_lock.commit_current(FakeChecker({}), jobs, everything) == f"the jobs succeeded, but {failed}"
    assert dvc_lock.commit_current(FakeChecker({}), jobs, everything, succeeded=False) == failed


def test_a_run_after_a_failure_names_nothing_it_did_not_record(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(dvc_lock, "commit", lambda names: None)
    checker = FakeChecker({"train@jit": ["no record"]})
    dvc_lock.commit_current(checker, all_jobs(("jit",)), {"train@jit"}, succeeded=False)
    assert capsys.readouterr().err == ""  # the failure itself says why


def test_committing_needs_a_dvc_project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert not dvc_lock.committing()
    Path(".dvc").mkdir()
    assert dvc_lock.committing()


# --- the pipeline the Snakefile reads ---


def fake_workflow(**settings) -> SimpleNamespace:
    """What Pipeline reads of Snakemake's workflow object."""
    values = {
        "workflow_settings": SimpleNamespace(cache=None),
        "output_settings": SimpleNamespace(verbose=False),
        "cores": 2,
        "dryrun": False,
        "touch": False,
        "executor_plugin": object(),
        "is_main_process": True,
        "dag": SimpleNamespace(jobs=[], needrun_jobs=list),
        "dag_settings": SimpleNamespace(forceall=False, forcerun=frozenset(), forcetargets=False),
    }
    return SimpleNamespace(**(values | settings))


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(run.ORCHESTRATOR, "")  # what Pipeline sets goes after the test
    monkeypatch.setenv(run.CUTOFF, "")
    return tmp_path


def test_a_run_that_forces_no_job_lets_a_job_current_by_content_end_at_once(project, monkeypatch):
    monkeypatch.setattr(snakefile.dvc_lock.RepositoryLock, "hold", lambda self: None)
    Pipeline(fake_workflow(), {}).start(SimpleNamespace(stopped_before_start=lambda: None))
    assert os.environ[run.CUTOFF] == "1"
    forced = SimpleNamespace(forceall=False, forcerun={"train"}, forcetargets=False)
    Pipeline(fake_workflow(dag_settings=forced), {}).start(
        SimpleNamespace(stopped_before_start=lambda: None)
    )  # snakemake -R train
    assert os.environ[run.CUTOFF] == ""


def test_an_override_or_a_bad_parameter_stops_before_any_job(project):
    with pytest.raises(SystemExit, match="overrides are not used by the stages"):
        Pipeline(fake_workflow(), {"train": {"epochs": 1}})
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["train"]["epochs"] = "many"
    (project / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SystemExit) as stopped:
        Pipeline(fake_workflow(), {})
    assert str(stopped.value).startswith("error: params.yaml") and "train.epochs" in str(stopped.value)


def test_the_rules_are_the_stage_table(monkeypatch):
    """Each stage's rule names its marker, the records it reads, its files (ancient) and its outputs literally."""
    monkeypatch.chdir(ROOT)
    train = (ROOT / "workflow/rules/train.smk").read_text()
    rule = train[train.index("rule train:") : train.index("rule evaluate:")]
    marker = rule.index('".snakemake/provenance/train_{variant}.json"')
    assert marker < rule.index('"provenance/preprocess.json"') < rule.index('ancient("data/processed/stats.json")')
    for artefact in stage_table.get("train").outputs:
        assert f'update("{artefact.path}")' in rule
    assert 'shell:\n        "MNIST_PIPELINE_LOG={log:q} mnist-pipeline train --variant {wildcards.variant}"' in rule
    assert generate.stale() == []


def test_the_pipeline_names_what_the_rules_read(project):
    pipeline = Pipeline(fake_workflow(), {})
    assert pipeline.variants == tuple(pipeline.params.variants) == ("nojit", "jit")
    assert pipeline.cache is False
    assert Pipeline(fake_workflow(workflow_settings=SimpleNamespace(cache=[])), {}).cache == "omit-software"
    key = pipeline.cache_key("preprocess")
    assert key["values"] == {"preprocess": pipeline.params.to_dict()["preprocess"]}
    assert key["code"] == pipeline.checker.code(stage_table.get("preprocess"))
    targets = pipeline.targets(None)
    assert "models/jit.safetensors" in targets and "data/raw/arrays" in targets and "provenance/report.json" in targets


def test_the_pipeline_names_itself_to_its_jobs(project):
    Pipeline(fake_workflow(), {})
    assert os.environ[run.ORCHESTRATOR] == run.identity(os.getpid())


def test_every_job_is_marked_and_the_sweep_points_lock_follows_the_cores(project):
    pipeline = Pipeline(fake_workflow(cores=1), {})
    assert set(pipeline.stale) == set(pipeline.jobs)  # nothing ran here
    assert all(snakefile.marker(job).read_text() == "missing\n" for job in pipeline.jobs)
    assert pipeline.point_lock == ""  # --cores 1: each point takes the timing lock
    assert Pipeline(fake_workflow(cores=4), {}).point_lock == "MNIST_PIPELINE_LOCK=off "


def test_a_file_where_an_output_folder_belongs_stops_the_run(project):
    Path("models").write_text("not a folder")
    with pytest.raises(SystemExit, match=r"^error: .*models"):
        Pipeline(fake_workflow(), {})


@pytest.mark.parametrize("text", ["grid: [\n", "grid: &a {train.epochs: [*a]}\n"])
def test_an_invalid_sweep_file_fails_the_sweeps_target_only(project, capsys, text):
    Path("sweeps").mkdir()
    Path("sweeps/bad.yaml").write_text(text)
    pipeline = Pipeline(fake_workflow(), {})
    assert pipeline.sweep_errors and "warning: " in capsys.readouterr().err
    command = pipeline.sweeps_command()
    assert command.endswith(">&2; exit 1") and "sweeps/bad.yaml" in command
    assert "{" not in command.replace("{{", "").replace("}}", "")  # no Snakemake placeholder left
    with pytest.raises(SystemExit, match=r"^error: sweeps/bad.yaml: "):  # its page named as the target
        pipeline.sweep_files(SimpleNamespace(sweep="bad"))


def test_a_sweep_points_rules(monkeypatch):
    monkeypatch.chdir(ROOT)
    rules = (ROOT / "workflow/rules/sweep.smk").read_text()
    rule = rules[rules.index("rule sweep_evaluate:") :]
    assert 'params="sweeps/{sweep}/{point}/params.yaml"' in rule
    assert '"sweeps/{sweep}/{point}/provenance/train_{variant}.json"' in rule  # its own point's train
    assert '"provenance/preprocess.json"' in rule  # the shared preprocess
    assert "POINT_LOCK" in rule and "--root sweeps/{wildcards.sweep}/{wildcards.point:q}" in rule


def test_the_hand_written_sweep_rules_name_the_tables_paths():
    rules = (ROOT / "workflow/rules/sweep_common.smk").read_text()
    point = "sweeps/{sweep}/{point}"
    assert f'"{paths.MARKERS}/{point}/params",' in rules
    assert f'update("{point}/{paths.PARAMS}"),' in rules
    assert f'"{paths.MARKERS}/sweeps/{{sweep}}/{paths.COMPARE_HTML}",' in rules
    for name in (paths.COMPARE_HTML, paths.COMPARE_CSV, paths.COMPARE_RECORD):
        assert f'update("sweeps/{{sweep}}/{name}"),' in rules
    assert 'include: "workflow/rules/sweep_common.smk"' in (ROOT / "Snakefile").read_text()


def test_a_run_with_nothing_to_run_brings_dvc_lock_up_to_date_once(project, monkeypatch):
    calls = []
    monkeypatch.setattr(dvc_lock, "bring_up_to_date", lambda jobs: calls.append(jobs))
    Path(".dvc").mkdir()
    for settings in ({"executor_plugin": None}, {"dryrun": True}, {"touch": True}, {"is_main_process": False}):
        Pipeline(fake_workflow(**settings), {}).targets(None)
    assert calls == []  # parsing, linting, a dry run or --touch records nothing
    pipeline = Pipeline(fake_workflow(), {})
    pipeline.targets(None)
    assert calls == []  # a job to run: onsuccess records
    pipeline.stale = {}
    targets = pipeline.targets(None)
    pipeline.targets(None)
    assert calls == [pipeline.jobs] and targets


def test_finish_lets_go_of_the_lock_and_commits_the_dag(project, monkeypatch):
    committed = []
    monkeypatch.setattr(dvc_lock, "commit_current", lambda checker, jobs, ran, ok: committed.append((ran, ok)))
    Path(".dvc").mkdir()
    dag_jobs = [
        SimpleNamespace(rule=SimpleNamespace(name="train"), wildcards_dict={"variant": "jit"}),
        SimpleNamespace(rule=SimpleNamespace(name="download"), wildcards_dict={}),
    ]
    pipeline = Pipeline(fake_workflow(dag=SimpleNamespace(jobs=dag_jobs, needrun_jobs=list)), {})
    before = signal.getsignal(signal.SIGINT)
    try:
        pipeline.start(SimpleNamespace(stopped_before_start=lambda: None))
    finally:
        signal.signal(signal.SIGINT, before)
    assert pipeline.lock.held
    pipeline.finish(succeeded=False)
    assert not pipeline.lock.held and committed == [({"train@jit", "download"}, False)]
    Pipeline(fake_workflow(dryrun=True), {}).finish(succeeded=True)
    assert len(committed) == 1
    monkeypatch.setattr(dvc_lock, "commit_current", lambda *args: "dvc commit failed (x)")
    with pytest.raises(SystemExit, match=r"^error: dvc commit failed \(x\)$"):
        pipeline.finish(succeeded=True)


@pytest.mark.slow
def test_a_dry_run_in_a_path_with_a_space_and_non_ascii_characters(tmp_path):
    import subprocess

    from workspace import env, make_workspace

    ws = make_workspace(tmp_path / "x y", "prøject ü")
    done = subprocess.run(["snakemake", "-n", "--cores", "1"], cwd=ws, env=env(ws), capture_output=True, text=True)
    said = done.stdout + done.stderr
    assert done.returncode == 0 and "would run train@jit" in said and "Traceback" not in said, said[-3000:]


@pytest.mark.parametrize("text", ["[1, 2]\n", "train: [\n", "train: !!set {a}\n", ""])
def test_a_sweep_points_params_that_is_no_mapping_marks_the_point_stale(project, text):
    Path("sweeps").mkdir()
    Path("sweeps/s.yaml").write_text("variant: jit\ngrid:\n  train.epochs: [1]\n")
    pipeline = Pipeline(fake_workflow(), {})
    sweep = pipeline.sweeps["s"]
    folder = sweep.folder(sweep.points[0])
    folder.mkdir(parents=True)
    (folder / "params.yaml").write_text(text)
    pipeline.mark_sweeps()
    assert "not the sweep's point" in (snakefile.MARKERS / folder / "params").read_text()
