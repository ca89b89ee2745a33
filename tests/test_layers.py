"""The package's dependencies point down: every module imports only its own layer or lower ones,
the stages import none of each other, and no module's name shadows a standard-library module.

Read from the source with `ast` (function-level and TYPE_CHECKING imports included), so a new
import that climbs a layer fails here, naming the file, its line and the import.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = "mnist_jax_pipeline"
SRC = Path(__file__).resolve().parents[1] / "src" / PACKAGE
# Snakemake's console, a package of its own that Snakemake loads into its process: it may import the
# package's foundation only (a job's label, console.py), so that drawing a line never loads JAX, the
# parameters or the stage table.
PLUGIN = "snakemake_logger_plugin_mnist_pipeline"
PLUGIN_SRC = SRC.parent / PLUGIN

# Lowest first. A unit is a top-level module or subpackage of the package, or a subpackage's member
# where LAYERS names it (dotted): the longest name in LAYERS that a module's name starts with.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundation", frozenset({"foundation"})),
    ("artefacts", frozenset({"artefacts"})),
    ("config", frozenset({"config"})),
    ("JAX core", frozenset({"mlp"})),
    (
        "stages",
        frozenset(
            {
                "stages",
                "stages.download",
                "stages.preprocess",
                "stages.train",
                "stages.evaluate",
                "stages.profile",
                "stages.report",
            }
        ),
    ),
    # The comparison commands (`compare`, `show`) draw their page with the report's figures and templates.
    ("comparison", frozenset({"comparison"})),
    ("orchestration", frozenset({"orchestration"})),
    ("entry point", frozenset({"cli"})),
)
# Layers whose units are independent of each other: one stage reads another's outputs through
# artefacts/, never its code (the report shows the profile without importing profiling/).
INDEPENDENT = {"stages"}
LEVEL = {unit: level for level, (_, units) in enumerate(LAYERS) for unit in units}
LAYER_NAME = {unit: name for name, units in LAYERS for unit in units}


def modules() -> list[tuple[str, Path]]:
    """Every module of the package as (dotted name without the package, path)."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.append((".".join(parts), path))
    return found


def unit_of(dotted: str) -> str:
    parts = dotted.split(".")
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in LEVEL:
            return ".".join(parts[:end])
    return parts[0]


MODULES = {name for name, _ in modules()}


def imported(module: str, path: Path, text: str, relative: bool = True) -> list[tuple[int, str]]:
    """(line, dotted module inside the package) for every import of the package in `text`, the
    source of `module` at `path` (relative=False: a module outside the package, whose relative imports
    are its own package's)."""
    is_package = path.name == "__init__.py"
    here = module.split(".") if module else []
    base = here if is_package else here[:-1]
    found = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    found.append((node.lineno, alias.name.removeprefix(PACKAGE).lstrip(".")))
        elif isinstance(node, ast.ImportFrom):
            if node.level and not relative:
                continue
            if node.level:
                anchor = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = [*anchor, *(node.module.split(".") if node.module else [])]
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                target = node.module.removeprefix(PACKAGE).lstrip(".").split(".") if node.module != PACKAGE else []
            else:
                continue
            target = [t for t in target if t]
            if target:  # `from .pkg import module` imports the module
                dotted = ".".join(target)
                members = [f"{dotted}.{alias.name}" for alias in node.names if f"{dotted}.{alias.name}" in MODULES]
                rest = [dotted] if len(members) < len(node.names) else []
                found.extend((node.lineno, name) for name in members + rest)
            else:  # `from . import a, b` at the package's top: each name is a unit
                found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def violations(module: str, path: Path, text: str | None = None) -> list[str]:
    """One line per import of `module` (its source `text`, by default read from `path`) that climbs a
    layer or crosses between independent units."""
    if not module:  # the package's __init__
        return []
    unit = unit_of(module)
    bad = []
    text = path.read_text(encoding="utf-8") if text is None else text
    for line, target in imported(module, path, text):
        other = unit_of(target)
        if other == unit:
            continue
        where = f"{path.relative_to(SRC.parents[1])}:{line} imports {PACKAGE}.{target}"
        if other not in LEVEL:
            bad.append(f"{where}: '{other}' is in no layer; add it to LAYERS in tests/test_layers.py")
        elif LEVEL[other] > LEVEL[unit]:
            bad.append(f"{where}: layer '{LAYER_NAME[other]}' is above '{LAYER_NAME[unit]}'")
        elif LEVEL[other] == LEVEL[unit] and LAYER_NAME[unit] in INDEPENDENT:
            bad.append(f"{where}: '{unit}' and '{other}' are independent {LAYER_NAME[unit]}")
    return bad


