"""Sweeps on tiny data, under both tools: the shared stages run once, re-running does nothing, a new
point runs alone, and the comparison page lists the numbers the runs wrote."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, write_raw
from mnist_jax_pipeline.cli import main
from mnist_jax_pipeline.config.sweeps import load, point_name
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.orchestration.experiment_queue import dvc_commands
from workspace import make_workspace, planned_rules, sh

pytestmark = pytest.mark.slow
SWEEP = {"variant": "jit", "grid": {"train.step_size": [0.05, 0.1]}}
POINTS = ["step_size=0.05", "step_size=0.1"]


def tiny_workspace(parent: Path, name: str) -> Path:
    """A fresh copy of the repository whose download stage has tiny synthetic data in place."""
    ws = make_workspace(
        parent, name, fast=False, **{"model.layer_sizes": [784, 32, 10], "train.epochs": 2, "variants": ["jit"]}
    )
    write_raw(ws / paths.RAW.path)
    for folder in paths.RAW.folders:
        (ws / paths.RAW.path / folder).mkdir(exist_ok=True)
    for example in (ws / "sweeps").glob("*.yaml"):  # the repository's own sweeps: not this test's
        example.unlink()
    (ws / "sweeps" / "tiny.yaml").write_text(yaml.safe_dump(SWEEP))
    sh(ws, "git", "add", "-A")
    sh(ws, "git", "commit", "-qm", "tiny data and a sweep")
    return ws


def ran(output: str) -> dict[str, int]:
    """Snakemake's job counts of a run (its console's plan line)."""
    return planned_rules(output)


def test_point_names_and_the_dvc_commands(tmp_path):
    (tmp_path / "s.yaml").write_text(
        yaml.safe_dump(
            {
                "variant": "jit",
                "grid": {"train.optimizer": ["sgd", "adam"], "model.layer_sizes": [[784, 64, 10]]},
                "points": [{"train.step_size": 0.5}],
            },
            sort_keys=False,
        )
    )
    sweep = load(tmp_path / "s.yaml", Path(__file__).resolve().parents[1] / "params.yaml")
    assert [p.name for p in sweep.points] == [
        "layer_sizes=784x64x10,optimizer=sgd",
        "layer_sizes=784x64x10,optimizer=adam",
        "step_size=0.5",
    ]
    assert point_name({"model.seed": 1, "train.shuffle_seed": 2}) == "seed=1,shuffle_seed=2"
    assert point_name({"model.seed": 1, "preprocess.seed": 2}) == "model.seed=1,preprocess.seed=2"
    (name, first), *_ = dvc_commands(sweep).items()
    assert name == "s-layer_sizes=784x64x10,optimizer=sgd"
    assert first[:6] == ["dvc", "exp", "run", "--queue", "--name", name]
    assert first[6:] == [
        "-S",
        "model.layer_sizes=[784, 64, 10]",
        "-S",
        'train.optimizer="sgd"',
        "-S",
        'variants=["jit"]',
    ]


def test_the_same_settings_make_the_same_point(tmp_path):
    """Key order and the way a value is written do not change a point's name (and its folder)."""
    params = Path(__file__).resolve().parents[1] / "params.yaml"
    (tmp_path / "a.yaml").write_text("grid:\n  train.step_size: [1, 0.5]\n  train.momentum: [0.9]\n")
    (tmp_path / "b.yaml").write_text("grid:\n  train.momentum: [0.9]\n  train.step_size: [1.0, 0.5]\n")
    a, b = load(tmp_path / "a.yaml", params), load(tmp_path / "b.yaml", params)
    assert (
        [p.name for p in a.points]
        == [p.name for p in b.points]
        == ["momentum=0.9,step_size=1.0", "momentum=0.9,step_size=0.5"]
    )
    (tmp_path / "c.yaml").write_text("points:\n  - {train.step_size: 1}\n  - {train.step_size: 1.0}\n")
    with pytest.raises(PipelineError, match="points 'step_size=1.0' and 'step_size=1.0' give the same parameters"):
        load(tmp_path / "c.yaml", params)


