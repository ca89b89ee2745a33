"""The files written from the stage table and the parameter types: dvc.yaml, the Snakemake rules under
workflow/rules/ and the params.yaml JSON schema (`mnist-pipeline generate`; `--check` compares them)."""

import argparse
import functools
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from ..artefacts.atomic import write_text
from ..config.params import Params
from ..foundation import paths
from ..foundation.console import LOG_ENV
from ..foundation.errors import PipelineError
from .jobs import RUNTIME_LOCK, code_files
from .stage_table import POINT_STAGES, SHARED, STAGES, Stage, get

HEADER = (
    "# Written by `mnist-pipeline generate` from src/mnist_jax_pipeline/orchestration/stage_table.py: edit the table.\n"
)
POINT = "sweeps/{sweep}/{point}"
RULE_FILES = {
    "data": ("check", "download", "preprocess"),
    "train": ("train", "evaluate"),
    "profile": ("profile",),
    "report": ("report",),
}
# a per-variant plot's DVC options ({variant} is each variant)
PLOTS = {
    paths.TRAIN_HISTORY: {"template": "epochs", "x": "epoch", "y": "test_accuracy", "title": "Test accuracy per epoch"},
    paths.CONFUSION: {"template": "confusion_log", "x": "predicted", "y": "actual", "title": "Confusion matrix"},
}
# plots/variants.csv's columns that dvc.yaml's plots draw, a line per variant: {column: (title, template)}
HISTORY_PLOTS = {
    "train_loss": ("Training loss per epoch", "variants"),
    "test_accuracy": ("Test accuracy per epoch", "variants"),
    "epoch_seconds": ("Seconds per epoch", "variants_log"),  # nojit's and jit's seconds differ about 100x
}
# outputs shown in Snakemake's own report (--report): their caption and category, in common.smk
SNAKEMAKE_REPORT = {
    paths.REPORT_HTML.path: "REPORT",
    paths.REPORT_MD.path: "SUMMARY",
    paths.REPORT_FIGURES.path: "FIGURES",
}


# --- dvc.yaml -------------------------------------------------------------------------------------------


