"""Sweeps: a grid of `model.*` and `train.*` changes to params.yaml, declared in `sweeps/<name>.yaml` (docs/sweeps.md)
and run by Snakemake, each point's outputs under `sweeps/<name>/<point>/`, or queued as DVC experiments.
"""

import argparse
import copy
import functools
import hashlib
import itertools
import json
import operator
import re
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..artefacts import atomic
from ..foundation import paths
from ..foundation.errors import PipelineError, clip
from .params import Params, VariantName, read_yaml, validate

SWEPT_SECTIONS = ("model", "train")  # download and preprocess stay shared by every point
POINT_SECTIONS = ("data", "preprocess", *SWEPT_SECTIONS, "variants")  # what a point's train and evaluate read
MAX_POINTS = 1_000  # each point is a folder and two jobs, which Snakemake plans before it runs one
NAME_LIMIT = 100  # characters of a point's name (a folder, part of a DVC experiment's name)
# a folder beside the sweep files, a Snakemake wildcard and part of a git ref (no '..', no '.lock' or '.' at the end)
SWEEP_NAME = re.compile(r"(?!.*\.\.)(?!.*\.(lock|yaml)$)[A-Za-z0-9][A-Za-z0-9._-]*(?<!\.)")


class SweepFile(BaseModel):
    """The format of sweeps/<name>.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    variant: VariantName = "jit_scan"  # type: ignore[valid-type]
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    points: list[dict[str, Any]] = Field(default_factory=list)


class Point(NamedTuple):
    name: str  # its folder, e.g. 'step_size=0.1,batch_size=512'
    changes: dict[str, Any]  # dotted key -> value
    validated: Params  # its parameters, as the stages read them


class Sweep(NamedTuple):
    name: str
    variant: str
    points: tuple[Point, ...]
    base: dict[str, Any]  # the params.yaml the points change

    def params(self, point: Point) -> dict[str, Any]:
        """The point's params.yaml: the base with its changes, training the sweep's variant only."""
        return apply(self.base, with_variant(point.changes, self.variant))

    def read_by_point(self, point: Point) -> dict[str, Any]:
        """The sections of the point's params that its stages read: a change to them re-runs it."""
        params = self.params(point)
        return {section: params[section] for section in POINT_SECTIONS}

    def folder(self, point: Point | None = None) -> Path:
        return paths.SWEEPS / self.name / (point.name if point else "")

    def compared_from(self) -> list[Path]:
        """What the sweep's comparison is made from: its points' folders, and the checkout's code (an installed
        package has no checkout)."""
        return [*map(self.folder, self.points), *([paths.CODE] if paths.CODE.is_dir() else [])]


def with_variant(changes: dict[str, Any], variant: str) -> dict[str, Any]:
    """A point's changes, with the one variant that the sweep trains."""
    return {**changes, "variants": [variant]}


def apply(base: dict[str, Any], changes: dict[str, Any], source: str = "") -> dict[str, Any]:
    """A copy of `base` with dotted keys set; `source` names the changes in a refusal."""
    raw = copy.deepcopy(base)
    for dotted, value in changes.items():
        node = raw
        *parents, last = dotted.split(".")
        for depth, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise PipelineError(
                    f"{source}'{clip(dotted)}': {clip('.'.join(parents[: depth + 1]))} is a value, not a"
                    " section; check the key against docs/parameters.md"
                )
        node[last] = value
    return raw