def test_a_long_point_name_is_cut_and_stays_unique():
    changes = {f"train.key{i}": "x" * 20 for i in range(10)}
    name = point_name(changes)
    assert len(name) <= 100 and name != point_name({**changes, "train.key9": "y" * 20})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"grid": {"preprocess.seed": [1, 2]}}, "'preprocess.seed' cannot vary in a sweep"),
        ({"grid": {"train.epochs": [1.5]}}, "point epochs=1.5: train.epochs: 1.5 is not an integer"),
        ({"grid": {"train.lr": [1]}}, "unknown key 'train.lr'"),
        ({"grid": {}}, "no point; give a grid or points"),
        ({"variant": "fast", "grid": {"train.epochs": [1]}}, "variant: input should be"),
        ({"points": [{"train": {"epochs": 1}}]}, "'train' is a section; write each change as a dotted key"),
        ({"grid": {"train.step_size.foo": [1]}}, "train.step_size is a value, not a section"),
        (["train.epochs"], "a sweep file is a mapping of 'variant', 'grid' and 'points'"),
    ],
)
def test_a_bad_sweep_file_is_one_line_naming_it(tmp_path, spec, message):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(PipelineError, match=re.escape(message)) as err:
        load(tmp_path / "bad.yaml", Path(__file__).resolve().parents[1] / "params.yaml")
    assert str(err.value).startswith(str(tmp_path / "bad.yaml")) and "\n" not in str(err.value)


def test_two_points_that_give_the_same_parameters_are_refused(tmp_path):
    """`{}` is params.yaml's values: a point that sets a key to the value it has there is the same point."""
    params = Path(__file__).resolve().parents[1] / "params.yaml"
    epochs = yaml.safe_load(params.read_text())["train"]["epochs"]
    (tmp_path / "same.yaml").write_text(yaml.safe_dump({"points": [{}, {"train.epochs": epochs}]}))
    with pytest.raises(PipelineError) as err:
        load(tmp_path / "same.yaml", params)
    assert str(err.value) == (
        f"{tmp_path / 'same.yaml'}: points 'base' and 'epochs={epochs}' give the same parameters; list one"
    )
    (tmp_path / "same.yaml").write_text("points: [{train.label_smoothing: 0.0}, {train.label_smoothing: -0.0}]\n")
    with pytest.raises(PipelineError, match="points 'label_smoothing=0.0' and 'label_smoothing=-0.0' give the same"):
        load(tmp_path / "same.yaml", params)
    (tmp_path / "same.yaml").write_text(yaml.safe_dump({"points": [{}, {}]}))
    with pytest.raises(PipelineError, match="points 'base' and 'base' give the same parameters"):
        load(tmp_path / "same.yaml", params)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("my sweep.yaml", "cannot name a sweep"),
        ("a..b.yaml", "cannot name a sweep"),  # DVC refuses it in an experiment's name
        ("t.yaml.yaml", "cannot name a sweep"),  # its folder would be the sweep file sweeps/t.yaml
        ("t.lock.yaml", "cannot name a sweep"),
        ("t..yaml", "cannot name a sweep"),
        ("s.yml", "a sweep file is named NAME.yaml"),
        ("none.yaml", "missing; name a sweep that exists"),
    ],
)
def test_a_sweep_file_name_is_checked(tmp_path, name, message):
    if name != "none.yaml":
        (tmp_path / name).write_text("grid:\n  train.epochs: [1]\n")
    with pytest.raises(PipelineError, match=re.escape(message)):
        load(tmp_path / name, Path(__file__).resolve().parents[1] / "params.yaml")


@pytest.mark.parametrize("kind", ["an unknown key", "a named pipe"])
def test_a_bad_sweep_file_fails_the_sweeps_target_only(tmp_path, kind):
    ws = tiny_workspace(tmp_path, "bad")
    (ws / "sweeps" / "tiny.yaml").unlink()
    broken = ws / "sweeps" / "broken.yaml"
    if kind == "a named pipe":  # with no writer: read as empty, not waited on
        os.mkfifo(broken)
    else:
        broken.write_text("grid:\n  train.lr: [1]\n")
    warning = [line for line in sh(ws, "snakemake", "--dry-run", "--cores", "1").splitlines() if "warning:" in line]
    assert len(warning) == 1 and "sweeps/broken.yaml" in warning[0], warning
    expected = "unknown key 'train.lr'" if kind == "an unknown key" else "a sweep file is a mapping"
    assert expected in warning[0], warning
    done = subprocess.run(["snakemake", "--cores", "1", "sweeps"], cwd=ws, capture_output=True, text=True)
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("error: ")]
    assert done.returncode != 0 and len(errors) == 1 and "sweeps/broken.yaml" in errors[0]


