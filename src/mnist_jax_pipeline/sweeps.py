"""Sweeps: a grid of parameter changes, declared once in `sweeps/<name>.yaml`, run by Snakemake or
queued as DVC experiments.

    variant: jit_scan            # the variant every point trains
    grid:                        # every combination of these values
      train.step_size: [0.1, 0.3]
      train.batch_size: [128, 512]
    points:                      # more points, each a set of changes (optional)
      - {train.optimizer: adam, train.step_size: 0.001}

A point is `params.yaml` with its changes. Only `model.*` and `train.*` keys may change: every
point shares one download and one preprocess. Under Snakemake each point's outputs live in
`sweeps/<name>/<point>/` (the stages' usual layout under that folder); `snakemake --cores N
sweeps` runs the points N at a time and re-runs only points whose values changed.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import paths
from .artefacts import storage
from .config import DEFAULT_PARAMS, VariantName, read_yaml, validate
from .errors import PipelineError

FOLDER = Path("sweeps")
SWEPT_SECTIONS = ("model", "train")  # download and preprocess stay shared by every point


class SweepFile(BaseModel):
    """The format of sweeps/<name>.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    variant: VariantName = "jit_scan"  # type: ignore[valid-type]
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    points: list[dict[str, Any]] = Field(default_factory=list)


@dataclass(frozen=True)
class Point:
    name: str  # its folder, e.g. 'step_size=0.1,batch_size=512'
    changes: dict[str, Any]  # dotted key -> value


@dataclass(frozen=True)
class Sweep:
    name: str
    variant: str
    points: tuple[Point, ...]
    base: dict[str, Any]  # the params.yaml the points change

    def point(self, name: str) -> Point:
        for point in self.points:
            if point.name == name:
                return point
        raise PipelineError(f"sweep '{self.name}': no point '{name}'; its points: "
                            + ", ".join(p.name for p in self.points))

    def params(self, point: Point) -> dict[str, Any]:
        """The point's params.yaml: the base with its changes, training the sweep's variant only."""
        return apply(self.base, {**point.changes, "variants": [self.variant]})

    def folder(self, point: Point | None = None) -> Path:
        return FOLDER / self.name / (point.name if point else "")


def apply(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A copy of `base` with dotted keys set."""
    raw = copy.deepcopy(base)
    for dotted, value in changes.items():
        node = raw
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return raw


def _label(value: Any) -> str:
    """A value as it appears in a point's name (a folder and a git ref: no brackets, no spaces)."""
    if isinstance(value, list | tuple):
        return "x".join(_label(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def point_name(changes: dict[str, Any]) -> str:
    """'step_size=0.1,batch_size=512': the last part of each key, the full key where two would clash."""
    short = [key.rsplit(".", 1)[-1] for key in changes]
    keys = [s if short.count(s) == 1 else key for s, key in zip(short, changes, strict=True)]
    return ",".join(f"{k}={_label(v)}" for k, v in zip(keys, changes.values(), strict=True)) or "base"


def expand(spec: SweepFile) -> list[dict[str, Any]]:
    """The grid's combinations, then the extra points."""
    keys = list(spec.grid)
    combos = [dict(zip(keys, values, strict=True)) for values in itertools.product(*spec.grid.values())]
    return (combos if keys else []) + [dict(p) for p in spec.points]


def load(path: str | Path, params_path: str | Path = DEFAULT_PARAMS) -> Sweep:
    """A sweep file, every point checked as a params.yaml of its own (one line naming the point and key)."""
    path = Path(path)
    try:
        spec = SweepFile.model_validate(read_yaml(path) or {})
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise PipelineError(f"{path}: {where}: {first['msg'].lower()}; fix the sweep file") from None
    base = read_yaml(params_path)
    validate(base, str(params_path))
    points = []
    for changes in expand(spec):
        for key in changes:
            if key.split(".")[0] not in SWEPT_SECTIONS:
                raise PipelineError(f"{path}: '{key}' cannot vary in a sweep: only model.* and train.* keys do"
                                    " (every point shares one download and preprocess)")
        name = point_name(changes)
        point = Point(name, changes)
        validate(apply(base, {**changes, "variants": [spec.variant]}), f"{path}, point {name}")
        points.append(point)
    names = [p.name for p in points]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise PipelineError(f"{path}: point '{duplicate}' is listed twice; list each point once")
    if not points:
        raise PipelineError(f"{path}: no point; give a grid or points")
    return Sweep(path.stem, spec.variant, tuple(points), base)


def discover(folder: Path = FOLDER, params_path: str | Path = DEFAULT_PARAMS) -> dict[str, Sweep]:
    """Every sweeps/<name>.yaml, by name."""
    return {p.stem: load(p, params_path) for p in sorted(folder.glob("*.yaml"))}


def write_point(args: argparse.Namespace) -> None:
    """`mnist-pipeline sweep-point --sweep NAME --point POINT`: the point's params.yaml."""
    sweep = load(FOLDER / f"{args.sweep}.yaml", args.params)
    point = sweep.point(args.point)
    storage.write_text(sweep.folder(point) / paths.POINT_PARAMS, yaml.safe_dump(sweep.params(point), sort_keys=False))


def dvc_commands(sweep: Sweep) -> list[list[str]]:
    """`dvc exp run --queue` commands for the sweep: one per point, each named after it."""
    commands = []
    for point in sweep.points:
        sets = [f"{key}={json.dumps(value)}" for key, value in {**point.changes, "variants": [sweep.variant]}.items()]
        command = ["dvc", "exp", "run", "--queue", "--name", f"{sweep.name}-{point.name}"]
        commands.append(command + [arg for s in sets for arg in ("-S", s)])
    return commands


def queue(args: argparse.Namespace) -> None:
    """`mnist-pipeline sweep-queue sweeps/NAME.yaml`: queue the points as DVC experiments, once the
    shared stages are recorded in dvc.lock, so every experiment takes them from DVC's cache."""
    sweep = load(args.file, args.params)
    done = subprocess.run(["dvc", "status", "--json", "download", "preprocess"], capture_output=True, text=True)
    if done.returncode != 0 or done.stdout.strip() not in ("{}", ""):
        raise PipelineError("download and preprocess are not up to date in dvc.lock; run `dvc repro preprocess`"
                            " first, so every experiment shares them instead of running them again")
    listed = subprocess.run(["dvc", "exp", "list", "--name-only"], capture_output=True, text=True)
    existing = set(listed.stdout.split())
    queued = 0
    for point, command in zip(sweep.points, dvc_commands(sweep), strict=True):
        if f"{sweep.name}-{point.name}" in existing:
            print(f"{sweep.name}-{point.name}: already an experiment of this commit; not queued again", file=sys.stderr)
            continue
        print(" ".join(command), file=sys.stderr)
        subprocess.run(command, check=True)
        queued += 1
    print(f"queued {queued} experiment(s); run them with `dvc queue start -j N` (or `dvc exp run --run-all -j N`),"
          " then `dvc exp show` or `mnist-pipeline compare --dvc`", file=sys.stderr)
