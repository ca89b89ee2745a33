"""The outputs of variants no longer listed in params.yaml, moved to `.dropped-variants/<variant>/` (which git and
DVC ignore) before the report reads whole folders for DVC: otherwise they would count for DVC and not for Snakemake,
and a fresh clone would differ from the checkout that ran. Nothing is deleted; an older parked copy is replaced."""

import os
import shutil
from collections.abc import Collection
from pathlib import Path

from ..foundation import paths, variants

PARKED = Path(".dropped-variants")


def variant_paths(variant: str, root: Path = Path(".")) -> list[Path]:
    """Every output one variant's stages write under `root`, their provenance records included."""
    artefacts = [a for a in paths.ARTEFACTS if a.per_variant]
    records = [paths.record(stage, True) for stage in sorted({a.made_by for a in artefacts})]
    return [a.at(variant, root) for a in (*artefacts, *records)]


def left(listed: Collection[str], root: Path = Path(".")) -> dict[str, list[Path]]:
    """{variant: its outputs there} of the known variants `listed` leaves out, for those that left any."""
    found = {v: [p for p in variant_paths(v, root) if p.exists() or p.is_symlink()] for v in variants.names()}
    return {variant: paths for variant, paths in found.items() if paths and variant not in listed}


def park(listed: Collection[str], root: Path = Path(".")) -> dict[str, int]:
    """Move every known variant's outputs that `listed` leaves out to PARKED/<variant>/; {variant: files moved}."""
    moved: dict[str, int] = {}
    for variant, found in left(listed, root).items():
        parked = root / PARKED / variant
        shutil.rmtree(parked, ignore_errors=True)
        moved[variant] = sum(sum(1 for _ in path.rglob("*")) if path.is_dir() else 1 for path in found)
        for path in found:
            target = parked / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
    return moved
