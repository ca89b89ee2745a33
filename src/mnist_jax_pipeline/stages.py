"""The stage table: each stage's command, params, inputs and code, declared once for both tools.

Snakemake reads this table when it parses the workflow (workflow/rules/*.smk); `dvc.yaml` is
generated from it (`mnist-pipeline generate`; a test fails when the committed file is stale),
and so is the JSON schema of params.yaml. Outputs come from paths.py (each artefact names the
stage that writes it). Code deps are complete by construction: they are the package modules
the stage's command imports, followed transitively through every `import` statement, plus
the package data the stage reads.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from . import paths
from .cli import COMMANDS
from .config import Params, schema
from .errors import PipelineError
from .runtime import RUNTIME_LOCK

PACKAGE = __package__
CODE_ROOT = Path("src") / PACKAGE  # the checkout's package, relative to the project root
DVC_YAML = Path("dvc.yaml")
SCHEMA_JSON = Path("workflow/schemas/params.schema.json")
ALL_PARAMS = tuple(Params.model_fields)  # the params.yaml sections


@dataclass(frozen=True)
class Stage:
    name: str
    command: str  # the `mnist-pipeline` command it runs (cli.COMMANDS)
    params: tuple[str, ...]  # params.yaml sections it reads (whole sections; DVC tracks them as such)
    inputs: tuple[paths.Artefact, ...] = ()  # what upstream stages wrote
    per_variant: bool = False  # one stage per variant in params.yaml: `<name>@<variant>`
    data: tuple[str, ...] = ()  # package data it reads, relative to the package (folders or files)
    whole_file: bool = False  # DVC tracks all of params.yaml, not only `params`

    @property
    def outputs(self) -> tuple[paths.Artefact, ...]:
        """What it writes: its artefacts, then its provenance record."""
        return (*self.artefacts, self.stamp)

    @property
    def artefacts(self) -> tuple[paths.Artefact, ...]:
        return tuple(a for a in paths.ARTEFACTS if a.made_by == self.name)

    @property
    def stamp(self) -> paths.Artefact:
        return paths.stamp(self.name, self.per_variant)

    def cmd(self, variant: str) -> str:
        """The command line; `variant` is the placeholder (or name) filled in for a per-variant stage."""
        return f"mnist-pipeline {self.command}" + (f" --variant {variant}" if self.per_variant else "")


STAGES: tuple[Stage, ...] = (
    # params.yaml checked whole, by the rules every stage applies: DVC tracks the whole file for it, so an
    # edit anywhere (an unknown section too) runs it, and is refused under `dvc repro` as under `snakemake`
    Stage("check", "check", params=ALL_PARAMS, whole_file=True),
    Stage("download", "download", params=("data",)),
    Stage("preprocess", "preprocess", params=("preprocess",), inputs=(paths.RAW,)),
    Stage("train", "train", params=("model", "train"), inputs=(paths.PROCESSED,), per_variant=True),
    Stage("evaluate", "evaluate", params=(), inputs=(paths.PROCESSED, paths.MODEL), per_variant=True),
    Stage("profile", "profile", params=("model", "train", "profile"), inputs=(paths.PROCESSED, paths.MODEL),
          per_variant=True),
    Stage("report", "report", params=ALL_PARAMS, data=("report/templates",),
          inputs=(paths.RAW, paths.PROCESSED, paths.PROFILE, paths.TRAIN_METRICS, paths.TRAIN_RUN,
                  paths.TRAIN_HISTORY, paths.EVAL_METRICS, paths.EVAL_DETAILS)),
)


def get(name: str) -> Stage:
    return next(stage for stage in STAGES if stage.name == name)


# --- code deps: the package modules a command imports, transitively --------------------------------


def module_file(module: str, root: Path = CODE_ROOT) -> Path | None:
    """The source file of a package module ('mnist_jax_pipeline.report.render'), or None."""
    parts = module.split(".")[1:]
    candidates = [root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")]
    return next((p for p in candidates if parts and p.is_file()), root / "__init__.py" if not parts else None)


def _imports(module: str, root: Path) -> set[str]:
    """Package modules named by every import statement of `module` (function-level ones too)."""
    path = module_file(module, root)
    assert path is not None, module
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != PACKAGE:
                continue
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names
                         if module_file(f"{target}.{alias.name}", root) is not None)
    return {m for m in found if module_file(m, root) is not None}


def with_parents(module: str) -> set[str]:
    """A module and the packages above it (importing it runs their __init__)."""
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def closure(start: str, root: Path = CODE_ROOT) -> set[str]:
    """Every package module that importing `start` can import, transitively."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        for name in with_parents(module) - seen:
            seen.add(name)
            todo.extend(_imports(name, root))
    return seen


