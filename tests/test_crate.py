"""`mnist-pipeline crate`: the last run as a Provenance Run Crate, built from real stage runs on tiny data and
checked by roc-validator, offline (this machine has no network; the validator gets the context from us)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import yaml

from conftest import ROOT, run_stages, tiny_params_dict, write_params, write_raw
from mnist_jax_pipeline.cli import main

POINT = "sweeps/tiny/step_size=0.2"
JOBS = {"#run/download", "#run/preprocess", "#run/train@jit", "#run/evaluate@jit", f"#run/{POINT}/train@jit"}


def make_tree(root: Path) -> None:
    """A project where the real stages ran on tiny data (one variant, one epoch) and one sweep point trained;
    the checkout's code and definitions copied in, so that the records name files that are there."""
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
    run_stages(
        root,
        ["preprocess"],
        ["train", "--variant", "jit"],
        ["evaluate", "--variant", "jit"],
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
    assert said.strip().endswith("wrote ro-crate-metadata.json: 5 jobs"), said
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
def test_few_recommended_findings_are_left(project: Path, capsys: pytest.CaptureFixture[str]):
    """What the project knows is in the crate; the findings left are named by kind on the one summary line."""
    configure_git_user(project, "Ada Lovelace", "ada@example.org")
    assert main(["crate", "--validate"]) == 0
    summary = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("crate valid"))
    found = re.search(r" (\d+) RECOMMENDED \((.*)\), \d+ OPTIONAL; see docs/provenance.md$", summary)
    assert found and int(found[1]) <= 20, summary
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
    assert f"{POINT}/models/jit.safetensors: changed" in err
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
