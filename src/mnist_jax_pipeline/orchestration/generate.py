"""The files derived from the stage table and the params types: dvc.yaml and the params.yaml
JSON schema, written by `mnist-pipeline generate` (checked with `--check`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from ..config.params import schema
from ..foundation import paths
from ..foundation.errors import PipelineError
from .code_deps import CODE_ROOT, code_files
from .stage_table import STAGES, Stage

DVC_YAML = Path("dvc.yaml")
SCHEMA_JSON = Path("workflow/schemas/params.schema.json")


def _dvc_code(files: list[str], root: Path = CODE_ROOT) -> list[str]:
    """Files, with a sub-package folder in place of its files when all of them are listed."""
    listed = set(files)
    folders = sorted({str(Path(f).parent) for f in files if Path(f).parent != root}, key=len)
    whole: list[str] = []
    for folder in folders:
        contents = {str(p) for p in Path(folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
        if contents <= listed and not any(folder.startswith(w + "/") for w in whole):
            whole.append(folder)
    return sorted(whole + [f for f in files if not any(f.startswith(w + "/") for w in whole)])


# --- dvc.yaml ------------------------------------------------------------------------------------------


def _dvc_path(artefact: paths.Artefact, consumer: Stage) -> str:
    """How a stage names an artefact in dvc.yaml: per-variant paths use `${item}` in a per-variant stage,
    else their folder."""
    if not artefact.per_variant:
        return artefact.path
    if consumer.per_variant:
        return artefact.path.replace("{variant}", "${item}")
    return str(Path(artefact.path).parent)


def _plot(artefact: paths.Artefact, path: str) -> dict:
    assert artefact.plot is not None
    plot = artefact.plot
    spec = {"x": plot.x, "y": plot.y, "title": plot.title.replace("{variant}", "${item}")}
    if plot.template:
        spec = {"template": plot.template, **spec}
    return {path: spec}


def _dvc_out(artefact: paths.Artefact, stage: Stage) -> str | dict:
    """An output's dvc.yaml entry: its path, with its plot's options, and `cache: false` for one kept in git.
    Those are also `persist: true`: DVC cannot restore them from its cache, so it must not delete them
    before the stage runs (the stage replaces them atomically, only when it succeeds)."""
    path = _dvc_path(artefact, stage)
    kept = {"cache": False, "persist": True} if artefact.in_git else {}
    options = (_plot(artefact, path)[path] if artefact.plot else {}) | kept
    return {path: options} if options else path


def dvc_stage(stage: Stage) -> dict:
    code = _dvc_code(code_files(stage))
    entry: dict = {"cmd": stage.cmd("${item}")}
    deps = list(dict.fromkeys(_dvc_path(a, stage) for a in stage.inputs))
    entry["deps"] = deps + code
    if stage.whole_file:
        entry["params"] = [{"params.yaml": None}]
    elif stage.params:
        entry["params"] = list(stage.params)
    for role in ("out", "metrics", "plots"):
        chosen = [a for a in stage.outputs if a.role == role]
        if not chosen:
            continue
        key = "outs" if role == "out" else role
        entry[key] = [_dvc_out(a, stage) for a in chosen]
    return {"foreach": "${variants}", "do": entry} if stage.per_variant else entry


def dvc_yaml() -> str:
    """The text of dvc.yaml."""
    top_plots = [
        {title: {"template": template, "x": "epoch", "y": {paths.VARIANTS_HISTORY.path: column}}}
        for column, (title, template) in paths.HISTORY_PLOTS.items()
    ]
    document = {"plots": top_plots, "stages": {stage.name: dvc_stage(stage) for stage in STAGES}}
    header = (
        "# Generated from src/mnist_jax_pipeline/orchestration/stage_table.py by `mnist-pipeline generate`:\n"
        "# edit the stage table there, not this file (tests/test_stages.py fails when this copy is stale).\n"
        "# The top-level plots draw one line per variant that ran (templates: .dvc/plots/variants*.json).\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, width=120)


def schema_json() -> str:
    return json.dumps(schema(), indent=2) + "\n"


GENERATED = {DVC_YAML: dvc_yaml, SCHEMA_JSON: schema_json}


def stale() -> list[Path]:
    """The generated files whose committed copy differs from what the tables give now."""
    return [
        path for path, make in GENERATED.items() if not path.is_file() or path.read_text(encoding="utf-8") != make()
    ]


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline generate [--check]`."""
    if args.check:
        outdated = stale()
        if outdated:
            raise PipelineError(
                f"{', '.join(map(str, outdated))}: out of date with the stage table or the"
                " params types; run `mnist-pipeline generate`"
            )
        print("generated files are current: " + ", ".join(map(str, GENERATED)))
        return
    from ..artefacts.atomic import write_text

    for path, make in GENERATED.items():
        write_text(path, make())
        print(f"wrote {path}", file=sys.stderr)
