"""One declaration per fact: the stage table, the variant registry and the files written from them.

Each stage's code is declared in the table: the declaration must be exactly what its command can import
(read from the import statements), and cover every module its command does import when it runs.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, tiny_params_dict, write_params, write_raw
from mnist_jax_pipeline import cli
from mnist_jax_pipeline.config.params import Params
from mnist_jax_pipeline.foundation import paths, variants
from mnist_jax_pipeline.orchestration import commands, generate, stage_table
from mnist_jax_pipeline.orchestration.jobs import code_files

PACKAGE = "mnist_jax_pipeline"
RECORD = """
import atexit, json, sys
out = sys.argv.pop(1)
def dump():
    with open(out, "w") as handle:
        json.dump(sorted(m for m in sys.modules if m == "{package}" or m.startswith("{package}.")), handle)
atexit.register(dump)
from {package}.cli import main
sys.exit(main(sys.argv[1:]))
""".replace("{package}", PACKAGE)


def test_generated_files_are_current(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert generate.stale() == [], "run `mnist-pipeline generate` and commit the result"


@pytest.mark.parametrize("check", [[], ["--check"]])
def test_generate_elsewhere_than_the_project_root_is_refused(tmp_path, monkeypatch, capsys, check):
    """From a subfolder, generate would write a second dvc.yaml there, which breaks `dvc status`."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["generate", *check]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: {tmp_path}: no Snakefile here; run generate from the project root"], err
    assert list(tmp_path.iterdir()) == []


def test_generate_that_fails_writes_nothing_and_says_so(tmp_path, monkeypatch, capsys):
    """A file that cannot be made (snakefmt missing, say) leaves every generated file as it was, and no line
    claims one was written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Snakefile").write_text("")

    def cannot() -> str:
        raise generate.PipelineError("snakefmt: missing")

    monkeypatch.setattr(generate, "GENERATED", {Path("dvc.yaml"): lambda: "stages: {}\n", Path("b.smk"): cannot})
    assert cli.main(["generate"]) == 1
    assert capsys.readouterr().err.splitlines() == ["error: snakefmt: missing"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Snakefile"]


def test_every_artefact_is_made_by_a_stage_and_every_input_by_an_earlier_one():
    names = [stage.name for stage in stage_table.STAGES]
    assert {a.made_by for a in paths.ARTEFACTS} <= set(names)
    for position, stage in enumerate(stage_table.STAGES):
        assert stage.name in commands.COMMANDS
        for artefact in stage.inputs:
            assert names.index(artefact.made_by) < position, f"{stage.name} reads {artefact.path} too early"
        assert set(stage.params) <= set(Params.model_json_schema()["properties"]), stage.name


def test_variant_choices_derive_from_the_registry():
    assert Params.model_json_schema()["properties"]["variants"]["items"]["enum"] == list(variants.names())
    train = cli.build_parser()._subparsers._group_actions[0].choices["train"]  # type: ignore[union-attr]
    choices = next(a.choices for a in train._actions if a.dest == "variant")
    assert tuple(choices) == variants.names()
    plots = yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]
    for plot in plots:  # one file holds every variant that ran; the template draws a line per variant
        (spec,) = plot.values()
        assert list(spec["y"]) == [paths.VARIANTS_HISTORY.path]
        template = json.loads((ROOT / ".dvc" / "plots" / f"{spec['template']}.json").read_text())
        assert template["encoding"]["color"]["field"] == "variant"


def _fields(node: object, read: set[str], made: set[str]) -> None:
    """Collect the data fields a Vega-Lite template reads ('field', 'groupby') and those it computes ('as')."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "field" and isinstance(value, str):
                read.add(value)
            elif key == "groupby" and isinstance(value, list):
                read.update(value)
            elif key == "as" and isinstance(value, str):
                made.add(value)
            _fields(value, read, made)
    elif isinstance(node, list):
        for item in node:
            _fields(item, read, made)


def test_every_dvc_plot_reads_columns_its_file_has_and_its_legend_names_revisions():
    """A field that a template or a plot names and the CSV lacks draws nothing (Vega warns 'Infinite extent'); a
    revision told by a dash alone shows in the legend as identical dots."""
    document = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    plots = [
        (path, spec | {"y": column})
        for plot in document["plots"]
        for spec in plot.values()
        for path, column in spec["y"].items()
    ]
    plots += [
        (path.replace("${item}", "jit"), spec)
        for stage in document["stages"].values()
        for entry in stage.get("do", stage).get("plots", [])
        for path, spec in entry.items()
    ]
    assert {spec["template"] for _, spec in plots} == {"variants", "variants_log", "epochs", "confusion_log"}
    for path, spec in plots:
        columns = set((ROOT / path).read_text().splitlines()[0].split(","))
        template = json.loads((ROOT / ".dvc" / "plots" / f"{spec['template']}.json").read_text())
        read: set[str] = set()
        made: set[str] = set()
        _fields(template, read, made)
        anchors = {"<DVC_METRIC_X>": spec["x"], "<DVC_METRIC_Y>": spec["y"]}
        wanted = {anchors.get(name, name) for name in read} - made - {"rev"}  # DVC adds each row's revision
        assert wanted <= columns, f"{path} ({spec['template']}): no column {sorted(wanted - columns)}"
        encodings = [template.get("encoding", {})] + [layer.get("encoding", {}) for layer in template.get("layer", [])]
        legends = {
            channel
            for encoding in encodings
            for channel, e in encoding.items()
            if e.get("field") == "rev" and e.get("legend", {}) is not None
        }
        if "facet" not in template:
            assert legends & {"color", "shape"}, spec["template"]
    confusion = next(spec for path, spec in plots if spec["template"] == "confusion_log")
    assert (confusion["x"], confusion["y"]) == ("predicted", "actual")  # as the report: actual on y