def command_code(command: str, data: tuple[str, ...] = (), root: Path = CODE_ROOT) -> list[str]:
    """The checkout's files a CLI command runs or reads: the modules (closure of the CLI and of the
    command's module) and the package data named in `data`."""
    entry = COMMANDS[command].module.partition(":")[0]
    modules = closure(f"{PACKAGE}.cli", root) | closure(f"{PACKAGE}.{entry}", root)
    files = {module_file(m, root) for m in modules}
    lock = root.parent.parent / RUNTIME_LOCK  # the checkout's, beside src/ (none for an installed package)
    if root.parent.name == "src" and lock.is_file():
        files.add(lock)
    for item in data:
        target = root / item
        files.update(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else files.add(target)
    return sorted(str(p) for p in files if p is not None and "__pycache__" not in p.parts)


def code_files(stage: Stage, root: Path = CODE_ROOT) -> list[str]:
    """The checkout's files a stage's command runs or reads."""
    return command_code(stage.command, stage.data, root)


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
    top_plots = [{title: {"template": paths.HISTORY_TEMPLATE, "x": "epoch",
                          "y": {paths.VARIANTS_HISTORY.path: column}}} for column, title in paths.HISTORY_PLOTS.items()]
    document = {"plots": top_plots, "stages": {stage.name: dvc_stage(stage) for stage in STAGES}}
    header = ("# Generated from src/mnist_jax_pipeline/stages.py by `mnist-pipeline generate`: edit the stage\n"
              "# table there, not this file (tests/test_stages.py fails when this copy is stale).\n"
              "# The top-level plots draw one line per variant that ran (template: .dvc/plots/variants.json).\n")
    return header + yaml.safe_dump(document, sort_keys=False, width=120)


def schema_json() -> str:
    return json.dumps(schema(), indent=2) + "\n"


GENERATED = {DVC_YAML: dvc_yaml, SCHEMA_JSON: schema_json}


def stale() -> list[Path]:
    """The generated files whose committed copy differs from what the tables give now."""
    return [path for path, make in GENERATED.items()
            if not path.is_file() or path.read_text(encoding="utf-8") != make()]


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline generate [--check]`."""
    if args.check:
        outdated = stale()
        if outdated:
            raise PipelineError(f"{', '.join(map(str, outdated))}: out of date with the stage table or the"
                                " params types; run `mnist-pipeline generate`")
        print("generated files are current: " + ", ".join(map(str, GENERATED)))
        return
    from .artefacts.storage import write_text

    for path, make in GENERATED.items():
        write_text(path, make())
        print(f"wrote {path}", file=sys.stderr)


# --- the Snakemake view: files, since Snakemake compares file times --------------------------------------


def _snakemake_paths(artefact: paths.Artefact, consumer: Stage, variant_names: tuple[str, ...]) -> list[str]:
    """The files a stage declares for an artefact: `{variant}` stays a wildcard in a per-variant stage."""
    if artefact.per_variant and not consumer.per_variant:
        if artefact.files:  # a folder per variant: the files inside each
            return [path.as_posix() for v in variant_names for path in artefact.files_at(v)]
        return [artefact.at(v).as_posix() for v in variant_names]
    names = artefact.file_names(variant_names)
    return artefact.inside(*names) if names else [artefact.path]


@cache
def snakemake_inputs(name: str, variant_names: tuple[str, ...]) -> list[str]:
    """The upstream files a stage reads (computed once per workflow parse). Its code files are no
    Snakemake input: the provenance check compares their digests (freshness.py), and the rules carry
    them as a parameter, the key of Snakemake's between-workflow cache (workflow/rules/common.smk)."""
    stage = get(name)
    return [f for a in stage.inputs for f in _snakemake_paths(a, stage, variant_names)]


def point_inputs(name: str, point: str) -> list[str]:
    """A stage's inputs for one sweep point: shared artefacts as they are, the point's own under `point`."""
    stage = get(name)
    shared = {"download", "preprocess"}
    files = []
    for artefact in stage.inputs:
        for path in _snakemake_paths(artefact, stage, ()):
            files.append(path if artefact.made_by in shared else f"{point}/{path}")
    return files


def snakemake_targets(variant_names: tuple[str, ...]) -> list[str]:
    """Every output of every stage, for every variant: Snakemake's default target, so that
    `snakemake` runs each stage of the table, as `dvc repro` does."""
    targets: list[str] = []
    for stage in STAGES:
        files, folders = snakemake_outputs(stage.name, variant_names)
        for path in files + folders:
            filled = [path.replace("{variant}", v) for v in variant_names] if "{variant}" in path else [path]
            targets += [p for p in filled if p not in targets]
    return targets


def snakemake_outputs(name: str, variant_names: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(files, folders) a stage writes; folders are declared whole (directory())."""
    files: list[str] = []
    folders: list[str] = []
    for artefact in get(name).outputs:
        files += _snakemake_paths(artefact, get(name), variant_names)
        folders += artefact.inside(*artefact.folders)
    return files, folders