def dvc_code(stage: Stage) -> list[str]:
    """The stage's code files for dvc.yaml, a folder in place of its files where all of them are listed."""
    files = {f.as_posix() for f in code_files(stage, paths.CODE)}
    whole: list[str] = []
    for folder in sorted({str(Path(f).parent) for f in files if Path(f).parent != paths.CODE}, key=len):
        contents = {p.as_posix() for p in Path(folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
        if contents <= files and not any(folder.startswith(w + "/") for w in whole):
            whole.append(folder)
    kept = [f for f in files if not any(f.startswith(w + "/") for w in whole)]
    return sorted([RUNTIME_LOCK.as_posix(), *whole, *kept])


def _dvc_path(artefact: paths.Artefact, consumer: Stage) -> str:
    """A per-variant path is `${item}` in a per-variant stage, else its folder."""
    if not artefact.per_variant:
        return artefact.path
    return artefact.path.replace("{variant}", "${item}") if consumer.per_variant else str(Path(artefact.path).parent)


def _dvc_out(artefact: paths.Artefact, stage: Stage) -> str | dict:
    """An output's entry; one kept in git is `cache: false` and `persist: true` (DVC cannot restore it, so it
    must not delete it before the stage runs)."""
    path = _dvc_path(artefact, stage)
    plot = PLOTS.get(artefact)
    options: dict = {**plot, "title": f"{plot['title']} (${{item}})"} if plot else {}
    if artefact.in_git:
        options |= {"cache": False, "persist": True}
    return {path: options} if options else path


def dvc_stage(stage: Stage) -> dict:
    entry: dict = {"cmd": stage.cmd("${item}")}
    entry["deps"] = list(dict.fromkeys(_dvc_path(a, stage) for a in stage.inputs)) + dvc_code(stage)
    if stage.whole_file:
        entry["params"] = [{paths.PARAMS: None}]
    elif stage.params:
        entry["params"] = list(stage.params)
    for role, key in (("out", "outs"), ("metrics", "metrics"), ("plots", "plots")):
        if chosen := [_dvc_out(a, stage) for a in stage.outputs if a.role == role]:
            entry[key] = chosen
    return {"foreach": "${variants}", "do": entry} if stage.per_variant else entry


def dvc_yaml() -> str:
    plots = [
        {title: {"template": template, "x": "epoch", "y": {paths.VARIANTS_HISTORY.path: column}}}
        for column, (title, template) in HISTORY_PLOTS.items()
    ]
    document = {"plots": plots, "stages": {stage.name: dvc_stage(stage) for stage in STAGES}}
    return HEADER + yaml.safe_dump(document, sort_keys=False, width=120)


# --- the Snakemake rules ----------------------------------------------------------------------------------


def _name(artefact: paths.Artefact, file: str) -> str:
    """A rule's name for an output: its constant in paths.py, or a file's name inside a folder."""
    if not artefact.files and not artefact.folders:
        return next(name.lower() for name, value in vars(paths).items() if value is artefact)
    return re.sub(r"\W+", "_", re.sub(r"(\.(gz|json|pb|prof|npy|png))+$", "", Path(file).name))


def _files(artefact: paths.Artefact, consumer: Stage, prefix: str = "") -> list[str]:
    """How a rule names an artefact: the files inside a folder, and a per-variant artefact that a stage
    that is not per variant reads as one expand()."""
    names = [prefix + name for name in (artefact.inside(*artefact.files) if artefact.files else [artefact.path])]
    wrap = 'expand("{}", variant=VARIANT_LIST)' if artefact.per_variant and not consumer.per_variant else '"{}"'
    return [wrap.format(name) for name in names]


def _block(key: str, items: list[str]) -> list[str]:
    return [f"    {key}:", *(f"        {item}," for item in items)]


def _outputs(stage: Stage, prefix: str = "") -> list[str]:
    items = []
    for artefact in stage.artefacts:
        shown = SNAKEMAKE_REPORT.get(artefact.path)
        for file in artefact.inside(*artefact.files) if artefact.files else [artefact.path]:
            value = f'report("{prefix}{file}", **{shown})' if shown else f'"{prefix}{file}"'
            items.append(f"{_name(artefact, file)}=update({value})")
        for kind in artefact.variant_files:
            files = f'expand("{prefix}{artefact.path}/{kind}", variant=VARIANT_LIST)'
            items.append(f"{kind.split('_{')[0]}=update(report({files}, **{shown}))")
        items += [f'{folder}=update(directory("{prefix}{artefact.path}/{folder}"))' for folder in artefact.folders]
    return [*items, f'record=update("{prefix}{stage.record.path}")']


def _inputs(stage: Stage, prefix: str = "") -> list[str]:
    """The job's marker, the records of the jobs it reads (their times link the jobs), then what it reads of
    them, ancient(): a file time alone never runs a job."""
    records, files = [], []
    for artefact in stage.inputs:
        where = "" if artefact.made_by in SHARED else prefix
        records += [r for r in _files(get(artefact.made_by).record, stage, where) if r not in records]
        files += [f"ancient({f})" for f in _files(artefact, stage, where)]
    return [f'"{paths.MARKERS}/{prefix}{Path(stage.record.path).name}"', *records, *files]


def _rule(stage: Stage) -> list[str]:
    suffix = "_{variant}" if stage.per_variant else ""
    lines = [f"rule {stage.name}:", *_block("input", _inputs(stage)), *_block("output", _outputs(stage))]
    lines += _block("log", [f'"logs/{stage.name}{suffix}.log"'])
    if stage.per_variant:
        lines += _block("wildcard_constraints", ["variant=VARIANTS"])
    if stage.name in SHARED:
        lines += ["    cache: CACHE", *_block("params", [f'key=cache_key("{stage.name}")'])]
    if stage.per_variant or stage.name == "download":
        lines.append("    threads: workflow.cores")
    return lines + ["    shell:", f'        "{LOG_ENV}={{log:q}} {stage.cmd("{wildcards.variant}")}"']


def _point_rule(stage: Stage) -> list[str]:
    """A sweep point's job of `stage`: its outputs under the point's folder, its params.yaml there."""
    inputs = [*_inputs(stage, f"{POINT}/"), f'params="{POINT}/{paths.PARAMS}"']
    lines = [f"rule sweep_{stage.name}:", *_block("input", inputs), *_block("output", _outputs(stage, f"{POINT}/"))]
    lines += _block("log", [f'"logs/{POINT}/{stage.name}_{{variant}}.log"'])
    lines += _block("wildcard_constraints", ["variant=ALL_VARIANTS"])
    command = (
        f"mnist-pipeline --params {{input.params:q}} {stage.name} --variant {{wildcards.variant}}"
        " --root sweeps/{wildcards.sweep}/{wildcards.point:q}"
    )
    return lines + ["    shell:", f'        POINT_LOCK + "{LOG_ENV}={{log:q}} {command}"']


def _formatted(text: str) -> str:
    """`text` as snakefmt formats it, as the test command checks every Snakemake file."""
    tool = shutil.which("snakefmt") or str(Path(sys.executable).parent / "snakefmt")
    try:
        done = subprocess.run([tool, "-l", "120", "-"], input=text, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        raise PipelineError(
            "snakefmt, which formats the rules, is missing or failed; run with the dev tools:"
            " uv run --group dev mnist-pipeline generate"
        ) from err
    return done.stdout


def rule_file(name: str) -> str:
    """The text of workflow/rules/<name>.smk."""
    rule, stages = (_point_rule, POINT_STAGES) if name == "sweep" else (_rule, RULE_FILES[name])
    return _formatted(HEADER + "\n\n" + "\n\n\n".join("\n".join(rule(get(stage))) for stage in stages) + "\n")


GENERATED: dict[Path, Callable[[], str]] = {
    Path("dvc.yaml"): dvc_yaml,
    Path("workflow/schemas/params.schema.json"): lambda: json.dumps(Params.model_json_schema(), indent=2) + "\n",
    **{Path(f"workflow/rules/{name}.smk"): functools.partial(rule_file, name) for name in [*RULE_FILES, "sweep"]},
}


def stale() -> list[Path]:
    """The generated files whose copy differs from what the tables give now."""
    return [p for p, make in GENERATED.items() if not p.is_file() or p.read_text(encoding="utf-8") != make()]


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline generate [--check]`."""
    if not Path("Snakefile").is_file():  # elsewhere it would write a second pipeline
        raise PipelineError(f"{Path.cwd()}: no Snakefile here; run generate from the project root")
    if args.check:
        if outdated := stale():
            raise PipelineError(
                f"{', '.join(map(str, outdated))}: out of date with the stage table or the params types;"
                " run `mnist-pipeline generate`"
            )
        print("generated files are current: " + ", ".join(map(str, GENERATED)))
        return
    for path, make in GENERATED.items():
        write_text(path, make())
    print("wrote " + ", ".join(map(str, GENERATED)), file=sys.stderr)  # all or none, by atomic.together()