def _dvc_deps() -> dict[str, list[str]]:
    document = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return {name: (entry.get("do", entry)).get("deps", []) for name, entry in document.items()}


def _covered(path: str, deps: list[str]) -> bool:
    return any(path == dep or path.startswith(dep.rstrip("/") + "/") for dep in deps)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, set[str]]:
    """{stage: package source files its command imported}, each command run in a fresh interpreter."""
    tree = tmp_path_factory.mktemp("imports")
    write_raw(tree / "data" / "raw")
    write_params(tree / "params.yaml", tiny_params_dict(variants=["jit"]))
    bad_mirror = tree / "mirror"
    bad_mirror.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "MNIST_MIRROR": str(bad_mirror),
        "MNIST_PIPELINE_LOCK": str(tree / "lock"),
    }
    commands = {stage.name: (stage.cmd("jit").split()[1:], 0) for stage in stage_table.STAGES}  # in the DAG's order
    commands["download"] = (["download", "--out", "data/raw2"], 1)  # stops at the mirror check, after its imports
    found = {}
    for stage, (args, status) in commands.items():
        record = tree / f"{stage}.json"
        done = subprocess.run(
            [sys.executable, "-c", RECORD, str(record), *args],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == status, f"{stage}: {done.stderr[-2000:]}"
        files = set()
        for module in json.loads(record.read_text()):
            relative = Path(*module.split("."))
            path = ROOT / "src" / relative.with_suffix(".py")
            path = path if path.is_file() else ROOT / "src" / relative / "__init__.py"
            files.add(path.relative_to(ROOT).as_posix())
        found[stage] = files
    return found


@pytest.mark.slow
@pytest.mark.parametrize("stage", [stage.name for stage in stage_table.STAGES])
def test_code_deps_cover_every_module_the_command_imports(imported, stage):
    deps = _dvc_deps()[stage]
    missing = sorted(f for f in imported[stage] if not _covered(f, deps))
    assert not missing, f"{stage}: imports {missing}, not among its deps in dvc.yaml"
    assert f"src/{PACKAGE}/cli.py" in imported[stage]


def test_package_data_the_report_reads_is_a_dep():
    deps = _dvc_deps()["report"]
    for template in (ROOT / "src" / PACKAGE / "stages" / "report" / "templates").iterdir():
        assert _covered(template.relative_to(ROOT).as_posix(), deps)


def _imports(module: str) -> set[str]:
    """The package modules `module`'s import statements name (those inside functions too)."""
    path = ROOT / "src" / Path(*module.split("."))
    file = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            parts = module.split(".")[: len(module.split(".")) - node.level + (file.name == "__init__.py")]
            base = ".".join([*parts, *([node.module] if node.module else [])])
            found |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found |= {name for name in names if name.split(".")[0] == PACKAGE}
    src = ROOT / "src"
    return {
        m
        for m in found
        if (src / Path(*m.split("."))).with_suffix(".py").is_file()
        or (src / Path(*m.split(".")) / "__init__.py").is_file()
    }


def _closure(module: str) -> set[str]:
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 2)}
        for found in parents - seen:
            seen.add(found)
            todo.extend(_imports(found))
    return seen


@pytest.mark.parametrize("stage", [stage.name for stage in stage_table.STAGES])
def test_a_stages_declared_code_is_exactly_what_its_command_can_import(stage):
    module = commands.COMMANDS[stage].module.partition(":")[0]
    modules = _closure(f"{PACKAGE}.cli") | _closure(f"{PACKAGE}.{module}")
    wanted = set()
    for name in modules:
        path = Path("src", *name.split("."))
        wanted.add(path.with_suffix(".py") if (ROOT / path.with_suffix(".py")).is_file() else path / "__init__.py")
    root = ROOT / "src" / PACKAGE
    declared = {f.relative_to(ROOT) for f in code_files(stage_table.get(stage), root)}
    assert {f for f in declared if f.suffix == ".py"} == wanted, stage
    data = {f for f in declared if f.suffix != ".py"}
    report = Path("src", PACKAGE, "stages", "report")  # its templates and its matplotlib style
    assert all(f.is_relative_to(report) for f in data) and bool(data) == (stage == "report")