def plugin_violations(path: Path, text: str | None = None) -> list[str]:
    """One line per import of the package by the logger plugin's module at `path` that is not the foundation."""
    text = path.read_text(encoding="utf-8") if text is None else text
    foundation_name, foundation = LAYERS[0]
    return [
        f"{path.relative_to(SRC.parents[1])}:{line} imports {PACKAGE}.{target}: the logger plugin may import"
        f" the '{foundation_name}' layer only"
        for line, target in imported("", path, text, relative=False)
        if unit_of(target) not in foundation
    ]


def test_the_logger_plugin_imports_the_foundation_only() -> None:
    plugin_modules = sorted(PLUGIN_SRC.rglob("*.py"))
    assert plugin_modules, f"{PLUGIN_SRC}: no modules"
    bad = [line for path in plugin_modules for line in plugin_violations(path)]
    assert bad == [], "\n".join(bad)
    used = {target for path in plugin_modules for _, target in imported("", path, path.read_text(), relative=False)}
    assert used == {"foundation.console", "foundation.paths"}, used  # a change here is deliberate


@pytest.mark.parametrize(
    "source",
    [
        "from mnist_jax_pipeline.config.params import load\n",
        "def f():\n    import mnist_jax_pipeline.orchestration.freshness\n",
        "from mnist_jax_pipeline.foundation import console\nfrom mnist_jax_pipeline import cli\n",
    ],
)
def test_a_plugin_import_above_the_foundation_is_named(source: str) -> None:
    found = plugin_violations(PLUGIN_SRC / "lines.py", source)
    assert len(found) == 1 and "the logger plugin may import the 'foundation' layer only" in found[0], found
    assert found[0].startswith(f"src/{PLUGIN}/lines.py:"), found


def test_every_unit_of_the_package_has_a_layer() -> None:
    units = {unit_of(m) for m, _ in modules() if m}
    assert units - set(LEVEL) == set(), "add these to LAYERS in tests/test_layers.py"
    assert set(LEVEL) - units == set(), "LAYERS names units the package no longer has"


def test_imports_point_down() -> None:
    bad = [line for module, path in modules() for line in violations(module, path)]
    assert bad == [], "\n".join(bad)


def test_no_module_shadows_the_standard_library() -> None:
    shadowing = [
        f"{path.relative_to(SRC.parents[1])}: '{path.stem}' is a standard-library module; rename it"
        for _, path in modules()
        if path.stem in sys.stdlib_module_names
    ]
    assert shadowing == [], "\n".join(shadowing)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from ...cli import main\n", "mnist_jax_pipeline.cli: layer 'entry point' is above 'JAX core'"),
        (
            "from ..stages.report.figures import draw\n",
            "mnist_jax_pipeline.stages.report.figures: layer 'stages' is above 'JAX core'",
        ),
        (
            "def f():\n    from mnist_jax_pipeline.stages import train\n",
            "mnist_jax_pipeline.stages.train: layer 'stages' is above",
        ),
        (
            "from ... import cli\nfrom . import loops\n",
            "mnist_jax_pipeline.cli: layer 'entry point' is above 'JAX core'",
        ),
    ],
)
def test_a_climbing_import_is_named(source: str, expected: str) -> None:
    found = violations("mlp.model", SRC / "mlp" / "model.py", source)
    assert len(found) == 1 and expected in found[0], found
    assert found[0].startswith("src/mnist_jax_pipeline/mlp/model.py:"), found


def test_a_stage_importing_another_stage_is_named() -> None:
    memory = SRC / "stages" / "report" / "memory.py"
    found = violations("stages.report.memory", memory, "from ..profile.pprof import short_frame\n")
    assert found == [
        "src/mnist_jax_pipeline/stages/report/memory.py:1 imports mnist_jax_pipeline.stages.profile.pprof:"
        " 'stages.report' and 'stages.profile' are independent stages"
    ]


def test_an_import_within_a_unit_or_downwards_passes() -> None:
    source = (
        "from . import storage\nfrom ..foundation.errors import PipelineError\nfrom ..foundation import dataset_facts\n"
    )
    assert violations("artefacts.dataset", SRC / "artefacts" / "dataset.py", source) == []