def test_snakemake_runs_the_points_sharing_the_upstream(tmp_path):
    ws = tiny_workspace(tmp_path, "snake")
    first = sh(ws, "snakemake", "--cores", "2", "sweeps")
    jobs = ran(first)
    # the points ran side by side, and every line of theirs says which point it is from
    said = [line[9:] for line in first.splitlines() if re.match(r"\d\d:\d\d:\d\d (?:INFO|WARNING) ", line)]
    of_points = [line for line in said if "epoch" in line or "test accuracy" in line]
    assert len(of_points) == len(POINTS) * 3, first  # two epochs and an evaluation each
    assert len(set(said)) == len(said), first
    for point in POINTS:
        assert sum(f"@jit [tiny/{point}] " in line for line in of_points) == 3, first
    assert jobs.get("download", 0) == 0 and jobs["preprocess"] == 1
    assert jobs["sweep_train"] == jobs["sweep_evaluate"] == 2 and jobs["sweep_compare"] == 1
    for point in POINTS:
        assert (ws / "sweeps" / "tiny" / point / paths.MODEL.at("jit")).is_file()
    assert "Nothing to be done" in sh(ws, "snakemake", "--cores", "2", "sweeps")
    assert "Nothing to be done" in sh(ws, "snakemake", "--cores", "1", "sweeps")  # the lock choice re-runs nothing
    spec = {**SWEEP, "points": [{"train.step_size": 0.2}]}
    (ws / "sweeps" / "tiny.yaml").write_text(yaml.safe_dump(spec))
    jobs = ran(sh(ws, "snakemake", "--cores", "1", "sweeps"))
    assert jobs == {"sweep_point": 1, "sweep_train": 1, "sweep_evaluate": 1, "sweep_compare": 1}

    def timing_lock(point: str) -> str:
        return json.loads((ws / "sweeps" / "tiny" / point / paths.TRAIN_RUN.at("jit")).read_text())["timing_lock"]

    # side by side with --cores 2; with the machine's lock with --cores 1
    assert timing_lock(POINTS[0]) == "off" and timing_lock("step_size=0.2") == "held"
    rows = (ws / "sweeps" / "tiny" / paths.COMPARE_CSV).read_text().splitlines()
    assert len(rows) == 4 and rows[0].startswith("name,test_accuracy")
    best = rows[1].split(",")
    accuracy = json.loads((ws / "sweeps" / "tiny" / best[0].strip('"') / paths.EVAL_METRICS.at("jit")).read_text())[
        "test_accuracy"
    ]
    assert float(best[1]) == accuracy
    html = (ws / "sweeps" / "tiny" / paths.COMPARE_HTML).read_text()
    assert html.count("data:image/png;base64,") == 2 and "<script" not in html
    assert "train.step_size" in html and "train.epochs" not in html  # only what differs
    # the page and table are trusted for what their record says, not their time; a file compare did not make stays
    table = ws / "sweeps" / "tiny" / paths.COMPARE_CSV
    table.write_text(table.read_text() + "edited,1\n")
    assert ran(sh(ws, "snakemake", "--dry-run", "--cores", "1", "sweeps")) == {"sweep_compare": 1}
    (ws / "sweeps" / "tiny" / paths.COMPARE_HTML).write_text("my notes\n")
    done = subprocess.run(["snakemake", "--cores", "1", "sweeps"], cwd=ws, capture_output=True, text=True)
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("error: ")]
    assert (
        done.returncode != 0
        and len(errors) == 1
        and errors[0].endswith(
            "did not make; `mnist-pipeline compare` writes only a new path or one it made itself: move it away"
        )
    ), errors
    assert (ws / "sweeps" / "tiny" / paths.COMPARE_HTML).read_text() == "my notes\n"
    assert table.read_text().endswith("edited,1\n")  # a failed compare leaves the earlier table in place
    (ws / "sweeps" / "tiny" / paths.COMPARE_HTML).unlink()
    assert ran(sh(ws, "snakemake", "--cores", "1", "sweeps")) == {"sweep_compare": 1}
    assert "edited" not in table.read_text()
    for mine in (table, ws / "sweeps" / "tiny" / paths.COMPARE_RECORD):  # one beside the page compare did not make
        kept = mine.read_bytes()
        mine.write_text("mine\n")
        done = subprocess.run(["mnist-pipeline", "compare", "--sweep", "tiny"], cwd=ws, capture_output=True, text=True)
        assert done.returncode == 1 and done.stderr.count("error: ") == 1, done.stderr
        assert f"error: {mine.relative_to(ws)}: a file `mnist-pipeline compare` did not make" in done.stderr
        assert mine.read_text() == "mine\n"
        mine.write_bytes(kept)
    assert "Nothing to be done" in sh(ws, "snakemake", "--cores", "1", "sweeps")
    # a page elsewhere leaves the sweep's own page, table and record as they are
    before = {p: p.read_bytes() for p in (ws / "sweeps" / "tiny").iterdir() if p.is_file()}
    sh(ws, "mnist-pipeline", "compare", "--sweep", "tiny", "--out", "elsewhere.html")
    assert "step_size=0.2" in (ws / "elsewhere.html").read_text()
    assert {p: p.read_bytes() for p in (ws / "sweeps" / "tiny").iterdir() if p.is_file()} == before
    assert "Nothing to be done" in sh(ws, "snakemake", "--cores", "1", "sweeps")
    code = ws / paths.CODE / "comparison/compare.py"  # the page is made by the checkout's code
    code.write_text(code.read_text() + "# edited\n")
    assert ran(sh(ws, "snakemake", "--dry-run", "--cores", "1", "sweeps")) == {"sweep_compare": 1}
    code.write_text(code.read_text().removesuffix("# edited\n"))
    # by hand, a page is drawn of current points only: an edited output or sweep is one line, the page kept
    page, point = (ws / "sweeps" / "tiny" / paths.COMPARE_HTML).read_bytes(), ws / "sweeps" / "tiny" / "step_size=0.2"
    metrics = point / paths.EVAL_METRICS.at("jit")
    metrics.write_text(metrics.read_text().replace('"test_accuracy": ', '"test_accuracy": 1'))
    (ws / "sweeps" / "other.yaml").write_text(yaml.safe_dump({**spec, "points": [{"train.step_size": 0.3}]}))
    for name, stale in (("tiny", f"{metrics.relative_to(ws)}: changed since 'evaluate@jit' wrote it"), ("other", "")):
        done = subprocess.run(["mnist-pipeline", "compare", "--sweep", name], cwd=ws, capture_output=True, text=True)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert stale in done.stderr and done.stderr.endswith(
            f"run the sweep's points first: snakemake --cores all sweeps/{name}/compare.html\n"
        )
    assert re.search(r"error: sweeps/other/step_size=[0-9.]+/models/jit.safetensors: missing", done.stderr)
    assert (ws / "sweeps" / "tiny" / paths.COMPARE_HTML).read_bytes() == page
    assert not (ws / "sweeps" / "other").exists()


