"""The recipe of docs/architecture.md, "Adding a parameter, a variant or a stage", carried out in a copy
of the repository on tiny data: a parameter (`train.weight_decay`, read by the optimizer) and a variant
that reuses an existing loop class. Each edits exactly the files the recipe's row names, runs
`mnist-pipeline generate`, passes the tests that guard those files, and then runs under both tools:
Snakemake and DVC make the same bytes, each agrees afterwards that the other's work is current, and
the parameter changes what training makes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT, write_raw
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.orchestration import stage_table
from workspace import WOULD_RUN, copy_workspace, dvc_ran, dvc_stale, make_workspace, set_params, sh

pytestmark = pytest.mark.slow
PACKAGE = "src/mnist_jax_pipeline"
SCHEMA = "workflow/schemas/params.schema.json"
TINY = {"model.layer_sizes": [784, 32, 10], "train.epochs": 2, "variants": ["jit"], "profile.trace_steps": 1}


# --- the recipe as the docs give it ------------------------------------------------------------------


def recipe(kind: str) -> str:
    """The row of the table in docs/architecture.md, "Adding a parameter, a variant or a stage", for `kind`."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Adding a parameter, a variant or a stage", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith(f"| {kind}")]
    assert len(rows) == 1, f"docs/architecture.md: no single row for {kind!r} in the recipe table"
    return rows[0]


def named(row: str, path: str) -> bool:
    """Whether the recipe's row names the file: in backticks (its path, its path in the package, its name)
    or as a link from docs/."""
    quoted = set(re.findall(r"`([^`]+)`", row))
    linked = {os.path.normpath(Path("docs") / target) for target in re.findall(r"\]\(([^)#\s]+)", row)}
    short = path.removeprefix(PACKAGE + "/")
    return bool({path, short, Path(path).name} & quoted) or path in linked


def edit(path: Path, old: str, new: str) -> None:
    """Replace the one occurrence of `old` in the file (the recipe's edit; the test fails if the file changed)."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path}: expected one {old!r} to edit"
    path.write_text(text.replace(old, new), encoding="utf-8")


def changed(ws: Path) -> set[str]:
    """Every file `git status` shows as changed, added or untracked."""
    out = sh(ws, "git", "status", "--porcelain", "--untracked-files=all")
    return {line[3:] for line in out.splitlines() if line.strip()}


def guards(ws: Path, *tests: str) -> None:
    """The repository's own tests that guard what the recipe edits, run in the workspace."""
    sh(ws, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests)


# --- the workspace ----------------------------------------------------------------------------------


def pristine_workspace(parent: Path, name: str) -> Path:
    """A fresh copy of the repository as it is, params.yaml with its comments (make_workspace rewrites it)."""
    ws = make_workspace(parent, name, fast=False)
    shutil.copy2(ROOT / "params.yaml", ws / "params.yaml")
    sh(ws, "git", "commit", "-qa", "--allow-empty", "-m", "the repository's params.yaml")
    assert changed(ws) == set()
    return ws


def go_tiny(ws: Path, **settings: object) -> None:
    """Settings for a fast run, and the download stage's data tiny and synthetic, recorded as its work with
    the workspace's code as it is now (conftest.adopt), for both tools: every stage imports config/params.py and
    foundation/variants.py, so a download of the real MNIST (MNIST_MIRROR) would otherwise replace it."""
    set_params(ws, **TINY | settings)
    write_raw(ws / paths.RAW.path)
    sh(ws, "dvc", "commit", "--force", "--quiet", "download")
    sh(ws, "git", "add", "-A")
    sh(ws, "git", "commit", "-qm", "tiny data, settings for a fast run")


def targets(variant: str) -> list[str]:
    """The files of a variant's train and evaluate jobs that Snakemake is asked for."""
    return [paths.MODEL.at(variant).as_posix(), paths.EVAL_HEADLINE.at(variant).as_posix()]


def snakemake_would_run(ws: Path, *wanted: str) -> set[str]:
    return set(WOULD_RUN.findall(sh(ws, "snakemake", "--cores", "1", "-n", *wanted)))


def provenance(ws: Path, job: str) -> dict:
    stage, _, variant = job.partition("@")
    return json.loads((ws / stage_table.get(stage).record.at(variant or None)).read_text())


def model_bytes(ws: Path, variant: str) -> bytes:
    return (ws / paths.MODEL.at(variant)).read_bytes()


# --- a parameter -------------------------------------------------------------------------------------

PARAMETER_GUARDS = (
    "tests/test_params_property.py::test_the_strategies_cover_every_parameter",
    "tests/test_docs.py::test_the_parameter_table_lists_every_key",
    "tests/test_presets.py::test_a_complete_preset_gives_its_values_and_keeps_the_comments",
    "tests/test_stages.py::test_generated_files_are_current",
    "tests/test_lint.py::test_ruff_is_clean",
)


