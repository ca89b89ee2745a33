"""The Snakemake view of the stage table: files, since Snakemake compares file times."""

from __future__ import annotations

from functools import cache

from ..foundation import paths
from .stage_table import STAGES, Stage, get


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
    them as a parameter, the key of Snakemake's between-workflow cache (orchestration/snakemake_rules.py)."""
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
