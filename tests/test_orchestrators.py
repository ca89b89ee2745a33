"""Snakemake and DVC describe the same pipeline: same stages, commands, inputs, outputs, params."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT
from mnist_jax_pipeline.config.params import load
from mnist_jax_pipeline.orchestration import freshness
from mnist_jax_pipeline.orchestration.jobs import Job
from mnist_jax_pipeline.orchestration.stage_table import STAGES, get
from workspace import planned_rules

LOG_PREFIX = "MNIST_PIPELINE_LOG={log:q} "  # the job's log, where the stage writes its lines


def is_provenance(path: str) -> bool:
    return path.startswith((".snakemake/provenance/", "provenance/"))


def snakemake_stages() -> dict[str, dict]:
    """Every job of the Snakefile, keyed by DVC's stage name (rule or rule@variant)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import OutputSettings, ResourceSettings

    stages = {}
    with SnakemakeApi(OutputSettings()) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(cores=1), snakefile=ROOT / "Snakefile", workdir=ROOT
        )._workflow
        params = load(ROOT / "params.yaml")
        variants = list(params.variants)
        checker = freshness.Checker(params)
        dvc_stages = {stage.name for stage in STAGES}
        for rule in workflow.rules:
            if rule.name not in dvc_stages:  # `all`, and the sweep rules (DVC queues sweeps as experiments)
                continue
            assert rule.shellcmd.startswith(LOG_PREFIX), f"rule {rule.name} does not keep a log"
            assert rule.log, f"rule {rule.name} has no log:"
            wildcard = "{variant" in str(list(rule.output))
            for variant in variants if wildcard else [None]:

                def fill(text: str, v: str | None = variant) -> str:
                    text = re.sub(r"\{variant(,[^}]*)?\}", v or "", str(text))
                    return text.replace("{wildcards.variant}", v or "")

                name = f"{rule.name}@{variant}" if wildcard else rule.name
                job = Job(get(rule.name), variant)
                stages[name] = {
                    "cmd": fill(rule.shellcmd[len(LOG_PREFIX) :]).strip(),
                    # the job's marker and the records of the jobs it reads are Snakemake's means of
                    # re-running by content (freshness.py), not inputs DVC needs; the code is compared by
                    # the records too, so it is no Snakemake input: the stage table declares it for both
                    "deps": {fill(p) for p in rule.input if not is_provenance(fill(p))} | set(checker.code(job.stage)),
                    "outs": {fill(p) for p in rule.output},
                    # what decides a re-run: the sections a job's provenance record holds
                    "params": set(freshness.Checker(params).made_from(job)),
                }
    return stages


def dvc_stages() -> dict[str, dict]:
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    stages = {}
    with Repo(str(ROOT)) as repo:
        for stage in repo.index.stages:
            deps = [d for d in stage.deps if not isinstance(d, ParamsDependency)]
            # a dependency on the whole file (no keys listed): every section of it
            params = [
                p
                for d in stage.deps
                if isinstance(d, ParamsDependency)
                for p in (d.params or load(ROOT / "params.yaml").to_dict())
            ]
            stages[stage.name] = {
                "cmd": stage.cmd.strip(),
                "deps": {d.def_path for d in deps},
                "outs": {o.def_path for o in stage.outs},
                "params": set(params),
            }
    return stages


@pytest.fixture(scope="module")
def both():
    return snakemake_stages(), dvc_stages()


@pytest.mark.slow
def test_same_stage_names(both):
    snake, dvc = both
    assert set(snake) == set(dvc)
    assert {"download", "preprocess", "train@nojit", "train@jit", "evaluate@jit", "profile@jit", "report"} <= set(dvc)


@pytest.mark.parametrize("field", ["cmd", "params"])
def test_same_commands_outputs_and_params(both, field):
    snake, dvc = both
    for name in dvc:
        assert snake[name][field] == dvc[name][field], f"{name}: {field} differ"


def inside(path: str, folder: str) -> bool:
    return Path(path) == Path(folder) or Path(folder) in Path(path).parents


@pytest.mark.parametrize("field", ["deps", "outs"])
def test_same_inputs_and_outputs(both, field):
    """Each Snakemake path is a DVC path or lies in a DVC folder; each DVC path holds a Snakemake one.

    Snakemake names the files inside an output folder (it compares file times), DVC the folder.
    """
    snake, dvc = both
    for name in dvc:
        for path in snake[name][field]:
            assert any(inside(path, d) for d in dvc[name][field]), f"{name}: {path} not in dvc.yaml"
        for d in dvc[name][field]:
            assert any(inside(path, d) for path in snake[name][field]), f"{name}: {d} not in Snakefile"


def test_every_dvc_dep_is_made_by_a_stage_or_is_code(both):
    _, dvc = both
    outs = {o for stage in dvc.values() for o in stage["outs"]}
    for name, stage in dvc.items():
        for dep in stage["deps"]:
            made = any(inside(o, dep) or inside(dep, o) for o in outs)
            assert made or dep.startswith("src/") or dep == "requirements/runtime.txt", (
                f"{name}: {dep} is made by no stage, nor is it code or the runtime lock"
            )


@pytest.mark.slow
def test_the_default_target_runs_every_stage_dvc_runs(both):
    """`snakemake` (its default target) schedules a job for every stage `dvc repro` runs."""
    import subprocess

    done = subprocess.run(
        ["snakemake", "--dry-run", "--forceall", "--quiet", "rules", "--cores", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    counts = planned_rules(done.stdout + done.stderr)
    _, dvc = both
    expected: dict[str, int] = {}
    for name in dvc:
        rule = name.split("@")[0]
        expected[rule] = expected.get(rule, 0) + 1
    assert {rule: counts.get(rule, 0) for rule in expected} == expected