def add_weight_decay(ws: Path) -> set[str]:
    """The recipe for a parameter, `train.weight_decay` (0: none); the files it edits."""
    edit(
        ws / "params.yaml",
        "  batch_size: 128\n",  # the value, in both complete files
        "  weight_decay: 0.0           # weight_decay * w added to each gradient (L2); 0: none\n  batch_size: 128\n",
    )
    edit(ws / "presets/time-to-accuracy.yaml", "  batch_size: 256\n", "  weight_decay: 0.0\n  batch_size: 256\n")
    edit(
        ws / PACKAGE / "config/params.py",
        "    batch_size: PositiveInt\n",  # its type and bounds, in TrainConfig
        '    weight_decay: Annotated[float, Field(ge=0, lt=1, description="L2: weight_decay * w added to each'
        ' gradient")]\n    batch_size: PositiveInt\n',
    )
    edit(
        ws / PACKAGE / "mlp/loops/base.py",  # the code that reads it
        "def make_optimizer(config: TrainConfig, train_count: int) -> optax.GradientTransformation:\n",
        "def make_optimizer(config: TrainConfig, train_count: int) -> optax.GradientTransformation:\n"
        '    """The optimizer below, each gradient first given `weight_decay * w` (L2) when weight_decay > 0."""\n'
        "    optimizer = _optimizer(config, train_count)\n"
        "    if config.weight_decay == 0:\n"
        "        return optimizer\n"
        "    return optax.chain(optax.add_decayed_weights(config.weight_decay), optimizer)\n\n\n"
        "def _optimizer(config: TrainConfig, train_count: int) -> optax.GradientTransformation:\n",
    )
    edit(
        ws / "docs/parameters.md",
        "| `train.label_smoothing` | `0.0` | targets `(1 - s) * one_hot + s / 10` |\n",
        "| `train.label_smoothing` | `0.0` | targets `(1 - s) * one_hot + s / 10` |\n"
        "| `train.weight_decay` | `0.0` | each gradient gets `weight_decay * w` added (L2), before the optimizer |\n",
    )
    edit(
        ws / "tests/test_params_property.py",
        '    "train.label_smoothing": floats(0.0, 0.999),\n',
        '    "train.label_smoothing": floats(0.0, 0.999),\n    "train.weight_decay": floats(0.0, 0.999),\n',
    )
    edit(
        ws / "tests/test_params_property.py",
        '    "train.label_smoothing": "0.0",\n',
        '    "train.label_smoothing": "0.0",\n    "train.weight_decay": "0.0",\n',
    )
    return {
        "params.yaml",
        "presets/time-to-accuracy.yaml",
        f"{PACKAGE}/config/params.py",
        f"{PACKAGE}/mlp/loops/base.py",
        "docs/parameters.md",
        "tests/test_params_property.py",
    }


def test_adding_a_parameter_edits_the_files_the_docs_list_and_runs_under_both_tools(tmp_path):
    row = recipe("a parameter")
    assert "`mnist-pipeline generate` (the schema)" in row
    ws = pristine_workspace(tmp_path, "parameter")
    edited = add_weight_decay(ws)
    code = f"{PACKAGE}/mlp/loops/base.py"  # "the code that reads it"
    assert {path for path in edited - {code} if not named(row, path)} == set()
    sh(ws, "mnist-pipeline", "generate")
    assert changed(ws) == edited | {SCHEMA}  # the schema, not dvc.yaml: a stage depends on whole sections
    guards(ws, *PARAMETER_GUARDS)
    sh(ws, "git", "add", "-A")
    sh(ws, "git", "commit", "-qm", "train.weight_decay")
    go_tiny(ws)

    # Snakemake runs jit's train and evaluate with a weight decay; DVC, in a copy, makes the same bytes
    set_params(ws, **{"train.weight_decay": 0.5})
    twin = copy_workspace(ws, tmp_path, "parameter-dvc")
    sh(ws, "snakemake", "--cores", "2", *targets("jit"))
    assert provenance(ws, "train@jit")["params"]["train"]["weight_decay"] == 0.5
    assert (ws / paths.EVAL_HEADLINE.at("jit")).is_file()
    assert {"download", "preprocess", "train@jit", "evaluate@jit"} & dvc_stale(ws) == set()
    assert dvc_ran(sh(twin, "dvc", "repro", "evaluate@jit")) == {"preprocess", "train", "evaluate"}
    assert provenance(twin, "train@jit")["params"]["train"]["weight_decay"] == 0.5
    assert model_bytes(twin, "jit") == model_bytes(ws, "jit")
    assert snakemake_would_run(twin, *targets("jit")) == set()

    # the parameter takes effect: both tools see its change, and training without it makes another model
    set_params(ws, **{"train.weight_decay": 0.0})
    assert "train@jit" in dvc_stale(ws)  # its `train` section changed (evaluate reads its model, no params)
    assert snakemake_would_run(ws, *targets("jit")) == {"train@jit", "evaluate@jit"}
    decayed = model_bytes(ws, "jit")
    assert dvc_ran(sh(ws, "dvc", "repro", "evaluate@jit")) == {"train", "evaluate"}
    assert provenance(ws, "train@jit")["params"]["train"]["weight_decay"] == 0.0
    assert model_bytes(ws, "jit") != decayed
    assert snakemake_would_run(ws, *targets("jit")) == set()


