"""`mnist-pipeline crate`: the last run as a Provenance Run Crate, built from real stage runs on tiny data and
checked by roc-validator, offline (this machine has no network; the validator gets the context from us)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import yaml

from conftest import ROOT, run_stages, tiny_params_dict, write_params, write_raw
from mnist_jax_pipeline.cli import main

POINT = "sweeps/tiny/step_size=0.2"
ROOT_JOBS = ["check", "download", "preprocess", "train@jit", "evaluate@jit", "profile@jit", "report"]
JOBS = {f"#run/{name}" for name in ROOT_JOBS} | {f"#run/{POINT}/train@jit"}
GIT_COMMIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "commit", "-qam"]


def make_tree(root: Path) -> None:
    """A project where the real stages ran on tiny data (one variant, one epoch) and the one point of its sweep file
    trained; the checkout's code and definitions copied in, so that the records name files that are there."""
    for name in ("src", "requirements"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("Snakefile", "dvc.yaml", "README.md"):
        shutil.copy(ROOT / name, root / name)
    write_raw(root / "data" / "raw", 600, 200)
    params = tiny_params_dict(variants=["jit"], train={"epochs": 1})
    write_params(root / "params.yaml", params)
    point = yaml.safe_load(yaml.safe_dump(params))
    point["train"]["step_size"] = 0.2
    write_params(root / POINT / "params.yaml", point)
    (root / "sweeps" / "tiny.yaml").write_text("variant: jit\npoints:\n  - train.step_size: 0.2\n")
    run_stages(
        root,
        ["check"],
        ["preprocess"],
        ["train", "--variant", "jit"],
        ["evaluate", "--variant", "jit"],
        ["profile", "--variant", "jit"],
        ["report"],
        ["--params", f"{POINT}/params.yaml", "train", "--variant", "jit", "--root", POINT],
    )


@pytest.fixture(scope="module")
def crate_tree(tmp_path_factory) -> Path:
    """make_tree's project. A stage refuses code that differs from the installed package's, which happens when
    a file of the checkout is edited while the copy's stages run: then it is tried again on a new copy."""
    for attempt in range(3):
        root = tmp_path_factory.mktemp(f"crate{attempt}")
        try:
            make_tree(root)
            return root
        except AssertionError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@pytest.fixture
def project(crate_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the tree, the current folder; git reads the test's settings only (none, until it writes some)."""
    tree = tmp_path / "project"
    shutil.copytree(crate_tree, tree, symlinks=True)
    monkeypatch.chdir(tree)
    (tmp_path / "gitconfig").write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return tree


def configure_git_user(project: Path, name: str, email: str) -> None:
    (project.parent / "gitconfig").write_text(f"[user]\n\tname = {name}\n\temail = {email}\n")


def graph(root: Path) -> dict[str, dict[str, Any]]:
    return {unquote(e["@id"]): e for e in json.loads((root / "ro-crate-metadata.json").read_text())["@graph"]}


def ids(value: Any) -> list[str]:
    """The @ids of a property's values, unquoted: files' paths."""
    return [unquote(v["@id"]) for v in (value if isinstance(value, list) else [value])]


@pytest.mark.slow
def test_the_crate_describes_every_job_and_validates_offline(project: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["crate", "--validate"]) == 0
    said = capsys.readouterr().out
    assert "crate valid against provenance-run-crate-0.5: 0 REQUIRED," in said and "REQUIRED:" not in said, said
    assert said.strip().endswith(f"wrote ro-crate-metadata.json: {len(JOBS)} jobs"), said
    entities = graph(project)
    actions = {i: e for i, e in entities.items() if e["@type"] == "CreateAction" and i != "#run"}
    assert set(actions) == JOBS
    for name, action in actions.items():
        assert action["instrument"] and action["result"], name
        if name != "#run/download":  # the tiny data's record is written by the tests (conftest.adopt), with no run
            assert action["startTime"] <= action["endTime"], name
        assert entities[ids(action["instrument"])[0]]["@type"] == "SoftwareApplication"
    train = actions["#run/train@jit"]
    assert "data/processed/train_images.npy" in ids(train["object"])
    params = [entities[i] for i in ids(train["object"]) if entities[i]["@type"] == "PropertyValue"]
    assert {p["name"] for p in params} == {"model", "train"}
    assert {"models/jit.safetensors", "provenance/train_jit.json"} <= set(ids(train["result"]))
    tool = entities[ids(train["instrument"])[0]]
    assert {"src/mnist_jax_pipeline/stages/train.py", "requirements/runtime.txt"} <= set(ids(tool["hasPart"]))
    assert tool["softwareVersion"] == metadata.version("mnist-jax-pipeline")
    jax = entities[f"https://pypi.org/project/jax/{metadata.version('jax')}/"]
    assert jax in [entities[i] for i in ids(tool["softwareRequirements"])] and jax["url"] == {"@id": jax["@id"]}
    assert ids(entities["./"]["license"]) == ["https://spdx.org/licenses/Apache-2.0"]
    swept = actions[f"#run/{POINT}/train@jit"]
    assert f"{POINT}/models/jit.safetensors" in ids(swept["result"])
    assert (
        json.loads(next(entities[i]["value"] for i in ids(swept["object"]) if i.endswith("/train")))["step_size"] == 0.2
    )
    device = entities[entities["metrics/train/jit.run.json"]["about"]["@id"]]
    assert device["@type"] == "Product" and "cpu" in device["name"]
    workflow = entities[entities["./"]["mainEntity"]["@id"]]
    assert workflow["@id"] == "src/mnist_jax_pipeline/orchestration/stage_table.py" and set(
        ids(workflow["subjectOf"])
    ) == {
        "Snakefile",
        "dvc.yaml",
    }


@pytest.mark.slow
def test_validate_writes_into_a_folder_that_is_not_there_yet(project: Path, capsys: pytest.CaptureFixture[str]):
    """The folder --out names is made; the crate's files are named from it, and the validator finds them."""
    assert main(["crate", "--validate", "--out", "crates/new"]) == 0
    said = capsys.readouterr().out
    assert "crate valid against provenance-run-crate-0.5: 0 REQUIRED," in said, said
    crate = project / "crates" / "new"
    files = [name for name, entity in graph(crate).items() if "File" in entity["@type"]]
    assert "../../models/jit.safetensors" in files and all((crate / name).is_file() for name in files), files


@pytest.mark.slow
def test_few_recommended_findings_are_left(project: Path, capsys: pytest.CaptureFixture[str]):
    """What the project knows is in the crate; the findings left are named by kind on the one summary line."""
    configure_git_user(project, "Ada Lovelace", "ada@example.org")
    assert main(["crate", "--validate"]) == 0
    summary = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("crate valid"))
    found = re.search(r" (\d+) RECOMMENDED \((.*)\), \d+ OPTIONAL; see docs/provenance.md$", summary)
    assert found and int(found[1]) <= 20, summary  # a default run's 20 (docs/provenance.md)
    assert sum(int(count) for count in re.findall(r"(?:^|, )(\d+) x ", found[2])) == int(found[1]), summary
    for known in ("Action agent", "version", "license"):  # what the records and the project's metadata hold
        assert known not in found[2], summary


@pytest.mark.slow
def test_the_agent_is_the_configured_git_user(project: Path):
    configure_git_user(project, "Ada Lovelace", "ada@example.org")
    assert main(["crate"]) == 0
    entities = graph(project)
    actions = [e for e in entities.values() if e["@type"] == "CreateAction"]
    assert len(actions) == len(JOBS) + 1  # with the whole run's
    assert {i for action in actions for i in ids(action["agent"])} == {"#person/Ada Lovelace"}
    assert entities["#person/Ada Lovelace"] == {
        "@id": "#person/Ada%20Lovelace",
        "@type": "Person",
        "name": "Ada Lovelace",
        "email": "ada@example.org",
    }


@pytest.mark.slow
def test_no_agent_without_a_git_user(project: Path):
    assert main(["crate"]) == 0
    entities = graph(project).values()
    assert not [e["@id"] for e in entities if "agent" in e or e["@type"] == "Person"]


@pytest.mark.slow
def test_every_file_has_its_digest_and_size(project: Path):
    assert main(["crate"]) == 0
    files = [e for e in graph(project).values() if "File" in e["@type"]]
    assert len(files) > 40
    for entity in files:
        data = (project / unquote(entity["@id"])).read_bytes()
        assert entity["sha256"] == hashlib.sha256(data).hexdigest(), entity["@id"]
        assert entity["contentSize"] == str(len(data)), entity["@id"]


@pytest.mark.slow
def test_a_job_whose_file_changed_is_left_out_with_a_warning(project: Path, capsys: pytest.CaptureFixture[str]):
    model = project / POINT / "models/jit.safetensors"
    model.write_bytes(model.read_bytes() + b"x")
    assert main(["crate"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"warning: train@jit [{POINT}] left out:"), err
    assert f"{POINT}/models/jit.safetensors: changed" in err and "re-run the sweep: snakemake --cores all sweeps" in err
    assert f"#run/{POINT}/train@jit" not in graph(project)


def test_no_records_is_one_line_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.chdir(tmp_path)
    assert main(["crate"]) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("error: provenance/: no provenance records; run the pipeline first") and err.count("\n") == 1
    ), err
    assert not (tmp_path / "ro-crate-metadata.json").exists()


def test_the_validator_gets_nothing_from_the_network():
    """The context is served from the package; any other URL is refused and recorded, never fetched."""
    import requests

    from mnist_jax_pipeline.orchestration.crate.validate import CONTEXT_URL, LocalOnly

    adapter = LocalOnly()
    session = requests.Session()
    session.mount("https://", adapter)
    assert session.get(CONTEXT_URL).json()["@context"]["ComputationalWorkflow"] == (
        "https://bioschemas.org/ComputationalWorkflow"
    )
    assert session.get("https://example.org/x").status_code == 404 and adapter.refused == ["https://example.org/x"]


@pytest.mark.slow
def test_a_checkout_whose_path_has_a_space_and_non_ascii_characters(
    crate_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog
):
    """crate --validate, explain and show work where the project's path needs escaping in a URI."""
    tree = tmp_path / "x y" / "prøject ü"
    shutil.copytree(crate_tree, tree, symlinks=True)
    monkeypatch.chdir(tree)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # dvc, for show
    assert main(["crate", "--validate"]) == 0
    said = capsys.readouterr()
    assert "crate valid against provenance-run-crate-0.5: 0 REQUIRED," in said.out, said.out
    assert not said.err and "URI" not in caplog.text, said.err + caplog.text
    assert "#run/train@jit" in graph(tree)
    assert main(["explain", str(tree / "models/jit.safetensors")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "  current   yes"
    for command in (["git", "init", "-q"], ["git", "add", "-A"], [*GIT_COMMIT, "tree"], ["dvc", "init", "-q"]):
        subprocess.run(command, check=True, capture_output=True)
    subprocess.run([*GIT_COMMIT, "dvc"], check=True, capture_output=True)
    assert main(["show"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0].startswith("experiment") and shown[1].split()[:3] == ["workspace", "jit", "100.00%"], shown


def edit_record(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


@pytest.mark.slow
def test_a_record_that_cannot_be_true_is_left_out_with_a_warning(project: Path, capsys: pytest.CaptureFixture[str]):
    """A time that is no time, an end before the start, a file outside the project (with its real digest): each
    record is named once and left out; the crate has no File outside the project."""
    outside = project.parent / "outside.txt"
    outside.write_text("not the project's\n")
    digest = hashlib.sha256(outside.read_bytes()).hexdigest()
    edit_record(project / "provenance/evaluate_jit.json", lambda r: r["run"].update(started="not-a-time"))
    edit_record(
        project / "provenance/profile_jit.json",
        lambda r: r["run"].update(started=r["run"]["ended"], ended="2001-01-01T00:00:00Z"),
    )
    edit_record(project / "provenance/report.json", lambda r: r["outputs"].update({"../outside.txt": digest}))
    edit_record(project / "provenance/check.json", lambda r: r["inputs"].update({str(outside): digest}))
    assert main(["crate"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4, err
    for name in ("evaluate_jit", "profile_jit", "report", "check"):
        assert len([line for line in err if f"provenance/{name}.json: " in line]) == 1, err
    assert "run.started 'not-a-time' is not an ISO 8601 time" in "\n".join(err)
    entities = graph(project)
    assert not {f"#run/{name}" for name in ("evaluate@jit", "profile@jit", "report", "check")} & set(entities)
    files = [i for i, e in entities.items() if "File" in e["@type"]]
    assert files and not [i for i in files if i.startswith("/") or ".." in Path(i).parts], files


@pytest.mark.slow
def test_a_job_of_the_variants_without_a_record_is_named(project: Path, capsys: pytest.CaptureFixture[str]):
    (project / "provenance/profile_jit.json").unlink()
    params = yaml.safe_load((project / "params.yaml").read_text())
    write_params(project / "params.yaml", {**params, "variants": ["jit", "nojit"]})
    assert main(["crate"]) == 0
    err = capsys.readouterr().err
    named = {line.removeprefix("warning: ").split(":")[0] for line in err.splitlines()}
    assert named == {"profile@jit", "train@nojit", "evaluate@nojit", "profile@nojit"}, err
    assert "#run/train@jit" in graph(project)


@pytest.mark.slow
def test_a_point_its_sweep_file_no_longer_gives_is_not_of_the_last_run(
    project: Path, capsys: pytest.CaptureFixture[str]
):
    sweep = project / "sweeps/tiny.yaml"
    sweep.write_text("variant: jit\npoints:\n  - train.step_size: 0.3\n")  # the point's value changed
    assert main(["crate"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"warning: {POINT} left out: sweeps/tiny.yaml does not list") and err.count("\n") == 1, err
    assert f"#run/{POINT}/train@jit" not in graph(project)
    sweep.write_text("variant: jit\npoints:\n  - train.step_size: 0.2\n")
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["train"]["epochs"] = 2  # every point's base: the point keeps its name, not its parameters
    write_params(project / "params.yaml", params)
    assert main(["crate"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {POINT} left out: sweeps/tiny.yaml now gives 'train@jit' other parameters" in err, err
    assert f"#run/{POINT}/train@jit" not in graph(project)
    sweep.write_text("variant: jit_scan\npoints:\n  - train.step_size: 0.2\n")  # its jit job is an earlier variant's
    assert main(["crate"]) == 0
    assert POINT not in capsys.readouterr().err and f"#run/{POINT}/train@jit" in graph(project)
    sweep.unlink()
    assert main(["crate"]) == 0
    assert f"warning: {POINT} left out: sweeps/tiny.yaml: missing" in capsys.readouterr().err


@pytest.mark.slow
def test_validate_refuses_what_cannot_be_true(project: Path, capsys: pytest.CaptureFixture[str]):
    """What the profile does not check: times that are times, in order, and files inside the project."""
    from mnist_jax_pipeline.artefacts.provenance import Hashes
    from mnist_jax_pipeline.foundation.errors import PipelineError
    from mnist_jax_pipeline.orchestration.crate import build, records
    from mnist_jax_pipeline.orchestration.crate.validate import validate

    hashes = Hashes()
    metadata = build.build(records.recorded_jobs(hashes)[0], Path("."), hashes, {})
    shutil.copy(project / "README.md", project.parent / "README.md")
    text = json.dumps(metadata).replace('"README.md"', '"../README.md"')  # the @id and every reference
    metadata = json.loads(text)
    actions = {e["@id"]: e for e in metadata["@graph"] if e["@type"] == "CreateAction"}
    actions["#run/train@jit"]["startTime"] = "not-a-time"
    evaluate = actions["#run/evaluate@jit"]
    evaluate["startTime"], evaluate["endTime"] = evaluate["endTime"], evaluate["startTime"]
    with pytest.raises(PipelineError, match="REQUIRED issues above"):
        validate(metadata, Path("."), Path("ro-crate-metadata.json"))
    required = [line for line in capsys.readouterr().out.splitlines() if line.startswith("REQUIRED: mnist-pipeline:")]
    assert len(required) == 3, required
    assert any("startTime 'not-a-time'" in line and "#run/train@jit" in line for line in required), required
    assert any("ends" in line and "before it starts" in line and "#run/evaluate@jit" in line for line in required)
    assert any("File ../README.md: not a file inside the project" in line for line in required), required