def _label(value: Any) -> str:
    """A value as it appears in a point's name (a folder and a git ref: no brackets, no spaces)."""
    if isinstance(value, list | tuple):
        return "x".join(_label(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def point_name(changes: dict[str, Any]) -> str:
    """'batch_size=512,step_size=0.1' for the changes (keys sorted by the caller): the last part of each key, the full
    key where two would clash; a name over NAME_LIMIT is cut and given a hash of the whole."""
    short = [key.rsplit(".", 1)[-1] for key in changes]
    keys = [s if short.count(s) == 1 else key for s, key in zip(short, changes, strict=True)]
    name = ",".join(f"{k}={_label(v)}" for k, v in zip(keys, changes.values(), strict=True)) or "base"
    if len(name) > NAME_LIMIT:
        name = f"{name[: NAME_LIMIT - 11].rstrip(',=')}-{hashlib.sha256(name.encode()).hexdigest()[:10]}"
    return name


def file(name: str) -> Path:
    """The file that declares the sweep `name`: sweeps/<name>.yaml."""
    return paths.SWEEPS / f"{name}.yaml"


def named(name: str) -> Path:
    """The file of the sweep `--sweep NAME` names."""
    if not SWEEP_NAME.fullmatch(name):
        raise PipelineError(f"--sweep {clip(name)}: not a sweep's name; give the NAME of a file sweeps/NAME.yaml")
    return file(name)


def _read_spec(path: Path) -> SweepFile:
    """The sweep file, its name, format and grid checked (one line naming the file and the fix)."""
    if path.suffix != ".yaml" and not path.is_dir():  # a folder: read_yaml says so
        raise PipelineError(f"{path}: a sweep file is named NAME.yaml; rename it {path.with_suffix('.yaml')}")
    if not SWEEP_NAME.fullmatch(path.stem):
        raise PipelineError(
            f"{path}: '{path.stem}' cannot name a sweep (a folder and a DVC experiment);"
            " rename the file with letters, digits, '.', '_' and '-' (no '..'; no '.', '.lock' or '.yaml' at the end)"
        )
    raw = read_yaml(path, missing="name a sweep that exists (the files sweeps/NAME.yaml)")
    if not isinstance(raw, dict):
        raise PipelineError(f"{path}: a sweep file is a mapping of 'variant', 'grid' and 'points'; see docs/sweeps.md")
    try:
        spec = SweepFile.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = clip(".".join(str(part) for part in first["loc"])) or "the file"
        raise PipelineError(f"{path}: {where}: {first['msg'].lower()}; fix the sweep file") from None
    # one empty list would leave no combination: the whole grid would be dropped
    if (empty := next((key for key, values in spec.grid.items() if not values), None)) is not None:
        raise PipelineError(f"{path}: grid: '{clip(empty)}' has no values, so no point; give it one or remove it")
    if (count := functools.reduce(operator.mul, map(len, spec.grid.values()), 1) + len(spec.points)) > MAX_POINTS:
        raise PipelineError(f"{path}: {count:,} points, more than the {MAX_POINTS:,} a sweep may have; split it")
    return spec


def load(path: str | Path, params_path: str | Path = paths.PARAMS) -> Sweep:
    """A sweep file, every point checked as a params.yaml of its own, its changes kept as the validated values, keys
    sorted: `1` and `1.0` for a float, `0.0` and `-0.0`, or the same keys in another order, make the same point."""
    path = Path(path)
    spec = _read_spec(path)
    base = read_yaml(params_path)
    validate(base, str(params_path))
    grid = [dict(zip(spec.grid, values, strict=True)) for values in itertools.product(*spec.grid.values())]
    points: list[Point] = []
    seen: dict[str, str] = {}  # each point's parameters, as JSON: its name
    for changes in [*(grid if spec.grid else []), *spec.points]:
        for key, value in changes.items():
            if "." not in key and isinstance(value, dict):
                example = next(iter(value), "step_size")
                raise PipelineError(
                    f"{path}: '{clip(key)}' is a section; write each change as a dotted key,"
                    f" e.g. {clip(key)}.{clip(str(example))}: ..."
                )
            if key.split(".")[0] not in SWEPT_SECTIONS:
                raise PipelineError(
                    f"{path}: '{clip(key)}' cannot vary in a sweep: only model.* and train.* keys do"
                    " (every point shares one download and preprocess)"
                )
        changed = apply(base, with_variant(changes, spec.variant), f"{path}: ")
        validated = validate(changed, f"{path}, point {point_name(changes)}")
        values = validated.to_dict()
        canonical = {key: functools.reduce(operator.getitem, key.split("."), values) for key in sorted(changes)}
        points.append(Point(point_name(canonical), canonical, validated))
        unsigned = json.loads(json.dumps(values), parse_float=lambda s: float(s) + 0)  # -0.0 + 0 is 0.0
        same = seen.setdefault(json.dumps(unsigned, sort_keys=True), points[-1].name)
        if len(seen) < len(points):
            raise PipelineError(f"{path}: points '{same}' and '{points[-1].name}' give the same parameters; list one")
    if not points:
        raise PipelineError(f"{path}: no point; give a grid or points")
    return Sweep(path.stem, spec.variant, tuple(points), base)


def discover(folder: Path = paths.SWEEPS, params_path: str | Path = paths.PARAMS) -> tuple[dict[str, Sweep], list[str]]:
    """Every sweep of the project by name (sweeps/*.yaml, and a misnamed *.yml refused), and the one-line
    errors of the files that are not valid."""
    found: dict[str, Sweep] = {}
    errors: list[str] = []
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
        try:
            found[path.stem] = load(path, params_path)
        except PipelineError as err:
            errors.append(str(err))
    return found, errors


def write_point(args: argparse.Namespace) -> None:
    """`mnist-pipeline sweep-point --sweep NAME --point POINT`: the point's params.yaml."""
    sweep = load(named(args.sweep), args.params)
    if (point := next((p for p in sweep.points if p.name == args.point), None)) is None:
        listed = clip(", ".join(p.name for p in sweep.points), 200)
        raise PipelineError(f"sweep '{sweep.name}': no point '{clip(args.point)}'; its points: {listed}")
    atomic.write_text(sweep.folder(point) / paths.PARAMS, yaml.safe_dump(sweep.params(point), sort_keys=False))