# --- a variant ---------------------------------------------------------------------------------------

NEW = "jit2"  # short enough to keep the comment column of params.yaml's `variants` line
DESCRIPTION = "the jit loop again, under a second name"
VARIANT_GUARDS = (
    "tests/test_loops.py::test_every_loop_name_has_its_class_and_what_one_call_runs",
    "tests/test_loops.py::test_every_variant_has_a_loop_with_the_protocol",
    "tests/test_stages.py::test_generated_files_are_current",
    "tests/test_stages.py::test_variant_choices_derive_from_the_registry",
    "tests/test_presets.py::test_a_complete_preset_gives_its_values_and_keeps_the_comments",
    "tests/test_docs.py",
    "tests/test_lint.py::test_ruff_is_clean",
)


def add_variant(ws: Path) -> set[str]:
    """The recipe for a variant that reuses a loop class (StepLoop, compiled); the files it edits."""
    edit(
        ws / PACKAGE / "foundation/variants.py",
        '    Variant("jit_scan", ',
        f'    Variant("{NEW}", "{DESCRIPTION}", "StepLoop", jit=True),\n    Variant("jit_scan", ',
    )
    return {f"{PACKAGE}/foundation/variants.py"}


def list_variant(ws: Path) -> set[str]:
    """The variant listed in params.yaml's `variants` (to run it), and the places that state that default list."""
    old, new = "variants: [nojit, jit]", f"variants: [nojit, jit, {NEW}]"
    edit(ws / "params.yaml", old.ljust(30) + "#", new.ljust(30) + "#")  # its comment stays where it was
    edit(ws / "README.md", "the default is `[nojit, jit]`", f"the default is `[nojit, jit, {NEW}]`")
    edit(ws / "docs/parameters.md", "| `variants` | `[nojit, jit]` |", f"| `variants` | `[nojit, jit, {NEW}]` |")
    edit(
        ws / "tests/test_presets.py",
        '"variants: [nojit, jit] -> [jit_scan]"',
        f'"variants: [nojit, jit, {NEW}] -> [jit_scan]"',
    )
    return {"params.yaml", "README.md", "docs/parameters.md", "tests/test_presets.py"}


def test_adding_a_variant_edits_the_files_the_docs_list_and_runs_under_both_tools(tmp_path):
    row = recipe("a variant")
    assert "`mnist-pipeline generate` (the schema's list of variants)" in row and "`params.yaml`'s `variants`" in row
    details = paths.EVAL_DETAILS.at(NEW)
    gitignore = (details.parent / ".gitignore").as_posix()  # DVC's, beside the one cached file in a git folder
    assert f"`{gitignore}`" in row
    ws = pristine_workspace(tmp_path, "variant")
    edited = add_variant(ws)
    sh(ws, "mnist-pipeline", "generate")
    edited |= list_variant(ws)
    assert {path for path in edited if not named(row, path)} == set()
    assert changed(ws) == edited | {SCHEMA}  # the schema, not dvc.yaml: it loops over params.yaml's variants
    guards(ws, *VARIANT_GUARDS)
    sh(ws, "git", "add", "-A")
    sh(ws, "git", "commit", "-qm", f"variant {NEW}")
    go_tiny(ws, variants=["jit", NEW])
    twin = copy_workspace(ws, tmp_path, "variant-dvc")

    # Snakemake's default target: every stage, the new variant's among them, and the report names it
    sh(ws, "snakemake", "--cores", "2")
    for variant in ("jit", NEW):
        for artefact in (paths.MODEL, paths.TRAIN_HEADLINE, paths.EVAL_HEADLINE):
            assert (ws / artefact.at(variant)).is_file(), artefact.at(variant)
    assert DESCRIPTION in (ws / paths.REPORT_HTML.path).read_text()
    assert dvc_stale(ws) == set()

    # DVC, in a copy: the new variant's stages make the same model, and Snakemake then has nothing to do
    assert dvc_ran(sh(twin, "dvc", "repro", f"evaluate@{NEW}")) == {"preprocess", "train", "evaluate"}
    assert model_bytes(twin, NEW) == model_bytes(ws, NEW)
    assert json.loads((twin / paths.EVAL_HEADLINE.at(NEW)).read_text()) == json.loads(
        (ws / paths.EVAL_HEADLINE.at(NEW)).read_text()
    )
    assert snakemake_would_run(twin, *targets(NEW)) == set()
    # what is left to commit: dvc.lock, the variant's metrics and plots (the baseline, kept in git), and
    # the line DVC adds to .gitignore for its one cached file in those folders
    baseline = {a.at(NEW).as_posix() for a in paths.ARTEFACTS if a.per_variant and a.in_git}
    assert changed(twin) == {"dvc.lock", gitignore} | baseline
    assert f"/{details.name}" in (twin / gitignore).read_text().splitlines()