def test_dvc_queues_the_points_sharing_the_upstream(tmp_path):
    ws = tiny_workspace(tmp_path, "dvc")
    sh(ws, "dvc", "commit", "--force", "--quiet", "download")  # the tiny data stands for the download
    sh(ws, "dvc", "repro", "preprocess")
    sh(ws, "git", "add", "-A")
    sh(ws, "git", "commit", "-qm", "shared stages recorded")
    sh(ws, "mnist-pipeline", "sweep-queue", "--file", "sweeps/tiny.yaml")
    first = sh(ws, "dvc", "exp", "run", "--run-all", "--jobs", "1")
    assert "Running stage 'download'" not in first and "Running stage 'preprocess'" not in first
    assert first.count("Running stage 'train@jit'") == 2
    shown = json.loads(sh(ws, "dvc", "exp", "show", "--json").strip().splitlines()[-1])
    names = {
        rev.get("name") or exp.get("name")
        for base in shown
        for exp in base.get("experiments") or []
        for rev in exp.get("revs") or []
    }
    assert {f"tiny-{point}" for point in POINTS} <= names
    sh(ws, "mnist-pipeline", "compare", "--dvc")
    html = (ws / paths.EXPERIMENTS_HTML).read_text()
    assert all(f"tiny-{point}" in html for point in POINTS)
    again = sh(ws, "mnist-pipeline", "sweep-queue", "--file", "sweeps/tiny.yaml")
    assert again.count("already an experiment of this commit; not queued again") == 2 and "queued 0" in again
    spec = {**SWEEP, "points": [{"train.step_size": 0.2}]}
    (ws / "sweeps" / "tiny.yaml").write_text(yaml.safe_dump(spec))
    assert "queued 1 experiment" in sh(ws, "mnist-pipeline", "sweep-queue", "--file", "sweeps/tiny.yaml")
    third = sh(ws, "dvc", "exp", "run", "--run-all", "--jobs", "1")
    assert third.count("Running stage 'train@jit'") == 1 and "Running stage 'preprocess'" not in third


