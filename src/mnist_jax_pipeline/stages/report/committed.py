"""This run against the committed baseline: each variant's test accuracy and median epoch now and as
git's HEAD holds them (metrics/train/<variant>.json, metrics/evaluate/<variant>.json), with the commit
that last changed them. Outside a git repository, or for a variant never committed, there is nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic import ValidationError

from ...artefacts.evaluation import EvalHeadline
from ...artefacts.training import TrainHeadline
from ...foundation import paths
from .inputs import VariantResults
from .provenance import git

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommittedRow:
    """One variant now and in the committed baseline."""

    name: str
    commit: str  # short hash of the last commit that changed the variant's metrics
    test_accuracy: float
    committed_test_accuracy: float
    epoch_seconds: float  # the median epoch after the first
    committed_epoch_seconds: float

    @property
    def epoch_change(self) -> float | None:
        """The median epoch's relative change since the commit (+0.1: a tenth longer)."""
        if self.committed_epoch_seconds <= 0:
            return None
        return self.epoch_seconds / self.committed_epoch_seconds - 1


def _committed(path: str) -> str | None:
    """The text of `path` (relative to the current folder) at HEAD, or None where git has none."""
    return git("show", f"HEAD:./{path}")


def compare_variant(v: VariantResults) -> CommittedRow | None:
    """The variant now and at HEAD; None when HEAD has no metrics of it (or none this version reads)."""
    train_path, eval_path = paths.TRAIN_HEADLINE.at(v.name).as_posix(), paths.EVAL_HEADLINE.at(v.name).as_posix()
    train_text, eval_text = _committed(train_path), _committed(eval_path)
    if train_text is None or eval_text is None:
        return None
    try:
        train, evaluation = TrainHeadline.model_validate_json(train_text), EvalHeadline.model_validate_json(eval_text)
    except ValidationError:
        log.info("HEAD:%s or HEAD:%s is not in today's format: no comparison of %s", train_path, eval_path, v.name)
        return None
    commit = (git("log", "-1", "--format=%h", "HEAD", "--", f"./{train_path}", f"./{eval_path}") or "").strip()
    return CommittedRow(
        name=v.name,
        commit=commit or "HEAD",
        test_accuracy=v.evaluation.test_accuracy,
        committed_test_accuracy=evaluation.test_accuracy,
        epoch_seconds=v.train.epoch_seconds_median,
        committed_epoch_seconds=train.epoch_s,
    )


def against_committed(results: tuple[VariantResults, ...]) -> list[CommittedRow]:
    """Every variant that HEAD holds metrics of, now and then."""
    return [row for v in results if (row := compare_variant(v)) is not None]
