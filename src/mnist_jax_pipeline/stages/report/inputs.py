"""Every artefact the report shows, read through its typed format (artefacts/).

A missing input names the stage that makes it; a corrupt or mistyped one names the file and
the stage to re-run. The profile summaries are optional: without one the report says how to make it.
"""

from typing import NamedTuple

import numpy as np

from ...artefacts import evaluation, training
from ...artefacts.dataset import Manifest, Stats, load_split, read_manifest, read_stats
from ...artefacts.evaluation import EvalDetails, EvalMetrics
from ...artefacts.profile_summary import ProfileSummary, read_summary
from ...foundation import paths


class VariantResults(NamedTuple):
    """Everything the train and evaluate stages wrote for one variant."""

    name: str
    train: training.TrainMetrics
    run: training.RunInfo
    history: list[training.EpochRow]
    evaluation: EvalMetrics
    details: EvalDetails


class Artefacts(NamedTuple):
    """Every input of the report stage."""

    manifest: Manifest
    stats: Stats
    test_images: np.ndarray  # (N, 28, 28) float32, as preprocessed
    variants: tuple[VariantResults, ...]
    profiles: dict[str, ProfileSummary]  # by variant; a variant whose profile stage has not run is absent


def read_variant(variant: str, test_count: int) -> VariantResults:
    """Train metrics, run, history and evaluation of one variant, checked against the test split."""
    return VariantResults(
        name=variant,
        train=training.read_metrics(variant),
        run=training.read_run(variant),
        history=training.read_history(variant),
        evaluation=evaluation.read_metrics(variant),
        details=evaluation.read_details(variant, test_count),
    )


def read_all(variants: tuple[str, ...]) -> Artefacts:
    """Every input of the report stage in the current folder, checked."""
    test_images = load_split(paths.PROCESSED.path, "test")[0].reshape(-1, 28, 28)
    return Artefacts(
        manifest=read_manifest(paths.RAW.path),
        stats=read_stats(paths.PROCESSED.path),
        test_images=test_images,
        variants=tuple(read_variant(v, len(test_images)) for v in variants),
        profiles={v: summary for v in variants if (summary := read_summary(v)) is not None},
    )