def test_every_run_of_a_large_sweep_has_its_own_look():
    from matplotlib.colors import to_hex

    from mnist_jax_pipeline.comparison.compare import look

    assert len({(to_hex(look(i)["color"]), look(i)["marker"]) for i in range(40)}) == 40


def test_a_base_changed_since_the_points_were_made_queues_nothing(tmp_path, monkeypatch, capsys):
    """A point's name leaves out the base: after an uncommitted edit of params.yaml, the experiment of that name
    holds the old base, so sweep-queue asks for the commit that starts the points afresh."""
    from mnist_jax_pipeline.cli import main
    from mnist_jax_pipeline.orchestration import experiment_queue

    bin_dir, log = tmp_path / "bin", tmp_path / "dvc-calls.log"
    bin_dir.mkdir()
    names = " ".join(f"tiny-{point}" for point in POINTS)
    (bin_dir / "dvc").write_text(f"""#!/bin/sh
case "$1 $2" in
  "status --json") echo '{{}}' ;;
  "exp list") echo "{names}" ;;
  *) echo "$@" >> {log} ;;
esac
""")
    (bin_dir / "dvc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(experiment_queue, "_in_queue", dict)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(SWEEP))
    shutil.copy(Path(__file__).resolve().parents[1] / "params.yaml", tmp_path / "params.yaml")
    for command in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "0"]):
        sh(tmp_path, "git", *command)
    assert main(["sweep-queue", "--file", "tiny.yaml"]) == 0  # committed: the experiments are of this base
    skipped = capsys.readouterr().err
    assert skipped.count("already an experiment of this commit; not queued again") == len(POINTS)
    assert all(f"tiny-{point}: already" in skipped and f"dvc exp remove tiny-{point})" in skipped for point in POINTS)
    params = tmp_path / "params.yaml"
    params.write_text(params.read_text().replace("seed: 0 ", "seed: 1 ", 1))
    assert main(["sweep-queue", "--file", "tiny.yaml"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: params.yaml: changed since the last commit"), err
    assert not log.exists()  # no `dvc exp run --queue`


@pytest.mark.parametrize("failing", ["exp list", "status --json"])
def test_a_failed_dvc_command_queues_nothing_and_says_why(tmp_path, monkeypatch, capsys, failing):
    """Without DVC's list of experiments every point would look new, and a `dvc status` that fails (a DVC
    command holds the lock) says nothing of the shared stages: sweep-queue stops in one line with DVC's reason."""
    from mnist_jax_pipeline.cli import main
    from mnist_jax_pipeline.orchestration import experiment_queue

    bin_dir, log = tmp_path / "bin", tmp_path / "dvc-calls.log"
    bin_dir.mkdir()
    (bin_dir / "dvc").write_text(f"""#!/bin/sh
case "$1 $2" in
  "{failing}") echo "ERROR: unexpected error - the experiments ref is broken" >&2; exit 251 ;;
  "status --json") echo '{{}}' ;;
  "exp list") echo "" ;;
  *) echo "$@" >> {log} ;;
esac
""")
    (bin_dir / "dvc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(experiment_queue, "_in_queue", dict)  # DVC's queue: empty
    monkeypatch.chdir(tmp_path)
    sh(tmp_path, "git", "init", "-q")
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(SWEEP))
    params = Path(__file__).resolve().parents[1] / "params.yaml"
    assert main(["--params", str(params), "sweep-queue", "--file", "tiny.yaml"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: `dvc {failing}"), err
    assert "experiments ref is broken" in err[0] and "nothing was done" in err[0]
    assert not log.exists()  # no `dvc exp run --queue`


@pytest.mark.parametrize("name", ["step_size/", "../presets/quick", "/etc/passwd", ".hidden", "a..b"])
def test_a_sweep_option_that_is_no_sweep_name_is_one_line(tmp_path, monkeypatch, capsys, name):
    """`--sweep` takes a NAME of sweeps/NAME.yaml, never a path to another file."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    for argv in (["compare", "--sweep", name], ["sweep-point", "--sweep", name, "--point", "p"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "not a sweep's name; give the NAME of a file sweeps/NAME.yaml" in err, err
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "reports").exists()


def test_sweep_queue_given_a_folder_says_it_is_a_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "sweeps").mkdir()
    assert main(["sweep-queue", "--file", "sweeps"]) == 1
    assert "sweeps: is a folder, not a file" in capsys.readouterr().err
