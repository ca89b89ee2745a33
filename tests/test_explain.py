"""`mnist-pipeline explain PATH`: which job made a file, from what, and whether it is current.

The fast tests map paths to jobs and check the one-line refusals; the slow ones explain the outputs of
one `snakemake --cores all` and one `dvc repro` (real MNIST, fast settings, one variant), which must
give the same answer apart from the tool and time, then a stale, an edited and a sweep point's file.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conftest import mirror_dir, run_stages, tiny_params_dict, write_params
from mnist_jax_pipeline.artefacts.provenance import file_sha256
from mnist_jax_pipeline.cli import main
from mnist_jax_pipeline.orchestration.explain import find_job, short
from workspace import copy_workspace, downloaded, make_workspace, set_params, sh

SETTINGS = {"variants": ["jit"], "model.layer_sizes": [784, 64, 10], "profile.trace_steps": 1}
POINT = "sweeps/lr/step_size=0.02"


def explained(
    root: Path, path: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, status: int = 0
) -> list[str]:
    """What `mnist-pipeline explain PATH` prints, run in `root`."""
    monkeypatch.chdir(root)
    assert main(["explain", path]) == status
    captured = capsys.readouterr()
    return (captured.out if status == 0 else captured.err).splitlines()


def line(lines: list[str], label: str) -> str:
    """The line of a label (`current`, `file`, ...), without it."""
    found = [text.split(label, 1)[1].strip() for text in lines if text.startswith(f"  {label} ")]
    assert len(found) == 1, lines
    return found[0]


# --- fast: paths to jobs, and the refusals ---


@pytest.mark.parametrize(
    ("path", "job"),
    [
        ("models/jit_scan.safetensors", "train@jit_scan"),
        ("metrics/train/jit.full.json", "train@jit"),
        ("metrics/evaluate/nojit_details.json", "evaluate@nojit"),
        ("reports/profile/jit_scan/trace/plugins/profile/jit_scan/host.xplane.pb", "profile@jit_scan"),
        ("data/raw/idx/train-images-idx3-ubyte.gz", "download"),
        ("data/processed/train_images.npy", "preprocess"),
        ("data/processed", "preprocess"),
        ("reports/figures/confusion_jit.png", "report"),
        ("plots/variants.csv", "report"),
        ("provenance/check.json", "check"),
        ("provenance/train_jit_scan.json", "train@jit_scan"),
    ],
)
def test_a_path_names_the_job_that_writes_it(path: str, job: str) -> None:
    from pathlib import PurePosixPath

    found = find_job(PurePosixPath(path))
    assert found is not None and found.name == job and found.root == Path(".")


def test_a_sweep_points_path_names_its_job_under_the_point() -> None:
    from pathlib import PurePosixPath

    found = find_job(PurePosixPath(f"{POINT}/models/jit.safetensors"))
    assert found is not None and (found.name, found.root) == ("train@jit", Path(POINT))
    assert find_job(PurePosixPath(f"{POINT}/reports/profile/jit/summary.json")) is None  # points run no profile


@pytest.mark.parametrize(
    "path",
    ["logs/train_jit.log", "models/other.safetensors", "params.yaml", "sweeps/step_size/compare.html", "/etc/hostname"],
)
def test_a_path_no_stage_makes_is_one_line(path: str, tmp_path: Path, capsys, monkeypatch) -> None:
    err = explained(tmp_path, path, capsys, monkeypatch, status=1)
    assert len(err) == 1 and err[0].startswith(f"error: {path}: not an output of any stage; "), err


def test_a_path_under_an_output_file_is_no_output(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "jit.safetensors").write_bytes(b"a model")
    err = explained(tmp_path, "models/jit.safetensors/x", capsys, monkeypatch, status=1)
    assert len(err) == 1 and err[0].startswith("error: models/jit.safetensors/x: not an output of any stage; "), err


def test_an_output_not_made_yet_says_how_to_make_it(tmp_path: Path, capsys, monkeypatch) -> None:
    write_params(tmp_path / "params.yaml", tiny_params_dict())
    lines = explained(tmp_path, str(tmp_path / "models" / "jit.safetensors"), capsys, monkeypatch)
    assert lines[0] == "models/jit.safetensors"
    assert line(lines, "made by") == "train@jit: not made yet (provenance/train_jit.json: no such record)"
    assert line(lines, "fix") == "snakemake --cores all, or dvc repro train@jit"


def test_an_output_there_without_a_record_and_an_unlisted_variant(tmp_path: Path, capsys, monkeypatch) -> None:
    write_params(tmp_path / "params.yaml", tiny_params_dict(variants=["jit"]))
    (tmp_path / "metrics/train").mkdir(parents=True)
    (tmp_path / "metrics/train/jit.json").write_text("{}")  # a fresh clone: the baseline, no record
    lines = explained(tmp_path, "metrics/train/jit.json", capsys, monkeypatch)
    assert line(lines, "made by") == (
        "train@jit: there, but not recorded as made by it (provenance/train_jit.json: no such record)"
    )
    assert line(lines, "fix") == "re-run 'train@jit': snakemake --cores all, or dvc repro -f -s train@jit"
    lines = explained(tmp_path, "models/nojit.safetensors", capsys, monkeypatch)
    assert line(lines, "fix") == "list 'nojit' in params.yaml's variants (no tool runs 'train@nojit' until then)"


def test_a_path_under_a_sweep_there_is_no_file_for_is_not_an_output(tmp_path: Path, capsys, monkeypatch) -> None:
    write_params(tmp_path / "params.yaml", tiny_params_dict(variants=["jit"]))
    lines = explained(tmp_path, "sweeps/nope/base/models/jit.safetensors", capsys, monkeypatch, status=1)
    assert lines == [
        "error: sweeps/nope/base/models/jit.safetensors: not an output of any stage;"
        " no sweep file sweeps/nope.yaml gives it"
    ]
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps/lr.sweep.yaml").write_text("grid: {train.step_size: [0.1]}\n")  # a name with a dot in it
    lines = explained(tmp_path, "sweeps/lr.sweep/base/models/jit.safetensors", capsys, monkeypatch)
    assert line(lines, "made by").endswith(": no sweeps/lr.sweep/base/params.yaml)")
    lines = explained(tmp_path, "sweeps/lr.sweep/nope/models/jit.safetensors", capsys, monkeypatch)
    assert line(lines, "fix") == "list the point in sweeps/lr.sweep.yaml"  # re-running the sweep would not make it


def test_digests_are_shortened() -> None:
    assert short("ab" * 32) == "abababab"
    assert short("symlink:" + "cd" * 32) == "symlink:cdcdcdcd"


# --- slow: after one Snakemake run and one dvc repro (real MNIST) ---


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """{tool: workspace} after `snakemake --cores all` in one copy and `dvc repro` in another."""
    mirror_dir()
    parent = tmp_path_factory.mktemp("explain")
    snakemake = make_workspace(parent, "snakemake", start=downloaded(tmp_path_factory), **SETTINGS)
    dvc = copy_workspace(snakemake, parent, "dvc")
    sh(snakemake, "snakemake", "--cores", "all")
    sh(dvc, "dvc", "repro")
    return {"snakemake": snakemake, "dvc": dvc}


@contextlib.contextmanager
def kept(*files: Path) -> Iterator[None]:
    """Put the files back as they were afterwards (the workspaces are shared by the module's tests)."""
    saved = {file: file.read_bytes() for file in files}
    try:
        yield
    finally:
        for file, data in saved.items():
            file.write_bytes(data)


@pytest.mark.slow
@pytest.mark.real_data
def test_a_model_names_its_job_parameters_code_inputs_and_state(runs, capsys, monkeypatch) -> None:
    ws = runs["snakemake"]
    lines = explained(ws, "models/jit.safetensors", capsys, monkeypatch)
    assert lines[0] == "models/jit.safetensors"
    assert line(lines, "made by") == "train@jit, recorded in provenance/train_jit.json"
    assert line(lines, "ran by").startswith("snakemake, 20")
    params = "\n".join(lines[lines.index(next(t for t in lines if t.startswith("  params"))) :])
    assert "model: " in params and "layer_sizes=[784,64,10]" in params and "train: " in params
    assert "step_size=0.01" in params and "epochs=1" in params
    assert line(lines, "code").split(": ")[1].startswith("src/mnist_jax_pipeline/stages/train.py ")
    processed = file_sha256(ws / "data/processed/train_images.npy")
    assert f"train_images.npy {processed[:8]}" in "\n".join(lines)
    assert line(lines, "inputs").startswith("data/processed (preprocess): 7 files: ")
    assert line(lines, "file") == f"as recorded, sha256 {file_sha256(ws / 'models/jit.safetensors')[:8]}"
    assert line(lines, "current") == "yes"
    assert explained(ws, str(ws / "models/jit.safetensors"), capsys, monkeypatch) == lines  # absolute: the same


@pytest.mark.slow
@pytest.mark.real_data
def test_a_metrics_file_names_the_model_it_was_made_from(runs, capsys, monkeypatch) -> None:
    ws = runs["snakemake"]
    lines = explained(ws, "metrics/evaluate/jit.json", capsys, monkeypatch)
    assert line(lines, "made by") == "evaluate@jit, recorded in provenance/evaluate_jit.json"
    assert line(lines, "params") == "none"
    model = file_sha256(ws / "models/jit.safetensors")[:8]
    assert f"models/jit.safetensors (train@jit): {model}" in [text.strip() for text in lines]
    assert line(lines, "current") == "yes"


@pytest.mark.slow
@pytest.mark.real_data
@pytest.mark.parametrize(
    ("path", "job", "file"),
    [
        ("reports/report.html", "report", "as recorded"),
        ("reports/figures/confusion_jit.png", "report", "as recorded"),
        ("data/processed/train_images.npy", "preprocess", "as recorded"),
        ("data/processed", "preprocess", "7 files, as recorded"),
        ("provenance/train_jit.json", "train@jit", "the job's provenance record itself"),
    ],
)
def test_a_report_a_file_in_a_folder_and_a_record(runs, path, job, file, capsys, monkeypatch) -> None:
    lines = explained(runs["snakemake"], path, capsys, monkeypatch)
    assert line(lines, "made by").startswith(f"{job}, recorded in provenance/")
    assert (line(lines, "file") if path != "data/processed" else line(lines, "folder")).startswith(file)
    assert line(lines, "current") == "yes"
    if job == "report":  # every section
        text = "\n".join(lines)
        assert all(
            f"{section}: " in text for section in ("data", "preprocess", "model", "train", "variants", "profile")
        )


@pytest.mark.slow
@pytest.mark.real_data
@pytest.mark.parametrize(
    "path", ["models/jit.safetensors", "data/processed/train_images.npy", "provenance/train_jit.json"]
)
def test_snakemake_and_dvc_give_the_same_answer_but_for_the_tool(runs, path, capsys, monkeypatch) -> None:
    by_snakemake = explained(runs["snakemake"], path, capsys, monkeypatch)
    by_dvc = explained(runs["dvc"], path, capsys, monkeypatch)
    assert line(by_snakemake, "ran by").startswith("snakemake, ")
    assert line(by_dvc, "ran by").startswith("dvc, ")
    assert [t for t in by_snakemake if not t.startswith("  ran by")] == [
        t for t in by_dvc if not t.startswith("  ran by")
    ]


@pytest.mark.slow
@pytest.mark.real_data
def test_an_edited_parameter_is_named_with_the_fix(runs, capsys, monkeypatch) -> None:
    ws = runs["dvc"]
    with kept(ws / "params.yaml"):
        set_params(ws, **{"train.step_size": 0.02})
        lines = explained(ws, "models/jit.safetensors", capsys, monkeypatch)
        assert line(lines, "current") == (
            "no: models/jit.safetensors: made with train.step_size: 0.01 in the record, 0.02 in params.yaml"
        )
        assert line(lines, "fix") == "re-run 'train@jit': snakemake --cores all, or dvc repro -f -s train@jit"
        assert "step_size=0.01 (params.yaml: 0.02)" in "\n".join(lines)
        downstream = explained(ws, "metrics/evaluate/jit.json", capsys, monkeypatch)
        assert line(downstream, "current").startswith("no: 'train@jit' upstream is not: models/jit.safetensors:")
        assert line(downstream, "fix") == line(lines, "fix")


@pytest.mark.slow
@pytest.mark.real_data
def test_an_edited_output_differs_from_its_record(runs, capsys, monkeypatch) -> None:
    ws = runs["snakemake"]
    model = ws / "models/jit.safetensors"
    recorded = file_sha256(model)[:8]
    with kept(model):
        with model.open("ab") as handle:
            handle.write(b"\0")
        lines = explained(ws, "models/jit.safetensors", capsys, monkeypatch)
        now = file_sha256(model)[:8]
        assert line(lines, "file") == f"differs from its record: sha256 {now} now, {recorded} recorded"
        assert line(lines, "current") == "no: models/jit.safetensors: changed since 'train@jit' wrote it"
        assert line(lines, "fix") == "re-run 'train@jit': snakemake --cores all, or dvc repro -f -s train@jit"
    swapped = ws / "data/processed/val_images.npy"
    with kept(swapped):
        shutil.copyfile(ws / "data/processed/test_images.npy", swapped)
        lines = explained(ws, "data/processed/val_images.npy", capsys, monkeypatch)
        assert line(lines, "file").startswith("differs from its record: ")
        assert line(lines, "current") == "no: data/processed/val_images.npy: changed since 'preprocess' wrote it"


@pytest.mark.slow
@pytest.mark.real_data
def test_a_sweep_points_model(runs, tmp_path, capsys, monkeypatch) -> None:
    ws = copy_workspace(runs["snakemake"], tmp_path, "ws")
    point = ws / POINT
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["train"]["step_size"] = 0.02
    write_params(point / "params.yaml", params)
    (ws / "sweeps/lr.yaml").write_text("variant: jit\npoints:\n  - train.step_size: 0.02\n")
    sh(ws, "mnist-pipeline", "--params", f"{POINT}/params.yaml", "train", "--variant", "jit", "--root", POINT)
    lines = explained(ws, f"{POINT}/models/jit.safetensors", capsys, monkeypatch)
    assert lines[0] == f"{POINT}/models/jit.safetensors"
    assert line(lines, "made by") == f"train@jit [lr/step_size=0.02], recorded in {POINT}/provenance/train_jit.json"
    assert line(lines, "ran by").startswith("mnist-pipeline, ")
    assert "step_size=0.02," in "\n".join(lines)
    assert line(lines, "current") == "yes"
    evaluated = explained(ws, f"{POINT}/metrics/evaluate/jit.json", capsys, monkeypatch)
    assert line(evaluated, "made by").startswith("evaluate@jit [lr/step_size=0.02]: not made yet")
    assert line(evaluated, "fix").startswith("re-run the sweep: snakemake --cores all sweeps")


@pytest.mark.slow
def test_a_sweep_point_is_current_only_while_its_sweep_file_gives_it(tiny_tree, tmp_path, capsys, monkeypatch) -> None:
    """A point whose sweep file no longer lists it, or gives it other parameters under the same name, is not current."""
    ws = tmp_path / "ws"
    shutil.copytree(tiny_tree, ws)
    sweep, point, model = ws / "sweeps/tiny.yaml", "step_size=0.2", "sweeps/tiny/step_size=0.2/models/jit.safetensors"
    sweep.parent.mkdir()
    sweep.write_text("variant: jit\npoints:\n  - train.step_size: 0.2\n")
    run_stages(
        ws,
        ["sweep-point", "--sweep", "tiny", "--point", point],
        ["--params", f"sweeps/tiny/{point}/params.yaml", "train", "--variant", "jit", "--root", f"sweeps/tiny/{point}"],
    )
    assert line(explained(ws, model, capsys, monkeypatch), "current") == "yes"
    sweep.write_text("variant: jit\npoints:\n  - train.step_size: 0.3\n")
    lines = explained(ws, model, capsys, monkeypatch)
    assert line(lines, "current") == f"no: sweeps/tiny.yaml does not list the point '{point}'"
    assert line(lines, "fix") == f"list the point in sweeps/tiny.yaml, or delete sweeps/tiny/{point}"
    sweep.write_text("variant: jit\npoints:\n  - train.step_size: 0.2\n")
    other = explained(ws, model.replace("jit.safetensors", "nojit.safetensors"), capsys, monkeypatch)
    assert (
        line(other, "fix") == "set 'variant: nojit' in sweeps/tiny.yaml (no tool runs 'train@nojit' for it until then)"
    )
    epochs = yaml.safe_load((ws / "params.yaml").read_text())["train"]["epochs"]
    with kept(ws / "params.yaml"):
        set_params(ws, **{"train.epochs": epochs + 1})  # every point's base: the point keeps its name, not its values
        lines = explained(ws, model, capsys, monkeypatch)
        made = f"made with train.epochs: {epochs} in the record, {epochs + 1} in sweeps/tiny.yaml"
        assert line(lines, "current") == f"no: {model}: {made}"
    sweep.unlink()
    assert line(explained(ws, model, capsys, monkeypatch), "current").startswith("no: sweeps/tiny.yaml: missing")
