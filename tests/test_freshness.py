"""The content rule on tiny data, without an orchestrator: records, what makes a job stale, and the
one-line refusals a stage gives (the orchestrators' side is in test_content.py and test_sequences.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_stages, tiny_params_dict, write_params, write_raw
from mnist_jax_pipeline.artefacts.provenance import files_under
from mnist_jax_pipeline.cli import main
from mnist_jax_pipeline.config.params import load
from mnist_jax_pipeline.orchestration import freshness, stage_table
from mnist_jax_pipeline.orchestration import run as stage_run
from mnist_jax_pipeline.orchestration.jobs import Job


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """Tiny data/raw recorded as the download stage's, then the real preprocess stage."""
    write_params(tmp_path / "params.yaml", tiny_params_dict(variants=["jit"]))
    write_raw(tmp_path / "data" / "raw")
    monkeypatch.chdir(tmp_path)
    run_stages(tmp_path, ["preprocess"])
    return tmp_path


def problems(name: str, variant: str | None = None) -> list[str]:
    checker = freshness.Checker(load("params.yaml"))
    return checker.problems(Job(stage_table.get(name), variant))


def test_a_stage_records_what_it_was_made_from(project):
    record = json.loads((project / "provenance/preprocess.json").read_text())
    assert record["stage"] == "preprocess"
    assert record["params"] == {"preprocess": load("params.yaml").to_dict()["preprocess"]}
    assert "src/mnist_jax_pipeline/stages/preprocess.py" in record["code"]
    assert "data/raw/manifest.json" in record["inputs"]
    assert set(record["outputs"]) == {f"data/processed/{name}" for name in os.listdir("data/processed")}
    assert problems("preprocess") == []


def test_a_changed_parameter_output_or_input_makes_the_job_stale(project):
    raw = tiny_params_dict(variants=["jit"])
    raw["preprocess"]["seed"] = 7
    write_params(project / "params.yaml", raw)
    assert problems("preprocess") == ["data/processed: made with preprocess.seed: 0 in the record, 7 in params.yaml"]
    write_params(project / "params.yaml", tiny_params_dict(variants=["jit"]))
    (project / "data/processed/stats.json").write_text("{}")
    assert problems("preprocess") == ["data/processed/stats.json: changed since 'preprocess' wrote it"]


def test_a_record_that_is_there_but_not_the_jobs_says_so(project):
    record = project / "provenance/preprocess.json"
    record.write_text(record.read_text().replace('"stage"', '"extra": 1, "stage"', 1))  # a key no record has
    assert problems("preprocess") == [
        "data/processed: not recorded as made by 'preprocess' (provenance/preprocess.json: not a record of it)"
    ]
    record.unlink()
    assert problems("preprocess") == [
        "data/processed: not recorded as made by 'preprocess' (provenance/preprocess.json: missing)"
    ]


def test_temporary_files_are_no_change_and_a_stray_file_is(project):
    (project / "data/processed/.tmp-x.123.y").write_bytes(b"half")
    assert problems("preprocess") == []
    (project / "data/processed/extra.npy").write_bytes(b"x")
    assert problems("preprocess") == ["data/processed/extra.npy: not written by 'preprocess'"]


def test_links_are_followed_once_and_a_loop_ends(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.npy").write_bytes(b"a")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "linked").symlink_to(tmp_path / "real")  # as Snakemake's output cache links folders
    (tmp_path / "out" / "loop").symlink_to(tmp_path / "out")
    found = [p.relative_to(tmp_path).as_posix() for p in files_under(tmp_path / "out")]
    assert found == ["out/linked/a.npy", "out/loop"]


def test_a_stage_refuses_inputs_that_are_not_current_in_one_line(project, capsys):
    (project / "data/processed/train_labels.npy").write_bytes(b"\x93NUMPY")
    assert main(["train", "--variant", "jit"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: data/processed/train_labels.npy: changed since 'preprocess' wrote it; re-run 'preprocess':"
        " snakemake --cores all, or dvc repro -f -s preprocess"
    )
    assert not (project / "models").exists()


def test_a_file_no_stage_writes_in_a_folder_a_stage_replaces_is_refused_and_kept(project, capsys):
    """A folder output is replaced whole: a file of the user's in it would be lost, here or under --out."""
    shutil.copytree(project / "data/processed", project / "elsewhere")
    for argv, notes in (
        (["preprocess"], "data/processed/notes.txt"),
        (["preprocess", "--out", "elsewhere"], "elsewhere/x/n.txt"),
    ):
        (project / notes).parent.mkdir(exist_ok=True)
        (project / notes).write_text("mine")
        before = {p: p.read_bytes() for p in files_under(project / Path(notes).parts[0])}
        assert main(argv) == 1
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert error.startswith(f"error: {notes}: no stage's output, in ") and error.endswith("; move it away")
        assert {p: p.read_bytes() for p in files_under(project / Path(notes).parts[0])} == before
    record = project / "provenance/preprocess.json"
    listed = json.loads(record.read_text())
    listed["outputs"]["data/processed/notes.txt"] = "0" * 64
    record.write_text(json.dumps(listed))
    assert main(["preprocess"]) == 0  # a file its record lists is its own: pprof's views, where pprof runs


def test_outputs_from_other_parameters_or_inputs_never_replace_recorded_ones(project, capsys):
    """No record lists what a run from another parameters file or input folder makes: it may not replace what a
    record lists, and it is written where no stage takes it."""
    raw = tiny_params_dict(variants=["jit"])
    raw["preprocess"]["normalize"] = "none" if raw["preprocess"]["normalize"] != "none" else "unit"
    write_params(project / "other.yaml", raw)
    shutil.copytree(project / "data/raw", project / "raw2")
    before = {p: p.read_bytes() for p in files_under(project / "data/processed")}
    for argv, fix in (
        (["--params", "other.yaml", "preprocess"], "--out DIR"),
        (["preprocess", "--raw", "raw2"], "--out DIR"),
        (["--params", "other.yaml", "report"], "run it with params.yaml"),
    ):
        recorded = "provenance/report.json" if "report" in argv else "provenance/preprocess.json"
        if not (project / recorded).exists():
            (project / recorded).touch()  # stands for report's record: what it holds does not matter here
        assert main(argv) == 1
        line = capsys.readouterr().err.strip().splitlines()[-1]
        given = "--params other.yaml" if argv[0] == "--params" else "--raw raw2"
        assert line.startswith(f"error: {given}: ") and line.endswith(fix), line
        assert f"would replace what {recorded} lists, unrecorded; " in line, line
    assert {p: p.read_bytes() for p in files_under(project / "data/processed")} == before
    assert main(["--params", "other.yaml", "preprocess", "--out", "elsewhere"]) == 0
    assert not (project / "elsewhere/provenance").exists() and problems("preprocess") == []
    assert main(["train", "--variant", "jit", "--processed", "elsewhere", "--root", "runs/a"]) == 0
    assert not any((project / "runs/a/provenance").iterdir())  # made from other inputs: no record
    assert main(["--params", "other.yaml", "check"]) == 0  # check writes no output but its record


def test_under_a_snakemake_run_a_job_current_by_content_ends_at_once(project, capsys, monkeypatch):
    """Snakemake plans the jobs below one that runs; DVC skips those whose inputs it wrote the same."""
    assert main(["train", "--variant", "jit"]) == 0
    model, record = project / "models/jit.safetensors", project / "provenance/train_jit.json"
    before = {path: path.read_bytes() for path in (model, record)}
    monkeypatch.setenv(stage_run.CUTOFF, "1")
    assert main(["train", "--variant", "jit"]) == 0
    assert f"current by content, as {record.relative_to(project)} lists; not run again" in capsys.readouterr().err
    assert {path: path.read_bytes() for path in (model, record)} == before
    model.write_bytes(model.read_bytes() + b"x")  # not current: it runs
    assert main(["train", "--variant", "jit"]) == 0
    assert model.read_bytes() == before[model] and record.read_bytes() != before[record]


def test_a_root_a_stage_ran_in_is_its_own_again(project, capsys):
    for argv in (["train"], ["train"], ["evaluate"]):
        assert main([*argv, "--variant", "jit", "--root", "runs/a"]) == 0, capsys.readouterr().err
    assert (project / "runs/a/provenance/evaluate_jit.json").is_file()
    shutil.copytree(project / "data/processed", project / "copy")
    for _ in range(2):  # a run from other inputs writes no record, and its root is its own again too
        assert main(["train", "--variant", "jit", "--processed", "copy", "--root", "runs/b"]) == 0
    assert main(["evaluate", "--variant", "jit", "--root", "runs/c"]) == 1
    assert (
        capsys.readouterr().err.strip().endswith("re-run it: mnist-pipeline train --variant jit --root runs/c")
    )  # not a sweep's point: its own command
    (project / "theirs").mkdir()
    (project / "theirs/notes.txt").write_text("their notes\n")
    assert main(["train", "--variant", "jit", "--root", "theirs"]) == 1
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .startswith("error: --root theirs: a folder `mnist-pipeline train` did not make;")
    )
    assert sorted(p.name for p in (project / "theirs").iterdir()) == ["notes.txt"]


def test_the_tables_paths_written_another_way_are_the_pipelines_job(project):
    """`./data/raw/` is data/raw: the stage checks its inputs and records its outputs as the pipeline's job."""
    before = json.loads((project / "provenance/preprocess.json").read_text())["run"]["started"]
    assert main(["preprocess", "--raw", "./data/raw/", "--out", "data//processed/"]) == 0
    assert json.loads((project / "provenance/preprocess.json").read_text())["run"]["started"] > before
    assert problems("preprocess") == []
    assert main(["train", "--variant", "jit", "--root", "./"]) == 0  # the project root, not a sweep point's
    absolute = ["--processed", str(project / "data/processed"), "--root", str(project)]  # through a link, too
    (project / "link").symlink_to(project)
    assert main(["evaluate", "--variant", "jit", "--params", str(project / "link/params.yaml"), *absolute]) == 0
    assert problems("evaluate", "jit") == []
    assert problems("train", "jit") == []


def test_the_record_says_which_tool_ran_the_stage_when_and_what_its_checks_cost(project, monkeypatch):
    run = json.loads((project / "provenance/preprocess.json").read_text())["run"]
    assert run["tool"] == "mnist-pipeline"  # by hand: neither orchestrator's variable is set
    assert run["started"] <= run["ended"] and run["started"].endswith("Z")
    assert 0 <= run["checks_s"] < 5
    monkeypatch.setenv("DVC_STAGE", "preprocess")
    assert stage_run.running_tool() == "dvc"
    monkeypatch.setenv("MNIST_PIPELINE_LOG", "logs/preprocess.log")  # what the Snakemake rules set
    assert stage_run.running_tool() == "snakemake"


def test_a_prefetched_digest_is_the_files_digest_and_an_in_place_rewrite_is_seen(tmp_path):
    from mnist_jax_pipeline.artefacts.provenance import Hashes, file_sha256

    for index in range(5):
        (tmp_path / f"f{index}.bin").write_bytes(os.urandom(1000 * (index + 1)))
    hashes = Hashes()
    hashes.prefetch([tmp_path])
    assert hashes.tree([tmp_path]) == {p.as_posix(): file_sha256(p) for p in sorted(tmp_path.iterdir())}
    target = tmp_path / "f0.bin"
    before = target.stat()
    target.write_bytes(os.urandom(1000))  # same size; same times put back: a new process must still see it
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert Hashes().tree([target])[target.as_posix()] == file_sha256(target)


def test_a_file_of_any_size_is_hashed_to_its_sha256(tmp_path):
    import hashlib

    from mnist_jax_pipeline.artefacts.provenance import file_sha256

    for size in (0, 1, 2**20 - 1, 2**20, 3 * 2**20 + 7):
        path = tmp_path / f"f{size}"
        path.write_bytes(os.urandom(size))
        assert file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest(), size


EDIT = 'import sys\n\nprint("the edited code ran", file=sys.stderr)\n'


@pytest.mark.parametrize("target", ["orchestration/jobs.py", "stages/preprocess.py"])
def test_a_record_names_only_code_that_ran_whenever_the_code_is_edited(tmp_path, target):
    """A code file edited at each moment of a stage's life, from before the package loads to after the
    record: the record names the code that ran, or the stage refuses in one line and replaces nothing."""
    from workspace import env

    base = tmp_path / "base"
    for name in ("src", "requirements"):
        shutil.copytree(ROOT / name, base / name, ignore=shutil.ignore_patterns("__pycache__"))
    write_params(base / "params.yaml", tiny_params_dict(variants=["jit"]))
    write_raw(base / "data" / "raw")
    file = f"src/mnist_jax_pipeline/{target}"
    original = (base / file).read_bytes()
    outcomes = set()
    for delay in (0.0, 0.15, 0.3, 0.5, 0.8, 1.2, 2.0, 4.0):
        root = shutil.copytree(base, tmp_path / f"at-{delay}")
        stage = subprocess.Popen(
            ["mnist-pipeline", "preprocess"], cwd=root, env=env(root), stderr=subprocess.PIPE, text=True
        )
        time.sleep(delay)
        with open(root / file, "a", encoding="utf-8") as code:
            code.write(EDIT)
        said = stage.communicate(timeout=300)[1]
        ran = (original + EDIT.encode()) if "the edited code ran" in said else original
        record = root / "provenance" / "preprocess.json"
        if stage.returncode == 0:
            assert json.loads(record.read_text())["code"][file] == hashlib.sha256(ran).hexdigest(), (delay, said)
            outcomes.add("recorded the edited code" if ran != original else "recorded the code before the edit")
        else:
            refusal = said.strip().splitlines()[-1]
            assert "changed while 'preprocess' ran" in refusal or "made by other code" in refusal, said
            assert not record.exists() and not (root / "data" / "processed").exists(), delay
            outcomes.add("refused")
    assert {"refused", "recorded the code before the edit"} <= outcomes, outcomes
